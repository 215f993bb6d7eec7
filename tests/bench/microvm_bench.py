#!/usr/bin/env python3
"""The microVM tier against the host sandbox, side by side (docs/microvm.md).

    microvm_bench.py AGENTD RULES_DIR [--rounds N] [--cold K]

The same shell tool (dash over its work directory) run by `agentd run`:
  host      microvm.mode off: the host sandbox
  restored  microvm.mode required, the guest restored from its snapshot
  cold      microvm.mode required, snapshots off: a cold boot each time
  runsc     gVisor's `runsc do` of the same command (where installed:
            apt-get install runsc), the peer's user-space kernel for scale:
            the host's root read-only under a tmpfs overlay, no network, no
            per-tool rules
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
    return wall, d.get("microvm")


def run_runsc(wd):
    t0 = time.monotonic()
    p = subprocess.run(["runsc", "--network=none", "do", "-quiet", "dash", "-c", "cat notes.txt"], cwd=wd,
                       capture_output=True, text=True)
    wall = time.monotonic() - t0
    if p.returncode != 0 or p.stdout != "bench\n":
        sys.exit(f"runsc: exit {p.returncode}: {p.stderr[:500]}")
    return wall


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("agentd")
    ap.add_argument("rules")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--cold", type=int, default=3)
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
                        f"files:\n  read: [\"${{workdir}}\"]\nexec:\n  allow: [/usr/bin/dash, /usr/bin/cat]\n"
                        f"microvm: {{ mode: {mode} }}\n")
        wd = os.path.join(t, "wd")
        os.makedirs(wd)
        os.chmod(t, 0o755)
        os.chmod(wd, 0o755)
        with open(os.path.join(wd, "notes.txt"), "w") as f:
            f.write("bench\n")
        env = dict(os.environ, BULWARK_MICROVM_SNAPSHOTS=os.path.join(t, "snapshots"))
        run(a.agentd, rules, wd, "vmsh", env)  # the first VM run makes the snapshot
        host, restored, boot, vmwall, gvisor = [], [], [], [], []
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
            accel = m["accel"]
        cold_env = dict(env, BULWARK_MICROVM_SNAPSHOTS="off")
        cold, cold_boot = [], []
        for _ in range(a.cold):
            w, m = run(a.agentd, rules, wd, "vmsh", cold_env)
            cold.append(w)
            cold_boot.append(m["boot_ms"] / 1000)
        h = statistics.median(host)
        print(f"microvm_bench: accel {accel}, {a.rounds} alternating rounds, {a.cold} cold boots "
              f"(load {os.getloadavg()[0]:.2f})")
        print(f"  host sandbox        agentd run  p50 {h:.3f} s  p90 {pct(host, .9):.3f} s")
        print(f"  microVM, restored   agentd run  p50 {statistics.median(restored):.3f} s  p90 {pct(restored, .9):.3f} s"
              f"  ({statistics.median(restored) / h:.1f}x host)  restore to Start p50 {statistics.median(boot):.3f} s"
              f"  VM wall p50 {statistics.median(vmwall):.3f} s")
        print(f"  microVM, cold boot  agentd run  p50 {statistics.median(cold):.3f} s"
              f"  ({statistics.median(cold) / h:.1f}x host)  boot to Start p50 {statistics.median(cold_boot):.3f} s")
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
