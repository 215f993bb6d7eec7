#!/usr/bin/env python3
"""Faults of the world: a real `agentd serve` meets a fault that is not its
own, during a run; each fault must give a clear error or a recorded gap, and
the daemon must serve again once the fault is gone.

  disk_full       the audit store's filesystem fills during a run
  kaudit_overrun  the kernel audit socket overflows (the reader stalls while
                  a tool floods Landlock denials)
  ringbuf_stuck   the BPF ring buffer's reader is held back by a peer
                  process that holds the pin root's lock (a stopped
                  `agentd run`): a run's events are lost while the ring is
                  full; a launch that needs the lock is refused, not hung
  cgroup_busy     a run's cgroup cannot be removed (something made a child
                  cgroup in it)
  workdir_gone    the task's work directory is removed during a run

    faults.py AGENTD RULES_DIR NETPROBE [--only NAME]...

Exit 0 only if every check held; 77 when not root.
"""
from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import chaos  # noqa: E402
from chaos import bc, check, failures  # noqa: E402

GAP = 5

# A tool of this tier: the network probe connecting a UDP socket to an
# address no rule allows, back to back (one ring buffer event each, every one
# refused by the sock_addr program; Landlock judges TCP only), until
# <workdir>/stop exists.
NETLOOP = """tool: netloop
description: connects to an address no rule allows, in a loop (faults tier)
extends: base/minimal
binaries: [{probe}]
files:
  read: ["${{workdir}}"]
  write: ["${{workdir}}"]
  create: ["${{workdir}}"]
network:
  families: [inet]
  connect:
    - {{ cidr: 127.0.0.1/32, ports: [9], proto: udp }}
limits:
  timeout: 1m
"""


def wait_for(pred, timeout: float, step: float = 0.05):
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() > end:
            return v
        time.sleep(step)


def gaps_since(env: chaos.Env, seq: int) -> list[tuple[int, str]]:
    with env.db() as db:
        return list(db.execute("SELECT seq, detail FROM records WHERE kind = ? AND seq > ?", (GAP, seq)))


def last_seq(env: chaos.Env) -> int:
    with env.db() as db:
        return db.execute("SELECT coalesce(max(seq), 0) FROM records").fetchone()[0]


def run_records(env: chaos.Env, run_id: int) -> dict[int, str]:
    with env.db() as db:
        return {k: d for (k, d) in db.execute("SELECT kind, detail FROM records WHERE run_id = ? AND kind IN (2, 3)",
                                              (run_id,))}


def exec_works(api: bc.Client, what: str, tool: str = "sh") -> bool:
    try:
        r = api.create_task([tool], label=f"faults {what} after").exec("sh", ["sh", "-c", "echo back"])
    except bc.BulwarkError as e:
        return check(False, f"{what}: the next exec failed once the fault was gone: {e}")
    return check(r.get("exit_status") == 0 and r.get("stdout") == "back\n",
                 f"{what}: the next exec after the fault: {r.get('exit_status')} {r.get('stdout')!r}")


def stream_run(task: bc.Task, tool: str, argv: list[str], started: threading.Event, box: dict, **kw):
    """Runs a streamed exec on a thread: box["run"] (its start), box["exit"] or box["error"]."""
    def body():
        try:
            for event, data in task.exec_stream(tool, argv, **kw):
                if event == "run":
                    box["run"] = data
                    started.set()
                elif event == "exit":
                    box["exit"] = data
        except bc.BulwarkError as e:
            box["error"] = e
        finally:
            started.set()
    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t


def busy_run(env: chaos.Env, what: str, script: str = "while :; do :; done"):
    """A task and a streamed sh run of `script` (1.5 s timeout), started:
    (client, task, thread, box)."""
    api = bc.Client.unix(env.sock, timeout=60)
    task = api.create_task(["sh"], label=f"faults {what}")
    started, box = threading.Event(), {}
    t = stream_run(task, "sh", ["sh", "-c", "echo go; " + script], started, box, timeout_ms=1500)
    started.wait(30)
    return api, task, t, box


def warnings_of(reply: dict) -> str:
    return "\n".join(reply.get("report", {}).get("warnings", []) or [])


# ---------------------------------------------------------------- faults

