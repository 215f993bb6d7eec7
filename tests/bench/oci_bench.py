#!/usr/bin/env python3
"""Container start under bulwark-oci against plain runc and gVisor, side by
side (docs/oci-runtime.md).

    oci_bench.py AGENTD BULWARK_OCI LAUNCHER RULES_DIR [--rounds N]

One root filesystem (the host's programs) and one command (`cat /work/hello`),
each round running, in turn:
  runc        `runc run` of the bundle: the baseline
  passthrough `bulwark-oci run` of the same bundle without the annotation
              (what the wrapper costs when it confines nothing)
  confined    `bulwark-oci run` with org.bulwark.tool: the policy compiled,
              the spec confined, the cgroup bound through a real agentd,
              the launcher's Landlock, seccomp and supervision, the delete
  runsc       `runsc run` of the same bundle (gVisor, where installed:
              apt-get install runsc), no network
Each run is the whole command (create, start, the process, delete), timed
from outside. Prints per mode the median and p90 and the ratio of medians
against runc.
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from oci_env import Env  # noqa: E402

RULES = {
    "benchsh": """\
tool: benchsh
description: cat over the work directory, in a container
extends: [base/minimal]
binaries: [/usr/bin/cat]
files:
  read: ["${workdir}"]
exec:
  allow: [/usr/bin/cat]
""",
}


def timed(argv: list[str], want: str) -> float:
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    wall = time.monotonic() - t0
    if p.returncode != 0 or p.stdout != want:
        sys.exit(f"{argv[0]} {' '.join(argv[1:4])}...: exit {p.returncode}: {p.stdout[:200]} {p.stderr[-500:]}")
    return wall


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> int:
    ap = argparse.ArgumentParser()
    for a in ("agentd", "oci", "launcher", "rules"):
        ap.add_argument(a)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root")
    env = Env(*[os.path.abspath(x) for x in (args.agentd, args.oci, args.launcher, args.rules)], rules=RULES,
              prefix="bulwark-ocibench")
    with open(os.path.join(env.rootfs, "work", "hello"), "w") as f:
        f.write("bench\n")
    modes: dict[str, list[float]] = {"runc": [], "passthrough": [], "confined": []}
    have_runsc = shutil.which("runsc") is not None
    if have_runsc:
        modes["runsc"] = []
    try:
        env.start_agentd()
        cmd = ["cat", "/work/hello"]
        plain = env.bundle("plain", cmd, None, host_net=False)
        confined = env.bundle("confined", cmd, "benchsh", host_net=False)
        runsc_root = os.path.join(env.dir, "runsc-root")
        for i in range(args.rounds + 1):  # round 0 warms caches and is dropped
            runs = {
                "runc": ["runc", "--root", env.runc_root, "run", "--bundle", plain, f"r{i}"],
                "passthrough": [env.oci_bin, "--root", env.runc_root, "--bulwark-config", env.config, "run",
                                "--bundle", plain, f"p{i}"],
                "confined": [env.oci_bin, "--root", env.runc_root, "--bulwark-config", env.config, "run",
                             "--bundle", confined, f"c{i}"],
            }
            if have_runsc:
                runs["runsc"] = ["runsc", "--root", runsc_root, "--network=none", "run", "--bundle", plain, f"g{i}"]
            for mode, argv in runs.items():
                t = timed(argv, "bench\n")
                if i:
                    modes[mode].append(t)
    finally:
        env.cleanup()
    base = statistics.median(modes["runc"])
    print(f"container start to exit, {args.rounds} rounds alternating (host programs' rootfs, `cat /work/hello`):")
    report = {}
    for mode, xs in modes.items():
        med = statistics.median(xs)
        report[mode] = {"median_ms": round(med * 1000, 1), "p90_ms": round(pct(xs, 0.9) * 1000, 1),
                        "vs_runc": round(med / base, 2)}
        print(f"  {mode:12s} median {med * 1000:7.1f} ms  p90 {pct(xs, 0.9) * 1000:7.1f} ms  {med / base:5.2f}x runc")
    if not have_runsc:
        print("  runsc        not installed (apt-get install runsc)")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
