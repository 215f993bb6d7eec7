#!/usr/bin/env python3
"""boot_test: build a guest image with test_init as /init and boot it under
qemu -M microvm (TCG), as docs/microvm.md describes.

    boot_test.py --agent TEST_INIT --cache DIR [--image DIR] [--runs N]

Boot 1 (plain): the console must show "BULWARK-IMAGE-OK <kernel_version>",
every module of the manifest "loaded" and "BULWARK-IMAGE-DONE failures=0".
Boot 2 (io): the same plus a 9p share (tag "work") and a virtio-serial device
with the ports bulwark.stdout / bulwark.stderr: the guest must list both ports,
read hello.txt from the share, write guest.txt into it and a line into
bulwark.stdout. Prints the time from launch to the marker and to qemu's exit
(median of --runs). Exit 0 pass, 1 fail, 77 skip (no qemu / qboot.rom, or the
kernel cannot be downloaded: the builder wrote unavailable.txt).
"""
import argparse
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
QBOOT = "/usr/share/qemu/qboot.rom"


def tsc_khz():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("cpu MHz"):
                return int(float(line.split(":")[1]) * 1000)
    return 0


def boot(image, manifest, extra_args, append, timeout):
    cmd = ["qemu-system-x86_64", "-M", "microvm,x-option-roms=off,isa-serial=on", "-bios", QBOOT,
           "-accel", "tcg", "-smp", "1", "-m", "256", "-nodefaults", "-no-user-config", "-nographic",
           "-no-reboot", "-serial", "stdio",
           "-kernel", os.path.join(image, "vmlinux"), "-initrd", os.path.join(image, "initramfs.cpio"),
           "-append", f"{manifest['cmdline']} tsc_early_khz={tsc_khz()} mitigations=off {append}".strip(),
           *extra_args]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    buf, lines, t_marker = b"", [], None
    deadline = t0 + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            p.kill()
            p.wait()
            return lines, t_marker, None
        r, _, _ = select.select([p.stdout], [], [], left)
        if not r:
            continue
        chunk = os.read(p.stdout.fileno(), 65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            text = line.decode(errors="replace").rstrip("\r")
            lines.append(text)
            if t_marker is None and text.startswith("BULWARK-IMAGE-OK"):
                t_marker = time.monotonic() - t0
    if buf:
        lines.append(buf.decode(errors="replace"))
    p.wait()
    return lines, t_marker, time.monotonic() - t0


def check_common(lines, manifest):
    errors = []
    if f"BULWARK-IMAGE-OK {manifest['kernel_version']}" not in lines:
        errors.append("no 'BULWARK-IMAGE-OK <kernel_version>' line")
    for m in manifest["modules"]:
        if f"MODULE {m} loaded" not in lines:
            errors.append(f"module {m} not loaded")
    if "BULWARK-IMAGE-DONE failures=0" not in lines:
        errors.append("no 'BULWARK-IMAGE-DONE failures=0' line")
    return errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    ap.add_argument("--cache", required=True)
    ap.add_argument("--image", help="image directory (kept; default: a temporary one)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=60)
    args = ap.parse_args()
    if not shutil.which("qemu-system-x86_64") or not os.path.exists(QBOOT):
        print("SKIP: no qemu-system-x86_64 or no /usr/share/qemu/qboot.rom (apt-get install qemu-system-x86)")
        return 77
    tmp = tempfile.mkdtemp(prefix="bulwark-boot-test.")
    try:
        image = args.image or os.path.join(tmp, "image")
        p = subprocess.run([sys.executable, os.path.join(HERE, "build_image.py"), "--agent", args.agent,
                            "--out", image, "--cache", args.cache])
        if p.returncode != 0:
            print(f"FAIL: build_image.py exited {p.returncode}")
            return 1
        if os.path.exists(os.path.join(image, "unavailable.txt")):
            print("SKIP: microVM tier unavailable: " + open(os.path.join(image, "unavailable.txt")).read().strip())
            return 77
        manifest = json.load(open(os.path.join(image, "image.json")))
        failed = False
        for variant in ("plain", "io"):
            marks, exits, uptimes = [], [], []
            for run in range(args.runs):
                extra, append = [], ""
                if variant == "io":
                    io = os.path.join(tmp, f"io-{run}")
                    share = os.path.join(io, "share")
                    os.makedirs(share)
                    with open(os.path.join(share, "hello.txt"), "w") as f:
                        f.write("hello from the host\n")
                    append = "bulwark_io=1"
                    extra = ["-fsdev", f"local,id=fs0,path={share},security_model=none",
                             "-device", "virtio-9p-device,fsdev=fs0,mount_tag=work",
                             "-device", "virtio-serial-device",
                             "-chardev", f"file,id=cout,path={io}/stdout.txt",
                             "-device", "virtserialport,chardev=cout,name=bulwark.stdout",
                             "-chardev", f"file,id=cerr,path={io}/stderr.txt",
                             "-device", "virtserialport,chardev=cerr,name=bulwark.stderr"]
                lines, t_mark, t_exit = boot(image, manifest, extra, append, args.timeout)
                errors = check_common(lines, manifest)
                if t_exit is None:
                    errors.append(f"qemu did not exit within {args.timeout:.0f} s")
                if variant == "io":
                    for port in ("bulwark.stdout", "bulwark.stderr"):
                        if not any(line.startswith("VPORT ") and line.endswith(" " + port) for line in lines):
                            errors.append(f"the guest lists no virtio port named {port}")
                    for want in ("NINEP mounted; hello.txt: hello from the host", "NINEP wrote guest.txt"):
                        if want not in lines:
                            errors.append(f"no line {want!r}")
                    try:
                        guest = open(os.path.join(share, "guest.txt")).read()
                        if manifest["kernel_version"] not in guest:
                            errors.append(f"guest.txt on the host: {guest!r}")
                    except OSError as e:
                        errors.append(f"guest.txt on the host: {e.strerror}")
                    try:
                        out = open(os.path.join(io, "stdout.txt")).read()
                        if "over virtio-serial" not in out:
                            errors.append(f"stdout.txt on the host: {out!r}")
                    except OSError as e:
                        errors.append(f"stdout.txt on the host: {e.strerror}")
                if errors:
                    failed = True
                    print(f"FAIL {variant} run {run + 1}: " + "; ".join(errors))
                    print("\n".join("  | " + line for line in lines[-40:]))
                else:
                    marks.append(t_mark)
                    exits.append(t_exit)
                    uptimes += [line for line in lines if line.startswith("UPTIME ")]
            if marks:
                print(f"PASS {variant}: {len(marks)}/{args.runs} runs; launch -> BULWARK-IMAGE-OK median "
                      f"{statistics.median(marks):.3f} s (min {min(marks):.3f}, max {max(marks):.3f}); "
                      f"-> qemu exit median {statistics.median(exits):.3f} s")
                for line in uptimes:
                    print(f"  guest {line}")
        return 1 if failed else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
