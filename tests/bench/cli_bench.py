#!/usr/bin/env python3
"""`agentd run` as a shell user starts it, against bwrap, gVisor and a bare
fork+exec, side by side (issue: the shell user's path).

    cli_bench.py AGENTD RULES_DIR [--rounds N]

Each round runs, in turn, one command per condition and times the whole
process from outside:
  bare        /bin/true, fork+exec from this script: the floor
  bwrap       bwrap --unshare-all, /usr read-only, /proc, /dev, /bin/true
  agentd      agentd run --tool cat -- cat /dev/null: the shipped cat rules,
              every layer (namespaces, cgroup, Landlock, seccomp, the BPF
              programs bound to the run, the kernel audit reader)
  prove       the same with --bpf-prove: the BPF truth check's canaries run
              again instead of its record being reused
  runsc       runsc --network=none do /bin/true (gVisor, where installed:
              apt-get install runsc)
Prints per condition the median and p90 in ms and the ratios of medians to
bwrap and to bare, then where agentd's time goes (its --json timings_ms,
medians) and whether a cgroup mount has favordynmods (without it every v1
cgroup join waits for an RCU grace period).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time


def timed(argv: list[str]) -> float:
    t0 = time.monotonic()
    p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"{' '.join(argv[:4])}...: exit {p.returncode}: {p.stderr[-800:]}")
    return wall * 1000


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def favordynmods() -> str:
    with open("/proc/mounts") as f:
        on = [ln.split()[1] for ln in f if ln.split()[2] in ("cgroup", "cgroup2") and "favordynmods" in ln.split()[3]]
    return ", ".join(on) if on else "none"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("agentd")
    ap.add_argument("rules")
    ap.add_argument("--rounds", type=int, default=40)
    a = ap.parse_args()
    work = "/tmp"
    agentd = [a.agentd, "run", "--rules", a.rules, "--tool", "cat", "--workdir", work, "--", "cat", "/dev/null"]
    modes: dict[str, list[str]] = {
        "bare": ["/bin/true"],
        "bwrap": ["bwrap", "--unshare-all", "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib64", "/lib64",
                  "--symlink", "usr/lib", "/lib", "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev",
                  "/bin/true"],
        "agentd": agentd,
        "prove": agentd[:2] + ["--bpf-prove"] + agentd[2:],
    }
    if shutil.which("runsc"):
        modes["runsc"] = ["runsc", "--network=none", "do", "-quiet", "/bin/true"]
    if not shutil.which("bwrap"):
        sys.exit("bwrap not installed (apt-get install bubblewrap)")
    for argv in modes.values():  # warm-up: page cache, the BPF pins and their record
        timed(argv)
    times: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(a.rounds):
        for m, argv in modes.items():
            times[m].append(timed(argv))
    steps: dict[str, list[float]] = {}
    for _ in range(max(10, a.rounds // 2)):
        p = subprocess.run(agentd[:2] + ["--json"] + agentd[2:], capture_output=True, text=True, timeout=120)
        for k, v in json.loads(p.stdout).get("timings_ms", {}).items():
            steps.setdefault(k, []).append(v)
    med = {m: statistics.median(v) for m, v in times.items()}
    print(f"cli_bench: {a.rounds} interleaved rounds; cgroup mounts with favordynmods: {favordynmods()}")
    print(f"{'mode':8} {'p50 ms':>8} {'p90 ms':>8} {'/bwrap':>7} {'/bare':>7}")
    for m, v in times.items():
        print(f"{m:8} {med[m]:8.2f} {pct(v, 0.9):8.2f} {med[m] / med['bwrap']:7.2f} {med[m] / med['bare']:7.2f}")
    print("agentd run, where the time goes (medians, ms): " +
          ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in sorted(steps.items())) +
          f"; outside these (exec, dynamic linking, options, exit): "
          f"{med['agentd'] - sum(statistics.median(v) for v in steps.values()):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
