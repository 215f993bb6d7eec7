#!/usr/bin/env python3
"""Chaos tier: a real `agentd serve` under concurrent load, killed with -9 at
random instants, many times in one run; then `agentd run` killed during its
launch. After each kill and restart it checks:

  - no process of the killed daemon's runs is alive (every run cgroup leaf of
    its pid is empty within a moment: parent-death signal, pid namespaces);
  - every client call ended with an error (ConnectionLost / DaemonUnavailable)
    within a moment of the kill, none hung;
  - the restarted daemon left no run cgroup of the killed one, closed every
    started run (each start record has an exit record; the abandoned ones say
    so), keeps every acknowledged run (a reply was received: both records),
    integrity_check is ok, and the next exec works (the recovery time is from
    the restart to that exec's reply).

Load: exec loops writing and reading a workdir file, streamed execs, execs
cancelled by client_ref, and time-boxed grant switches.

    chaos.py AGENTD RULES_DIR [--kills N] [--seed S]

Prints the seed (replay with --seed), then the figures: kills survived, runs
acknowledged and checked, the slowest recovery. Exit 0 only if every check held.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import bulwark_client as bc  # noqa: E402
from bulwark_host import cgroup2_mount, own_cgroup  # noqa: E402,F401

RUN_START, RUN_EXIT = 2, 3
failures: list[str] = []


def check(ok: bool, what: str) -> bool:
    if not ok:
        failures.append(what)
        print(f"CHAOS FAIL: {what}", flush=True)
    return ok


class Env:
    def __init__(self, agentd: str, rules: str, prefix: str = "bulwark-chaos"):
        self.agentd, self.rules = agentd, rules
        self.dir = tempfile.mkdtemp(prefix=prefix + "-")
        os.chmod(self.dir, 0o711)
        self.state = os.path.join(self.dir, "state")
        self.work = os.path.join(self.dir, "work")
        self.sock = os.path.join(self.dir, "agentd.sock")
        name = f"{prefix}-{os.getpid()}"
        self.pin_root = f"/sys/fs/bpf/{name}"
        base = cgroup2_mount() + own_cgroup().rstrip("/")
        self.cgroup_parent = f"{base}/{name}"
        self.leaf_dirs = [self.cgroup_parent, base]  # where run leaves live (v2)
        self.proc: subprocess.Popen | None = None
        self.logs = 0
        self.extra: list[str] = []  # more `agentd serve` arguments

    def start(self) -> float:
        self.logs += 1
        log = open(os.path.join(self.dir, f"agentd-{self.logs}.log"), "w")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [self.agentd, "serve", "--state-dir", self.state, "--rules", self.rules, "--work-root", self.work,
             "--socket", self.sock, "--http", "off", "--bpf-pin-root", self.pin_root,
             "--bpf-cgroup-parent", self.cgroup_parent, *self.extra],
            stdout=log, stderr=subprocess.STDOUT)
        api = bc.Client.unix(self.sock, timeout=30, retry_unavailable=0.5)
        for _ in range(120):
            try:
                api.health()
                return t0
            except bc.DaemonUnavailable:
                if self.proc.poll() is not None:
                    break
        log.close()
        with open(log.name) as f:
            tail = f.read()[-2000:]
        failures.append(f"agentd serve did not start (status {self.proc.poll()})")
        raise SystemExit(f"agentd serve did not start (status {self.proc.poll()}):\n{tail}")

    def db(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{os.path.join(self.state, 'audit.db')}?mode=ro", uri=True, timeout=30)

    def leaves_of(self, pid: int) -> dict[str, str]:
        """Run leaves of daemon pid -> the processes in each."""
        out = {}
        for d in self.leaf_dirs:
            try:
                names = os.listdir(d)
            except FileNotFoundError:
                continue
            for n in names:
                if n.startswith(f"bulwark-run-{pid}-"):
                    try:
                        with open(os.path.join(d, n, "cgroup.procs")) as f:
                            out[os.path.join(d, n)] = f.read().strip()
                    except FileNotFoundError:
                        pass
        return out

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.pin_root, ignore_errors=True)
        try:
            os.rmdir(self.cgroup_parent)
        except OSError:
            pass
        if not failures:
            shutil.rmtree(self.dir, ignore_errors=True)


class McpSession:
    """`agentd mcp` on stdio, one session for the whole tier: it outlives
    every daemon it talks to (it waits for the restart, then goes on in a new
    task)."""

    def __init__(self, env: Env):
        self.log = open(os.path.join(env.dir, "agentd-mcp.log"), "w")
        self.p = subprocess.Popen([env.agentd, "mcp", "--socket", env.sock, "--tools", "sh", "--label", "chaos mcp"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        self.next_id = 0
        self.lock = threading.Lock()
        r = self.rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "chaos", "version": "0"}}, timeout=30)
        if "result" not in r:
            raise SystemExit(f"agentd mcp did not start a session: {r}")
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg: dict):
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()

    def rpc(self, method: str, params: dict, timeout: float) -> dict:
        """One call at a time (the chaos load has one MCP thread)."""
        with self.lock:
            self.next_id += 1
            self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
            fd = self.p.stdout.fileno()
            if not select.select([fd], [], [], timeout)[0]:
                return {"timeout": timeout}
            line = self.p.stdout.readline()
            return json.loads(line) if line else {"eof": True}

    def sh(self, script: str, timeout: float = 60) -> dict:
        return self.rpc("tools/call", {"name": "sh", "arguments": {"args": ["-c", script]}}, timeout)

    def close(self):
        self.p.stdin.close()
        try:
            self.p.wait(15)
        except subprocess.TimeoutExpired:
            self.p.kill()


class Load:
    """Client threads against one daemon until it dies."""

    def __init__(self, env: Env, rng: random.Random, round_no: int, mcp: McpSession | None = None):
        self.env, self.rng, self.round, self.mcp = env, rng, round_no, mcp
        self.stop = threading.Event()  # the MCP thread ends once the daemon is killed
        self.mcp_calls = 0
        self.mcp_renewed = False
        self.mcp_errors: list[str] = []
        self.api = bc.Client.unix(env.sock, timeout=120)
        self.acked: list[int] = []      # run ids whose reply arrived
        self.ended_at: list[float] = []  # when each thread saw the daemon gone
        self.errors: list[str] = []     # anything but the expected transport errors
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self.t0 = time.monotonic()  # when the load started

    def _thread(self, body):
        def run():
            try:
                body()
            except bc.TransportError:
                pass
            except Exception as e:  # noqa: BLE001
                with self.lock:
                    self.errors.append(f"{type(e).__name__}: {e}")
            finally:
                with self.lock:
                    self.ended_at.append(time.monotonic())
        t = threading.Thread(target=run, daemon=True)
        self.threads.append(t)
        return t

    def _ack(self, reply):
        rid = reply.get("run_id") if isinstance(reply, dict) else None
        if rid:
            with self.lock:
                self.acked.append(int(rid))

    def execs(self, n: int):
        task = self.api.create_task(["sh"], label=f"chaos {self.round} exec {n}")
        i = 0
        while True:
            i += 1
            r = task.exec("sh", ["sh", "-c", f"echo {i} > f{n}; cat f{n}"], client_ref=f"c{self.round}-{n}-{i}")
            self._ack(r)
            if r.get("exit_status") != 0 or r.get("stdout") != f"{i}\n":
                raise AssertionError(f"exec {i}: {r.get('exit_status')} {r.get('stdout')!r} {r.get('error')}")

    def streams(self):
        task = self.api.create_task(["sh"], label=f"chaos {self.round} stream")
        while True:
            for event, data in task.exec_stream("sh", ["sh", "-c", "echo a; echo b"]):
                if event == "exit":
                    self._ack(data)

    def cancels(self):
        task = self.api.create_task(["sh"], label=f"chaos {self.round} cancel")
        k = 0
        while True:
            k += 1
            ref = f"x{self.round}-{k}"
            t = threading.Timer(self.rng.uniform(0.01, 0.2), lambda: self._quiet(task.cancel, ref))
            t.start()
            self._ack(task.exec("sh", ["sh", "-c", "while :; do :; done"], client_ref=ref, timeout_ms=3000))
            t.join()

    def grants(self):
        narrow = {"files": [{"path": "${workdir}/out", "rights": ["create", "write"]}]}
        task = self.api.create_task(["sh"], grant=narrow, label=f"chaos {self.round} grant")
        while True:
            task.update_grant({"files": [{"path": "${workdir}", "rights": ["create", "write"]}]},
                              expires_in_ms=self.rng.randint(20, 200))
            self._ack(task.exec("sh", ["sh", "-c", "echo x > top.txt"]))
            task.update_grant(narrow)

    def mcp_calls_loop(self):
        """MCP tool calls until the kill: each a run of the session's task, or,
        for the one in flight at the kill, an error that says agentd ended."""
        while not self.stop.is_set():
            self.mcp_calls += 1
            i = self.mcp_calls
            r = self.mcp.sh(f"echo m{i} > m; cat m")
            res = r.get("result", {})
            sc = res.get("structuredContent", {})
            text = (res.get("content") or [{}])[0].get("text", "")
            if "agentd restarted" in text:
                self.mcp_renewed = True
            if res.get("isError") is False and sc.get("stdout") == f"m{i}\n":
                self._ack(sc)
                continue
            if "result" in r and (self.stop.is_set() or "agentd ended during the call" in text):
                return
            self.mcp_errors.append(f"mcp call {i}: {str(r)[:500]}")
            return

    @staticmethod
    def _quiet(fn, *a):
        try:
            fn(*a)
        except bc.BulwarkError:
            pass

    def start(self):
        self.t0 = time.monotonic()
        for n in range(6):
            self._thread(lambda n=n: self.execs(n)).start()
        for body in (self.streams, self.cancels, self.grants):
            self._thread(body).start()
        if self.mcp:
            self.mcp_thread = threading.Thread(target=self.mcp_calls_loop, daemon=True)
            self.mcp_thread.start()


def daemon_round(env: Env, rng: random.Random, round_no: int, figures: dict, mcp: McpSession) -> None:
    pid = env.proc.pid
    load = Load(env, rng, round_no, mcp)
    load.start()
    time.sleep(rng.uniform(0.3, 2.0))
    killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    load.stop.set()
    env.proc.wait()
    # Clients: every call ends with an error at once, none hangs.
    for t in load.threads:
        t.join(timeout=max(0.0, killed_at + 10 - time.monotonic()))
    hung = sum(t.is_alive() for t in load.threads)
    check(hung == 0, f"round {round_no}: {hung} client thread(s) still blocked 10 s after the kill")
    check(not load.errors, f"round {round_no}: client errors other than the daemon's death: {load.errors[:3]}")
    if load.ended_at:
        figures["slowest_client_error_s"] = max(figures["slowest_client_error_s"], max(load.ended_at) - killed_at)
    # No process of its runs alive: each leaf of its pid empties within a moment.
    left = {}
    for _ in range(300):
        left = {k: v for k, v in env.leaves_of(pid).items() if v}
        if not left:
            break
        time.sleep(0.01)
    check(not left, f"round {round_no}: processes of the killed daemon's runs still alive 3 s later: {left}")
    # Restart; the next exec must work.
    t0 = env.start()
    api = bc.Client.unix(env.sock, timeout=60)
    task = api.create_task(["sh"], label=f"chaos {round_no} after")
    r = task.exec("sh", ["sh", "-c", "echo back"])
    recovery = time.monotonic() - t0
    figures["slowest_recovery_s"] = max(figures["slowest_recovery_s"], recovery)
    check(r.get("exit_status") == 0 and r.get("stdout") == "back\n", f"round {round_no}: exec after restart: {r}")
    # The MCP session outlived the daemon: its call in flight ended with an
    # error that says so, or waited for the restart; the next call works in a
    # new task, and says why.
    load.mcp_thread.join(timeout=45)
    check(not load.mcp_thread.is_alive(), f"round {round_no}: the MCP session's call still blocked after the restart")
    check(not load.mcp_errors, f"round {round_no}: MCP calls failed otherwise than by the daemon's death: {load.mcp_errors}")
    m = mcp.sh("echo again")
    res = m.get("result", {})
    text = (res.get("content") or [{}])[0].get("text", "")
    check(res.get("isError") is False and res.get("structuredContent", {}).get("stdout") == "again\n",
          f"round {round_no}: MCP call after the restart: {m}")
    check("agentd restarted" in text or load.mcp_renewed,
          f"round {round_no}: the MCP session did not say its task was renewed: {text[:300]}")
    figures["mcp_calls"] += load.mcp_calls
    check(not env.leaves_of(pid), f"round {round_no}: run cgroups of the killed daemon left: {env.leaves_of(pid)}")
    rec = api.health()["host"].get("reconciliation", {})
    with env.db() as db:
        check(db.execute("PRAGMA integrity_check").fetchone()[0] == "ok", f"round {round_no}: integrity_check")
        open_runs = db.execute(
            "SELECT count(*) FROM records s WHERE s.kind = ? AND NOT EXISTS "
            "(SELECT 1 FROM records e WHERE e.kind = ? AND e.run_id = s.run_id)", (RUN_START, RUN_EXIT)).fetchone()[0]
        # the exec above has ended; nothing else runs
        check(open_runs == 0, f"round {round_no}: {open_runs} started run(s) without an exit record after restart")
        for rid in load.acked:
            kinds = {k for (k,) in db.execute("SELECT kind FROM records WHERE run_id = ?", (rid,))}
            check({RUN_START, RUN_EXIT} <= kinds, f"round {round_no}: acknowledged run {rid} lacks records: {kinds}")
        abandoned = db.execute("SELECT count(*) FROM records WHERE kind = ? AND "
                               "json_extract(detail, '$.outcome') = 'abandoned'", (RUN_EXIT,)).fetchone()[0]
    figures["kills"] += 1
    figures["acked"] += len(load.acked)
    figures["abandoned"] = abandoned
    print(f"round {round_no}: killed pid {pid} after {killed_at - load.t0:.2f} s; "
          f"{len(load.acked)} run(s) acknowledged and checked; restart to first exec {recovery:.2f} s; "
          f"reconciled: {rec.get('summary', '?')}", flush=True)


def cli_round(env: Env, rng: random.Random, round_no: int, workdir: str) -> None:
    """`agentd run` killed at a random instant of its launch."""
    p = subprocess.Popen([env.agentd, "run", "--rules", env.rules, "--tool", "sh", "--workdir", workdir,
                          "--bpf-pin-root", env.pin_root, "--bpf-cgroup-parent", env.cgroup_parent,
                          "--", "/bin/sh", "-c", "sleep 5"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(rng.uniform(0.0, 0.4))
    p.kill()
    p.wait()
    left = {}
    for _ in range(300):
        left = {k: v for k, v in env.leaves_of(p.pid).items() if v}
        if not left:
            break
        time.sleep(0.01)
    check(not left, f"agentd run round {round_no}: processes of its launch alive 3 s after the kill: {left}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("agentd")
    ap.add_argument("rules")
    ap.add_argument("--kills", type=int, default=int(os.environ.get("BULWARK_CHAOS_KILLS", "12")))
    ap.add_argument("--cli-kills", type=int, default=8)
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("chaos: needs root (real sandboxes)")
        return 77
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 32)
    print(f"chaos seed {seed} (replay: chaos.py AGENTD RULES --seed {seed})", flush=True)
    rng = random.Random(seed)
    env = Env(a.agentd, a.rules)
    figures = {"kills": 0, "acked": 0, "abandoned": 0, "slowest_recovery_s": 0.0, "slowest_client_error_s": 0.0,
               "mcp_calls": 0}
    mcp = None
    try:
        env.start()
        mcp = McpSession(env)
        for i in range(a.kills):
            daemon_round(env, rng, i, figures, mcp)
        mcp.close()
        env.stop()
        wd = os.path.join(env.dir, "cli-work")
        os.makedirs(wd)
        os.chown(wd, 65534, 65534)
        for i in range(a.cli_kills):
            cli_round(env, rng, i, wd)
        # What a daemon that died leaves running is killed by the next one: a
        # process planted in a leaf named for a dead launcher's run.
        gone = subprocess.Popen(["true"])
        gone.wait()
        planted_leaf = os.path.join(env.cgroup_parent, f"bulwark-run-{gone.pid}-1-r999999")
        os.mkdir(planted_leaf)
        planted = subprocess.Popen(["sleep", "600"])
        with open(os.path.join(planted_leaf, "cgroup.procs"), "w") as f:
            f.write(str(planted.pid))
        # The next daemon reaps what the killed `agentd run`s left.
        env.start()
        try:
            planted.wait(5)
        except subprocess.TimeoutExpired:
            planted.kill()
            check(False, "a process in a dead launcher's run cgroup survived the restart")
        check(not os.path.exists(planted_leaf), f"the planted leaf is still there: {planted_leaf}")
        rec = bc.Client.unix(env.sock).health()["host"].get("reconciliation", {})
        check(any(l.get("path") == planted_leaf and l.get("processes_killed") == 1 for l in rec.get("leaves", [])),
              f"the reconciliation does not report the planted process killed: {rec}")
        for n in os.listdir(env.cgroup_parent):
            if n.startswith("bulwark-run-") or n.startswith("canary-"):  # a run's, a truth check's
                pid = int(n.split("-")[2 if n.startswith("bulwark-run-") else 1])
                check(os.path.exists(f"/proc/{pid}"), f"a leaf of a dead launcher is left after restart: {n}")
    finally:
        env.cleanup()
    print(f"CHAOS kills survived {figures['kills']}/{a.kills} (+{a.cli_kills} agentd run launches killed); "
          f"runs acknowledged and checked {figures['acked']} ({figures['mcp_calls']} MCP calls of one session "
          f"that outlived every kill); runs closed as abandoned {figures['abandoned']}; "
          f"slowest recovery (restart to first exec) {figures['slowest_recovery_s']:.2f} s; "
          f"slowest client error after a kill {figures['slowest_client_error_s']:.2f} s; seed {seed}", flush=True)
    if failures:
        print(f"CHAOS: {len(failures)} check(s) failed (seed {seed})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
