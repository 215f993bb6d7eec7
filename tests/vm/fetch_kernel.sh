#!/usr/bin/env bash
# Build step of the VM tiers (target vm_kernel, in ALL): everything the guest
# boot needs from outside the repository, fetched once into <cache_dir>:
# qemu, cpio and a static busybox (apt-get install when missing) and Debian's
# stock kernel (the package behind linux-image-amd64, apt-get download) as
# <cache_dir>/vmlinuz. Nothing is downloaded when the test runs.
# What cannot be had is written to <cache_dir>/unavailable.txt (one line, the
# reason) and the build goes on: run_vm.sh then skips with that reason, and
# in CI a skip is a failure (tests/support/skip_gate.sh).
#   usage: fetch_kernel.sh <cache_dir>
set -uo pipefail
cache=$(realpath -m "$1")
mkdir -p "$cache"
rm -f "$cache/unavailable.txt"
unavailable() { echo "$*" >"$cache/unavailable.txt"; echo "vm_kernel: $*" >&2; exit 0; }

have_tools() { command -v qemu-system-x86_64 >/dev/null && command -v cpio >/dev/null && [ -x /bin/busybox ] &&
               ! ldd /bin/busybox >/dev/null 2>&1; }
if ! have_tools && [ "$(id -u)" = 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-system-x86 busybox-static cpio \
    >"$cache/apt-install.log" 2>&1
fi
command -v qemu-system-x86_64 >/dev/null || unavailable "no qemu-system-x86_64 (apt-get install qemu-system-x86 failed or not root: $cache/apt-install.log)"
command -v cpio >/dev/null || unavailable "no cpio"
{ [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; } || unavailable "no static /bin/busybox (busybox-static)"

# The stock kernel: linux-image-amd64 depends on linux-image-6.1.0-<N>-amd64.
if [ ! -s "$cache/vmlinuz" ]; then
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
  [ -n "$pkg" ] || unavailable "cannot resolve the kernel package behind linux-image-amd64 (apt-cache depends)"
  (cd "$cache" && apt-get download "$pkg" >"$cache/apt-download.log" 2>&1) ||
    unavailable "apt-get download $pkg failed (see $cache/apt-download.log)"
  deb=$(ls "$cache"/"${pkg}"_*.deb 2>/dev/null | head -1)
  [ -n "$deb" ] || unavailable "apt-get download $pkg produced no .deb"
  rm -rf "$cache/x" && dpkg -x "$deb" "$cache/x" || unavailable "dpkg -x $deb failed"
  cp "$cache"/x/boot/vmlinuz-* "$cache/vmlinuz.tmp" && mv "$cache/vmlinuz.tmp" "$cache/vmlinuz" && rm -rf "$cache/x" ||
    unavailable "no boot/vmlinuz-* in $deb"
  echo "$pkg" >"$cache/kernel-package"
fi
exit 0
