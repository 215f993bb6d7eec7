#!/usr/bin/env bash
# Boots Debian's stock kernel under qemu TCG with an initramfs holding busybox
# and vm_runner, and maps vm_runner's "VMTEST <case> PASS|FAIL" lines to an
# exit code: 0 all passed, 1 a case failed or the guest gave no summary,
# 77 (skip) only when the build step (fetch_kernel.sh) could not obtain qemu
# or the kernel package (its reason in <cache_dir>/unavailable.txt).
#   usage: run_vm.sh <vm_runner> <cache_dir> [<diff_vm_corpus> [<policyc>]]
# With diff_vm_corpus, the differential corpus (BULWARK_DIFF_SEED,
# BULWARK_DIFF_VM_POLICIES, BULWARK_DIFF_VM_OPS) is written on the host and
# shipped in the initramfs as /diff.corpus.
# With policyc, the seccomp filters of a native-only rule file and of one with
# `syscalls.architectures: [native, i386]` are compiled on the host and shipped
# as /seccomp-native.bpf and /seccomp-i386.bpf (raw sock_filter arrays): the
# guest's stock kernel runs i386 calls through int $0x80.
# With BULWARK_VM_BENCH=1 the guest runs vm_runner --bench instead of the cases
# (the open/close benchmark) and the "VMBENCH" lines are the output.
set -uo pipefail
runner=$(realpath -m "$1")
cache=$(realpath -m "$2")
corpus_gen=${3:+$(realpath -m "$3")}
policyc=${4:+$(realpath -m "$4")}
mkdir -p "$cache"
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

# qemu, cpio, busybox and the kernel come from the build step (fetch_kernel.sh,
# target vm_kernel): nothing is downloaded here.
if [ -s "$cache/unavailable.txt" ]; then skip "$(cat "$cache/unavailable.txt")"; fi
command -v qemu-system-x86_64 >/dev/null || skip "no qemu-system-x86_64 (the vm_kernel build step installs it)"
command -v cpio >/dev/null || skip "no cpio"
{ [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; } || skip "no static /bin/busybox (busybox-static)"
[ -x "$runner" ] || fail "no vm_runner at $runner"
[ -s "$cache/vmlinuz" ] || fail "no $cache/vmlinuz: build the vm_kernel target (fetch_kernel.sh) first"

# initramfs: busybox, vm_runner, /init
root="$cache/initramfs"
rm -rf "$root"
mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp,data,etc}
cp /bin/busybox "$root/bin/busybox"
cp "$runner" "$root/vm_runner"
bench=${BULWARK_VM_BENCH:-0}
if [ -n "$corpus_gen" ] && [ "$bench" != 1 ]; then
  "$corpus_gen" "$root/diff.corpus" "${BULWARK_DIFF_VM_POLICIES:-40}" "${BULWARK_DIFF_VM_OPS:-30}" ||
    fail "diff_vm_corpus could not write the corpus"
fi
if [ -n "$policyc" ] && [ "$bench" != 1 ]; then
  for abi in native i386; do
    rules="tool: abi-$abi\nsyscalls:\n  on_violation: { action: errno, errno: EPERM }\n"
    [ "$abi" = i386 ] && rules="$rules  architectures: [native, i386]\n"
    printf "$rules" >"$cache/abi-$abi.yaml"
    "$policyc" compile "$cache/abi-$abi.yaml" -o "$cache/abi-$abi.json" >/dev/null ||
      fail "policyc compile $cache/abi-$abi.yaml"
    python3 -c 'import json,struct,sys
prog=json.load(open(sys.argv[1]))["seccomp"]["program"]
open(sys.argv[2],"wb").write(b"".join(struct.pack("<HBBI",*i) for i in prog))' \
      "$cache/abi-$abi.json" "$root/seccomp-$abi.bpf" || fail "seccomp program of abi-$abi"
  done
fi
cat >"$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t securityfs securityfs /sys/kernel/security
mount -t bpf bpf /sys/fs/bpf
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t tmpfs tmp /tmp
ip link set lo up
echo "VMTEST-INFO kernel $(uname -r) lsm=$(cat /sys/kernel/security/lsm)"
/vm_runner @RUNNER_ARGS@
echo "VMTEST-EXIT $?"
poweroff -f
INIT
runner_args=""
[ "$bench" = 1 ] && runner_args="--bench"
sed -i "s|@RUNNER_ARGS@|$runner_args|" "$root/init"
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$cache/initramfs.cpio.gz" || fail "cpio"

log="$cache/serial.log"
timeout 1000 qemu-system-x86_64 -accel tcg -m 1024 -smp 2 -nographic -no-reboot \
  -kernel "$cache/vmlinuz" -initrd "$cache/initramfs.cpio.gz" \
  -append "console=ttyS0 quiet panic=-1" </dev/null >"$log" 2>&1
qrc=$?
tr -d '\r' <"$log" >"$log.txt"
if [ "$bench" = 1 ]; then
  grep -E '^VMBENCH|^VMTEST-INFO kernel' "$log.txt"
  grep -q '^VMBENCH-DONE' "$log.txt" || { tail -40 "$log.txt"; fail "the guest benchmark did not finish (qemu exit $qrc)"; }
  exit 0
fi
grep -E '^VMTEST' "$log.txt"
summary=$(grep -E '^VMTEST-SUMMARY ' "$log.txt" | tail -1)
[ -n "$summary" ] || { tail -40 "$log.txt"; fail "guest printed no VMTEST-SUMMARY (qemu exit $qrc)"; }
fails=$(grep -cE '^VMTEST [^ ]+ FAIL' "$log.txt")
passes=$(grep -cE '^VMTEST [^ ]+ PASS' "$log.txt")
echo "vm: $passes passed, $fails failed ($(cat "$cache/kernel-package" 2>/dev/null))"
[ "$fails" -eq 0 ] && [ "$passes" -gt 0 ] || exit 1
exit 0
