#!/usr/bin/env python3
"""The microVM tier against the host sandbox, side by side (docs/microvm.md).

    microvm_bench.py AGENTD RULES_DIR [--rounds N] [--cold K] [--steps]

The same shell tool (dash over its work directory) run by `agentd run`:
  host      microvm.mode off: the host sandbox
  restored  microvm.mode required, the guest restored from its snapshot
  cold      microvm.mode required, snapshots off: a cold boot each time
  runsc     gVisor's `runsc do` of the same command (where installed:
            apt-get install runsc), the peer's user-space kernel for scale:
            the host's root read-only under a tmpfs overlay, no network, no
            per-tool rules
  warm      through a real `agentd serve` of its own: exec calls of one task,
            the host sandbox's tool and the VM's alternating, the VM kept
            warm across the task's exec calls (docs/microvm.md, "Warm task
            VMs"): each call's reply time, the VM's against the host's
Host, restored and runsc runs alternate (the machine is noisy); cold runs follow.
Prints per mode the median and p90 of the whole `agentd run` process, and
for VM runs the VMM's time to the guest's readiness (boot_ms: restore or boot
to Start) and the VM's wall time, and the ratios against the host sandbox.
Under TCG (no usable KVM) these are TCG figures; the report says which.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def run(agentd, rules, wd, tool, env):
    t0 = time.monotonic()
    p = subprocess.run([agentd, "run", "--rules", rules, "--tool", tool, "--workdir", wd, "--json", "--",
                        "dash", "-c", "cat notes.txt"], capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    d = json.loads(p.stdout)
    if d["exit_status"] != 0 or d["stdout"]["data"] != "bench\n":
        sys.exit(f"{tool}: exit {d['exit_status']}: {d.get('error', '')[:500]}")
    m = d.get("microvm")
    if m:  # the report is the guest's: its launch steps are the guest's
        m["setup_us_total"] = sum(us for _, us in d["usage"]["setup_us"])
        m["steps"] = guest_steps(d)
    return wall, m


def run_runsc(wd):
    t0 = time.monotonic()
    p = subprocess.run(["runsc", "--network=none", "do", "-quiet", "dash", "-c", "cat notes.txt"], cwd=wd,
                       capture_output=True, text=True)
    wall = time.monotonic() - t0
    if p.returncode != 0 or p.stdout != "bench\n":
        sys.exit(f"runsc: exit {p.returncode}: {p.stderr[:500]}")
    return wall


class Api:
    """An `agentd serve` of its own (state, work root, socket, BPF pin root
    and cgroup parent), spoken to over its unix socket."""

    def __init__(self, agentd, rules, t):
        self.sock = os.path.join(t, "agentd.sock")
        name = "bw-microvm-bench-%d" % os.getpid()
        own = open("/proc/self/cgroup").read().split("0::", 1)[1].strip()
        v2 = next(l.split()[4] for l in open("/proc/self/mountinfo") if " - cgroup2 " in l)
        self.parent = v2 + own.rstrip("/") + "/" + name
        self.pin = "/sys/fs/bpf/" + name
        self.log = open(os.path.join(t, "agentd.log"), "w")
        self.p = subprocess.Popen([agentd, "serve", "--state-dir", os.path.join(t, "state"), "--work-root",
                                   os.path.join(t, "work"), "--socket", self.sock, "--http", "off", "--rules", rules,
                                   "--bpf-pin-root", self.pin, "--bpf-cgroup-parent", self.parent],
                                  stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(300):
            if os.path.exists(self.sock):
                break
            time.sleep(0.1)

    def call(self, method, path, body=None):
        s = socket.socket(socket.AF_UNIX)
        s.connect(self.sock)
        b = json.dumps(body).encode() if body is not None else b""
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: agentd\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(b)}\r\nConnection: close\r\n\r\n".encode() + b)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
        s.close()
        return json.loads(data.partition(b"\r\n\r\n")[2])

    def close(self):
        self.p.terminate()
        self.p.wait()
        shutil.rmtree(self.pin, ignore_errors=True)
        try:
            os.rmdir(self.parent)
        except OSError:
            pass


def warm_execs(agentd, rules, t, rounds):
    """Reply times of exec calls in one task, host tool and VM tool alternating."""
    api = Api(agentd, rules, t)
    try:
        task = api.call("POST", "/v1/tasks", {"tools": ["hostsh", "vmsh"]})["id"]
        host, warm, first, steps = [], [], None, []
        for i in range(rounds + 1):
            for tool, into in (("hostsh", host), ("vmsh", warm)):
                t0 = time.monotonic()
                d = api.call("POST", f"/v1/tasks/{task}/exec", {"tool": tool, "argv": ["dash", "-c", "echo bench"]})
                took = time.monotonic() - t0
                if d.get("exit_status") != 0 or d.get("stdout") != "bench\n":
                    sys.exit(f"{tool} through the API: {json.dumps(d)[:800]}")
                start = (d["report"].get("microvm") or {}).get("start", "")
                if tool == "vmsh" and i == 0:
                    first = took  # the VM's own start (restored): not a warm exec
                    continue
                if tool == "vmsh":
                    assert start.startswith("warm"), start
                    steps.append(guest_steps(d["report"]))
                    steps[-1]["host.vm_run_wall"] = d["report"]["microvm"]["wall_ms"]
                    steps[-1]["host.reply"] = took * 1000
                into.append(took)
        api.call("DELETE", f"/v1/tasks/{task}")
        return host, warm, first, steps
    finally:
        api.close()


def restore_to_exec(m):
    """The VMM's start to the tool's exec in the guest: restore to Start
    (boot_ms), then the guest's steps (guest.timings_ms) and its launch's
    steps before the exec (usage.setup_us of the guest's report)."""
    g = m["guest"]["timings_ms"]
    guest = sum(g.get(k, 0) for k in ("start_parse", "bundle", "shares", "prepare"))
    return (m["boot_ms"] + guest) / 1000 + m["setup_us_total"] / 1e6


def guest_steps(report):
    """A VM run's steps in the guest, in ms: the agent's (guest.timings_ms)
    and its launch's (usage.setup_us)."""
    out = dict(report["microvm"]["guest"].get("timings_ms", {}))
    for name, us in report["usage"]["setup_us"]:
        out["launch." + name] = us / 1000
    return out


def median_steps(runs):
    keys = sorted({k for r in runs for k in r})
    return "  ".join(f"{k}={statistics.median([r.get(k, 0) for r in runs]):.1f}" for k in keys)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("agentd")
    ap.add_argument("rules")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--cold", type=int, default=3)
    ap.add_argument("--steps", action="store_true", help="also the guest's steps, median per step")
    a = ap.parse_args()
    t = tempfile.mkdtemp(prefix="bw-microvm-bench.")
    try:
        rules = os.path.join(t, "rules")
        os.makedirs(rules)
        for d in ("base", "vmm"):
            shutil.copytree(os.path.join(a.rules, d), os.path.join(rules, d))
        for name, mode in (("hostsh", "off"), ("vmsh", "required")):
            with open(os.path.join(rules, name + ".yaml"), "w") as f:
                f.write(f"tool: {name}\nextends: base/minimal\nbinaries: [/usr/bin/dash]\n"
                        f"files:\n  read: [\"${{workdir}}\"]\n  write: [\"${{workdir}}\"]\n"
                        f"  create: [\"${{workdir}}\"]\nexec:\n  allow: [/usr/bin/dash, /usr/bin/cat]\n"
                        f"microvm: {{ mode: {mode} }}\n")
        wd = os.path.join(t, "wd")
        os.makedirs(wd)
        os.chmod(t, 0o755)
        os.chmod(wd, 0o755)
        with open(os.path.join(wd, "notes.txt"), "w") as f:
            f.write("bench\n")
        env = dict(os.environ, BULWARK_MICROVM_SNAPSHOTS=os.path.join(t, "snapshots"))
        run(a.agentd, rules, wd, "vmsh", env)  # the first VM run makes the snapshot
        host, restored, boot, vmwall, gvisor, to_exec, restored_steps = [], [], [], [], [], [], []
        have_runsc = shutil.which("runsc") is not None
        accel = None
        for _ in range(a.rounds):
            host.append(run(a.agentd, rules, wd, "hostsh", env)[0])
            if have_runsc:
                gvisor.append(run_runsc(wd))
            w, m = run(a.agentd, rules, wd, "vmsh", env)
            assert m["start"] == "restored from a snapshot", m["start"]
            restored.append(w)
            boot.append(m["boot_ms"] / 1000)
            vmwall.append(m["wall_ms"] / 1000)
            to_exec.append(restore_to_exec(m))
            restored_steps.append(m["steps"])
            accel = m["accel"]
        cold_env = dict(env, BULWARK_MICROVM_SNAPSHOTS="off")
        cold, cold_boot = [], []
        for _ in range(a.cold):
            w, m = run(a.agentd, rules, wd, "vmsh", cold_env)
            cold.append(w)
            cold_boot.append(m["boot_ms"] / 1000)
        api_host, api_warm, api_first, warm_steps = warm_execs(a.agentd, rules, t, a.rounds)
        h = statistics.median(host)
        print(f"microvm_bench: accel {accel}, {a.rounds} alternating rounds, {a.cold} cold boots "
              f"(load {os.getloadavg()[0]:.2f})")
        print(f"  host sandbox        agentd run  p50 {h:.3f} s  p90 {pct(host, .9):.3f} s")
        print(f"  microVM, restored   agentd run  p50 {statistics.median(restored):.3f} s  p90 {pct(restored, .9):.3f} s"
              f"  ({statistics.median(restored) / h:.1f}x host)  restore to Start p50 {statistics.median(boot):.3f} s"
              f"  VM wall p50 {statistics.median(vmwall):.3f} s")
        print(f"  microVM, restored   restore to the tool's exec p50 {statistics.median(to_exec):.3f} s"
              f"  p90 {pct(to_exec, .9):.3f} s  (target <= 0.4 s)")
        if cold:
            print(f"  microVM, cold boot  agentd run  p50 {statistics.median(cold):.3f} s"
                  f"  ({statistics.median(cold) / h:.1f}x host)  boot to Start p50 {statistics.median(cold_boot):.3f} s")
        ah, aw = statistics.median(api_host), statistics.median(api_warm)
        print(f"  exec API, host      reply p50 {ah:.3f} s  p90 {pct(api_host, .9):.3f} s")
        print(f"  exec API, warm VM   reply p50 {aw:.3f} s  p90 {pct(api_warm, .9):.3f} s  ({aw / ah:.1f}x the host's;"
              f" target <= 10x)  the task's first VM exec {api_first:.3f} s")
        if a.steps:
            print(f"  restored, guest steps p50 (ms): {median_steps(restored_steps)}")
            print(f"  warm, guest steps p50 (ms): {median_steps(warm_steps)}")
        if gvisor:
            print(f"  gVisor runsc do     p50 {statistics.median(gvisor):.3f} s  p90 {pct(gvisor, .9):.3f} s"
                  f"  ({statistics.median(gvisor) / h:.1f}x host; restored microVM "
                  f"{statistics.median(restored) / statistics.median(gvisor):.1f}x runsc)")
        else:
            print("  gVisor runsc do     not installed (apt-get install runsc)")
    finally:
        shutil.rmtree(t, ignore_errors=True)


if __name__ == "__main__":
    main()