def disk_full(env: chaos.Env) -> None:
    """The store's filesystem fills during a run, then space comes back."""
    api, task, t, box = busy_run(env, "disk_full")
    filler = os.path.join(env.fs, "filler")
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 20))
        except OSError:
            pass
    t.join(60)
    check("exit" in box, f"disk_full: the run during the fault got no exit event: {box.get('error')}")
    h = api.health()
    check(h.get("status") == "refusing" and "disk full" in h.get("audit", {}).get("reason", ""),
          f"disk_full: /v1/health while the disk is full: {h.get('status')} {h.get('audit')}")
    try:
        api.create_task(["sh"], label="faults disk_full refused").exec("sh", ["sh", "-c", "echo no"])
        check(False, "disk_full: an exec was accepted while the store cannot write")
    except bc.ServiceUnavailable as e:
        check(e.code == "store_refusing" and "disk full" in e.message,
              f"disk_full: the refusal does not say why: {e.code} {e.message}")
    os.unlink(filler)
    back = wait_for(lambda: api.health().get("status") == "ok", 10)
    check(bool(back), f"disk_full: still refusing 10 s after space came back: {api.health().get('audit')}")
    exec_works(api, "disk_full")
    if "exit" in box:
        rid = box["exit"]["run_id"]
        recs = wait_for(lambda: run_records(env, rid) if len(run_records(env, rid)) == 2 else None, 10)
        check(bool(recs), f"disk_full: run {rid} (during the fault) lacks its start/exit records once space is back")
    with env.db() as db:
        check(db.execute("PRAGMA integrity_check").fetchone()[0] == "ok", "disk_full: integrity_check")


def kaudit_overrun(env: chaos.Env) -> None:
    """The kernel audit socket overflows: a recorded gap, then denials recorded again."""
    api = bc.Client.unix(env.sock, timeout=120)
    task = api.create_task(["sh"], label="faults kaudit")
    seq0 = last_seq(env)
    started, box = threading.Event(), {}
    flood = "echo go; i=0; while [ $i -lt 400000 ]; do true </etc/passwd 2>/dev/null; i=$((i+1)); done"
    t = stream_run(task, "sh", ["sh", "-c", flood], started, box, timeout_ms=6000)
    started.wait(30)
    time.sleep(0.3)
    os.kill(env.proc.pid, signal.SIGSTOP)   # the reader stalls; the kernel keeps sending
    time.sleep(3)
    os.kill(env.proc.pid, signal.SIGCONT)
    t.join(120)
    check("exit" in box, f"kaudit_overrun: the run got no exit event: {box.get('error')}")
    gaps = wait_for(lambda: [d for _, d in gaps_since(env, seq0) if "kernel_audit" in d], 10)
    check(bool(gaps), "kaudit_overrun: no gap record names the kernel audit loss")
    if "exit" in box:
        w = warnings_of(box["exit"])
        check("kernel audit" in w and ("loss" in w or "overrun" in w),
              f"kaudit_overrun: the run's report does not say its decisions may be incomplete: {w!r}")
    ka = api.health().get("host", {}).get("kernel_audit", {})
    check(any(ka.get(k, 0) for k in ("socket_overruns", "kernel_lost_since_start")),
          f"kaudit_overrun: /v1/health kernel_audit shows no loss: {ka}")
    # Served again: one denial of a new run is recorded.
    r = task.exec("sh", ["sh", "-c", "true </etc/passwd"])
    rid = r["run_id"]
    with env.db() as db:
        n = db.execute("SELECT count(*) FROM records WHERE run_id = ? AND kind = 1 AND decision = 1",
                       (rid,)).fetchone()[0]
    check(n >= 1, f"kaudit_overrun: the denial of the run after the fault was not recorded ({n} rows)")


