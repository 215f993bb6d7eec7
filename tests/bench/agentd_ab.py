#!/usr/bin/env python3
"""agentd_ab: two agentd builds side by side, on the exec API of a real daemon each.

Starts `agentd serve` from build A and from build B (each with its own state
directory, socket, BPF pin root and cgroup parent, the shipped rules), creates
one task per daemon, then alternates exec requests between them round by round
(A, B, B, A, ...: neither always goes first on this noisy machine) and prints
p50/p99/mean per build and the ratio B/A. A refactor that claims no change
shows a ratio near 1.00x.

    agentd_ab.py AGENTD_A AGENTD_B [--rounds N] [--tool cat] [--rules DIR]

Needs root (the daemons run sandboxes). Exits 77 without it.
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import bulwark_client as bc  # noqa: E402
from bulwark_host import cgroup2_mount, own_cgroup  # noqa: E402


class Daemon:
    def __init__(self, label: str, agentd: str, rules: str, root: str):
        self.label, self.agentd, self.rules = label, agentd, rules
        name = f"bulwark-ab-{os.getpid()}-{label}"
        self.dir = os.path.join(root, label)
        os.makedirs(self.dir)
        self.sock = os.path.join(self.dir, "agentd.sock")
        self.pin_root = f"/sys/fs/bpf/{name}"
        self.cgroup_parent = cgroup2_mount() + own_cgroup().rstrip("/") + "/" + name
        self.proc = None
        self.client = None

    def start(self) -> None:
        work = os.path.join(self.dir, "work")
        os.makedirs(work)
        os.chmod(self.dir, 0o711)
        self.log = open(os.path.join(self.dir, "agentd.log"), "w")
        self.proc = subprocess.Popen(
            [self.agentd, "serve", "--state-dir", os.path.join(self.dir, "state"), "--rules", self.rules,
             "--work-root", work, "--socket", self.sock, "--http", "off", "--bpf-pin-root", self.pin_root,
             "--bpf-cgroup-parent", self.cgroup_parent, "--log-level", "warn"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.client = bc.Client.unix(self.sock, retry_unavailable=30)
        health = self.client.health()
        if health.get("status") not in ("ok", "degraded"):
            raise SystemExit(f"{self.label}: agentd is not healthy: {health}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        subprocess.run(["rm", "-rf", self.pin_root], check=False)
        try:
            os.rmdir(self.cgroup_parent)
        except OSError:
            pass


def stats(xs):
    s = sorted(xs)
    return {"p50": s[len(s) // 2], "p99": s[min(len(s) - 1, int(len(s) * 0.99))], "mean": statistics.fmean(s)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("agentd_a")
    ap.add_argument("agentd_b")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--tool", default="cat")
    ap.add_argument("--rules", default=os.path.join(HERE, "..", "..", "rules"))
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("agentd_ab: needs root (the daemons run sandboxes)", file=sys.stderr)
        return 77
    root = tempfile.mkdtemp(prefix="bulwark-ab-", dir="/var/tmp")
    os.chmod(root, 0o711)
    daemons = [Daemon("A", a.agentd_a, os.path.abspath(a.rules), root),
               Daemon("B", a.agentd_b, os.path.abspath(a.rules), root)]
    times = {"A": [], "B": []}
    try:
        for d in daemons:
            d.start()
        tasks = {}
        for d in daemons:
            t = d.client.create_task([a.tool])
            tasks[d.label] = t.id
            with open(os.path.join(t.workdir, "notes.txt"), "w") as f:
                f.write("hello\n")
            os.chown(os.path.join(t.workdir, "notes.txt"), 65534, 65534)
        argv = [a.tool, "notes.txt"] if a.tool == "cat" else [a.tool]
        for d in daemons:  # warm-up
            for _ in range(5):
                d.client.exec(tasks[d.label], a.tool, argv)
        for i in range(a.rounds):
            order = daemons if i % 2 == 0 else list(reversed(daemons))
            for d in order:
                t0 = time.perf_counter()
                r = d.client.exec(tasks[d.label], a.tool, argv)
                times[d.label].append((time.perf_counter() - t0) * 1e6)
                if r["exit_status"] != 0:
                    raise SystemExit(f"{d.label}: exec failed: {r['report'].get('error')}")
    finally:
        for d in daemons:
            d.stop()
        shutil.rmtree(root, ignore_errors=True)
    sa, sb = stats(times["A"]), stats(times["B"])
    print(f"POST /v1/tasks/{{id}}/exec of `{' '.join(argv)}` (tool {a.tool}), {a.rounds} alternating rounds "
          f"(microseconds)")
    print(f"{'build':<8} {'p50':>10} {'p99':>10} {'mean':>10}  agentd")
    print(f"{'A':<8} {sa['p50']:10.0f} {sa['p99']:10.0f} {sa['mean']:10.0f}  {a.agentd_a}")
    print(f"{'B':<8} {sb['p50']:10.0f} {sb['p99']:10.0f} {sb['mean']:10.0f}  {a.agentd_b}")
    print(f"ratio B/A: p50 {sb['p50'] / sa['p50']:.3f}x, p99 {sb['p99'] / sa['p99']:.3f}x, "
          f"mean {sb['mean'] / sa['mean']:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
