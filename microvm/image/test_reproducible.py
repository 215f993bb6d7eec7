#!/usr/bin/env python3
"""test_reproducible: build_image.py gives the same bytes twice and refuses
agents that are not static executables.

    test_reproducible.py --agent STATIC_ELF --cache DIR [--dynamic-agent ELF]

1. A dynamically linked --agent (default /bin/true) and a non-ELF --agent
   must fail (exit != 0) with a clear message and write no image.
2. Two builds from the same cache and inputs (with one --extra file) into two
   temporary directories, the second with --reextract (the kernel taken from
   the .deb again, not from the cache's extracted copy), must give identical
   image.json (so the same digest),
   initramfs.cpio and vmlinux; the cpio is checked entry by entry (sorted,
   uid/gid 0, one mtime, /init = the agent with mode 0755, the device nodes,
   the modules of the manifest and the load-order file).
3. A rebuild into the first directory must find it up to date.
Exit 0 pass, 1 fail, 77 (skip) only when the kernel cannot be downloaded
(the builder wrote unavailable.txt).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILDER = os.path.join(HERE, "build_image.py")
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import build_image  # noqa: E402  (has_interp, the ELF reader)


def builder(*args, env=None):
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, BUILDER, *args], capture_output=True, text=True, env=env)
    return p.returncode, p.stdout + p.stderr, time.monotonic() - t0


def parse_cpio(data):
    """[(name, ino, mode, uid, gid, nlink, mtime, rdevmajor, rdevminor, data)]"""
    out, pos = [], 0
    while True:
        if data[pos:pos + 6] != b"070701":
            raise ValueError(f"bad cpio magic at {pos}")
        f = [int(data[pos + 6 + 8 * i:pos + 14 + 8 * i], 16) for i in range(13)]
        ino, mode, uid, gid, nlink, mtime, size, _, _, rmaj, rmin, namesize, check = f
        pos += 110
        name = data[pos:pos + namesize - 1].decode()
        pos = (pos + namesize + 3) & ~3
        body = data[pos:pos + size]
        pos = (pos + size + 3) & ~3
        if name == "TRAILER!!!":
            return out
        if check:
            raise ValueError(f"{name}: check field {check}")
        out.append((name, ino, mode, uid, gid, nlink, mtime, rmaj, rmin, body))


def check_cpio(path, agent, manifest, extra_dest, extra_data):
    errors = []
    entries = parse_cpio(open(path, "rb").read())
    names = [e[0] for e in entries]
    if names != sorted(names):
        errors.append("cpio entries are not sorted")
    if [e[1] for e in entries] != list(range(1, len(entries) + 1)):
        errors.append("cpio inode numbers are not 1..n in order")
    if {(e[3], e[4]) for e in entries} != {(0, 0)}:
        errors.append("cpio entries not all uid/gid 0")
    if len({e[6] for e in entries}) != 1 or entries[0][6] != manifest["mtime"]:
        errors.append("cpio mtimes differ or are not the manifest's mtime")
    by = {e[0]: e for e in entries}
    want = {"init": (0o100755, agent), "dev/console": (0o020600, b""), "dev/null": (0o020666, b""),
            extra_dest: (0o100644, extra_data),
            "lib/modules/load-order": (0o100644, "".join(m + "\n" for m in manifest["modules"]).encode())}
    for name, (mode, body) in want.items():
        if name not in by:
            errors.append(f"cpio has no /{name}")
        elif by[name][2] != mode or by[name][9] != body:
            errors.append(f"/{name}: mode {by[name][2]:o} or content differs from what was asked")
    if by.get("dev/console", (0,) * 9)[7:9] != (5, 1) or by.get("dev/null", (0,) * 9)[7:9] != (1, 3):
        errors.append("/dev/console is not c 5 1 or /dev/null not c 1 3")
    for d in ("dev", "proc", "sys", "tmp", "run", "mnt", "sysroot", "lib/modules"):
        if d not in by or by[d][2] & 0o170000 != 0o040000:
            errors.append(f"cpio has no directory /{d}")
    for m in manifest["modules"]:
        e = by.get(f"lib/modules/{m}.ko")
        if not e or e[9][:4] != b"\x7fELF":
            errors.append(f"cpio has no ELF /lib/modules/{m}.ko")
    return errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True, help="a static x86-64 executable")
    ap.add_argument("--cache", required=True)
    ap.add_argument("--dynamic-agent", default="/bin/true")
    args = ap.parse_args()
    agent = open(args.agent, "rb").read()
    failures = []
    tmp = tempfile.mkdtemp(prefix="bulwark-image-test.")
    try:
        # 1. agents the guest could not run
        dyn = open(args.dynamic_agent, "rb").read()
        if not build_image.has_interp(dyn):
            failures.append(f"--dynamic-agent {args.dynamic_agent} has no PT_INTERP: pick a dynamic ELF")
        else:
            rc, out, _ = builder("--agent", args.dynamic_agent, "--out", f"{tmp}/dyn", "--cache", args.cache)
            if rc == 0 or "dynamically linked" not in out or "-static" not in out:
                failures.append(f"dynamic agent: exit {rc}, output {out.strip()!r}")
            elif os.path.exists(f"{tmp}/dyn/image.json"):
                failures.append("dynamic agent: image.json written anyway")
            else:
                print(f"ok: a dynamic agent is refused: {out.strip().splitlines()[-1]}")
        text = f"{tmp}/not-elf"
        with open(text, "w") as f:
            f.write("#!/bin/sh\necho hi\n")
        rc, out, _ = builder("--agent", text, "--out", f"{tmp}/txt", "--cache", args.cache)
        if rc == 0 or "not an ELF" not in out:
            failures.append(f"non-ELF agent: exit {rc}, output {out.strip()!r}")
        else:
            print(f"ok: a non-ELF agent is refused: {out.strip().splitlines()[-1]}")

        # 2. two builds, same inputs
        extra = f"{tmp}/extra.txt"
        with open(extra, "w") as f:
            f.write("an extra file\n")
        os.chmod(extra, 0o644)
        runs = []
        for n in ("a", "b"):
            # b takes the kernel from the .deb again (a may have used the copy
            # extracted into the cache by an earlier build).
            rc, out, secs = builder("--agent", args.agent, "--out", f"{tmp}/{n}", "--cache", args.cache,
                                    "--extra", f"{extra}:/etc/bulwark/extra.txt",
                                    *(["--reextract"] if n == "b" else []))
            sys.stdout.write(out)
            if rc != 0:
                failures.append(f"build {n}: exit {rc}")
                break
            unavailable = f"{tmp}/{n}/unavailable.txt"
            if os.path.exists(unavailable):
                print("SKIP: microVM tier unavailable: " + open(unavailable).read().strip())
                return 77
            runs.append(secs)
        if len(runs) == 2:
            ja, jb = (open(f"{tmp}/{n}/image.json", "rb").read() for n in "ab")
            ma, mb = json.loads(ja), json.loads(jb)
            if ma["digest"] != mb["digest"]:
                failures.append(f"digests differ: {ma['digest']} {mb['digest']}")
            if ja != jb:
                failures.append("image.json differs between the two builds")
            for f in ("initramfs.cpio", "vmlinux"):
                if open(f"{tmp}/a/{f}", "rb").read() != open(f"{tmp}/b/{f}", "rb").read():
                    failures.append(f"{f} differs between the two builds")
            errs = check_cpio(f"{tmp}/a/initramfs.cpio", agent, ma, "etc/bulwark/extra.txt", b"an extra file\n")
            failures += [f"initramfs: {e}" for e in errs]
            if not errs and ma["digest"] == mb["digest"] and ja == jb:
                print(f"ok: two builds ({runs[0]:.1f} s, {runs[1]:.1f} s) are byte-identical, digest {ma['digest']}, "
                      f"kernel {ma['kernel_version']}, modules {' '.join(ma['modules'])}")

            # 3. unchanged inputs: nothing to do
            rc, out, secs = builder("--agent", args.agent, "--out", f"{tmp}/a", "--cache", args.cache,
                                    "--extra", f"{extra}:/etc/bulwark/extra.txt")
            if rc != 0 or "up to date" not in out:
                failures.append(f"rebuild with the same inputs: exit {rc}, output {out.strip()!r}")
            else:
                print(f"ok: a rebuild with the same inputs is skipped ({secs:.1f} s)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print(f"FAIL: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