def pin_lock(env: chaos.Env) -> int:
    fd = os.open(env.pin_root, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def ringbuf_stuck(env: chaos.Env) -> None:
    api = bc.Client.unix(env.sock, timeout=120)
    task = api.create_task(["netloop"], label="faults ringbuf")
    wd = task.refresh()["workdir"]
    # 1. A peer holds the lock before the launch: refused at once with who holds it.
    fd = pin_lock(env)
    t0 = time.monotonic()
    try:
        task.exec("netloop", [env.probe, "udp-connect", "10.255.255.1", "80"])
        check(False, "ringbuf_stuck: a launch went ahead while a peer held the pin root's lock")
    except bc.ServiceUnavailable as e:
        check(str(os.getpid()) in e.message, f"ringbuf_stuck: the refusal does not name the holder: {e.message}")
    except bc.BulwarkError as e:
        check(False, f"ringbuf_stuck: a launch under a held lock: {e}")
    took = time.monotonic() - t0
    check(took < 20, f"ringbuf_stuck: the refused launch took {took:.1f} s")
    os.close(fd)
    # 2. The reader is held back during a run that floods events: the loss is a gap.
    seq0 = last_seq(env)
    started, box = threading.Event(), {}
    t = stream_run(task, "netloop", [env.probe, "loop", wd, "udp-connect", "10.255.255.1", "80"], started, box,
                   timeout_ms=30000)
    started.wait(30)
    wait_for(lambda: os.path.exists(os.path.join(wd, "started")), 10)
    fd = pin_lock(env)
    time.sleep(4)   # ~4 MiB of events at this rate fill the ring several times
    h = api.health().get("host", {}).get("bpf", {})
    reader = h.get("reader", {})
    check(reader.get("state") == "blocked" and str(os.getpid()) in str(reader.get("by")),
          f"ringbuf_stuck: /v1/health does not show the reader blocked by pid {os.getpid()}: {reader}")
    os.close(fd)
    with open(os.path.join(wd, "stop"), "w"):
        pass
    t.join(120)
    check("exit" in box, f"ringbuf_stuck: the run got no exit event: {box.get('error')}")
    gaps = wait_for(lambda: [d for _, d in gaps_since(env, seq0) if "ring buffer" in d], 10)
    check(bool(gaps), "ringbuf_stuck: no gap record for the events the full ring buffer lost "
          f"(the probe: {box.get('exit', {}).get('stdout', '')!r}; bpf: {api.health().get('host', {}).get('bpf', {}).get('drops')})")
    if "exit" in box:
        w = warnings_of(box["exit"])
        check("ring buffer" in w, f"ringbuf_stuck: the run's report does not say events were lost: {w!r}")
    reader = api.health().get("host", {}).get("bpf", {}).get("reader", {})
    check(reader.get("state") == "reading", f"ringbuf_stuck: the reader did not resume: {reader}")
    # 3. Served again: a denied connect of a new run is recorded.
    r = task.exec("netloop", [env.probe, "udp-connect", "10.255.255.1", "80"])
    with env.db() as db:
        n = db.execute("SELECT count(*) FROM records WHERE run_id = ? AND kind = 1 AND decision = 1",
                       (r["run_id"],)).fetchone()[0]
    check(n >= 1, f"ringbuf_stuck: the denial of the run after the fault was not recorded ({n} rows)")
    # 4. A run that ends while the lock is held: its release is deferred, the
    # exec still answers, and the binding goes once the lock is free.
    deferred0 = api.health()["host"]["bpf"].get("deferred_releases", 0)
    started, box = threading.Event(), {}
    for f in ("stop", "started"):
        os.unlink(os.path.join(wd, f))
    t = stream_run(task, "netloop", [env.probe, "loop", wd, "udp-connect", "10.255.255.1", "80"], started, box,
                   timeout_ms=30000)
    started.wait(30)
    wait_for(lambda: os.path.exists(os.path.join(wd, "started")), 10)
    fd = pin_lock(env)
    open(os.path.join(wd, "stop"), "w").close()
    t.join(60)
    check("exit" in box, f"ringbuf_stuck: a run ending under the held lock got no exit event: {box.get('error')}")
    bpf = api.health()["host"]["bpf"]
    check(bpf.get("deferred_releases", 0) > deferred0, f"ringbuf_stuck: the release was not deferred: {bpf}")
    os.close(fd)
    done = wait_for(lambda: api.health()["host"]["bpf"].get("runs_bound") == 0, 10)
    check(bool(done), f"ringbuf_stuck: the deferred release did not happen once the lock was free: "
                      f"{api.health()['host']['bpf'].get('runs_bound')} run(s) still bound")


def leaf_of(env: chaos.Env, run_id: int) -> str | None:
    for n in os.listdir(env.cgroup_parent):
        if n.startswith(f"bulwark-run-{env.proc.pid}-") and n.endswith(f"-r{run_id}"):
            return os.path.join(env.cgroup_parent, n)
    return None


def cgroup_busy(env: chaos.Env) -> None:
    api, task, t, box = busy_run(env, "cgroup")
    rid = box["run"]["run_id"]
    leaf = leaf_of(env, rid)
    check(leaf is not None, f"cgroup_busy: no cgroup leaf for run {rid}")
    if leaf is None:
        t.join(60)
        return
    os.mkdir(os.path.join(leaf, "held"))
    t.join(60)
    check("exit" in box, f"cgroup_busy: the run got no exit event: {box.get('error')}")
    if "exit" in box:
        w = warnings_of(box["exit"])
        check(leaf in w, f"cgroup_busy: the run's report does not name the cgroup it could not remove: {w!r}")
        ex = run_records(env, rid).get(3, "")
        check(leaf in ex, f"cgroup_busy: the run's exit record does not name the cgroup left: {ex}")
    left = api.health().get("host", {}).get("cgroups_left", [])
    check(any(c.get("path") == leaf for c in left), f"cgroup_busy: /v1/health does not list {leaf}: {left}")
    exec_works(api, "cgroup_busy (while the cgroup is held)")
    os.rmdir(os.path.join(leaf, "held"))
    gone = wait_for(lambda: not os.path.exists(leaf), 15)
    check(bool(gone), f"cgroup_busy: {leaf} not removed 15 s after it could be")
    left = api.health().get("host", {}).get("cgroups_left", [])
    check(not left, f"cgroup_busy: /v1/health still lists cgroups left: {left}")


def workdir_gone(env: chaos.Env) -> None:
    api, task, t, box = busy_run(env, "workdir", "while :; do echo x > f 2>/dev/null; done")
    wd = task.refresh()["workdir"]
    time.sleep(0.2)
    while os.path.exists(wd):   # the tool writes there meanwhile
        shutil.rmtree(wd, ignore_errors=True)
    t.join(60)
    check("exit" in box, f"workdir_gone: the run got no exit event: {box.get('error')}")
    if "exit" in box:
        w = warnings_of(box["exit"])
        check(wd in w and "vanished" in w, f"workdir_gone: the run's report does not say the workdir vanished: {w!r}")
        ex = run_records(env, box["exit"]["run_id"]).get(3, "")
        check("workdir_vanished" in ex, f"workdir_gone: the exit record does not say so: {ex}")
    try:
        task.exec("sh", ["sh", "-c", "echo no"])
        check(False, "workdir_gone: an exec in a task whose work directory is gone was accepted")
    except bc.Conflict as e:
        check(e.code == "workdir_gone" and wd in e.message, f"workdir_gone: unclear refusal: {e.code} {e.message}")
    except bc.BulwarkError as e:
        check(False, f"workdir_gone: unexpected error: {e}")
    exec_works(api, "workdir_gone (another task)")
    # The fault gone: the directory is back, the task runs again.
    os.mkdir(wd, 0o700)
    os.chown(wd, 65534, 65534)
    try:
        r = task.exec("sh", ["sh", "-c", "echo again > f; cat f"])
        check(r.get("stdout") == "again\n", f"workdir_gone: exec once the directory is back: {r.get('stdout')!r}")
    except bc.BulwarkError as e:
        check(False, f"workdir_gone: exec once the directory is back: {e}")
    task.close()


FAULTS = {"disk_full": disk_full, "kaudit_overrun": kaudit_overrun, "ringbuf_stuck": ringbuf_stuck,
          "cgroup_busy": cgroup_busy, "workdir_gone": workdir_gone}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("agentd")
    ap.add_argument("rules")
    ap.add_argument("netprobe", help="the network probe (tests/support/netprobe.c)")
    ap.add_argument("--only", action="append", choices=sorted(FAULTS))
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("faults: needs root (real sandboxes, a tmpfs, the pin root's lock)")
        return 77
    env = chaos.Env(a.agentd, a.rules, prefix="bulwark-faults")
    # The tier's rules: the shipped ones and netloop.
    rules = os.path.join(env.dir, "rules")
    shutil.copytree(a.rules, rules, ignore=shutil.ignore_patterns("tests"))
    with open(os.path.join(rules, "netloop.yaml"), "w") as f:
        f.write(NETLOOP.format(probe=os.path.abspath(a.netprobe)))
    env.rules = rules
    env.probe = os.path.abspath(a.netprobe)
    # The state directory on a filesystem of its own, small enough to fill.
    env.fs = os.path.join(env.dir, "fs")
    os.mkdir(env.fs)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m,mode=0700", "bulwark-faults", env.fs], check=True)
    env.state = os.path.join(env.fs, "state")
    cfg = os.path.join(env.dir, "agentd.yaml")
    with open(cfg, "w") as f:
        f.write("audit:\n  min_free_bytes: 4194304\n")
    env.extra = ["--config", cfg]
    try:
        env.start()
        for name, fn in FAULTS.items():
            if a.only and name not in a.only:
                continue
            n0 = len(failures)
            t0 = time.monotonic()
            fn(env)
            print(f"fault {name}: {'ok' if len(failures) == n0 else 'FAILED'} ({time.monotonic() - t0:.1f} s)",
                  flush=True)
            if env.proc.poll() is not None:
                check(False, f"{name}: the daemon died (status {env.proc.returncode})")
                env.start()
    finally:
        env.stop()
        if failures:  # kept for a look, with the logs
            shutil.copytree(env.state, os.path.join(env.dir, "state"), dirs_exist_ok=True)
        env.cleanup()
        subprocess.run(["umount", "-l", env.fs])
    if failures:
        print(f"FAULTS: {len(failures)} check(s) failed; logs in {env.dir}")
        return 1
    print("FAULTS: every fault gave a clear error or a recorded gap, and the daemon served again")
    return 0


if __name__ == "__main__":
    sys.exit(main())
