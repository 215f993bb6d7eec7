#!/bin/bash
# arm64_controls.sh QEMU PROBE: the arm64 tiers can fail. Under the tiers'
# own runner (run_arm64.sh) each error of violation_probe.c must kill the
# process at once with the hardware's signal; each twin (the same access with
# heap tagging off, the same call or return without the error) must survive,
# so the probe really makes the access and only the feature stops it.
set -u
qemu=$1
probe=$2
here=$(dirname "$0")
fails=0

# expect NAME WANT_STATUS WANT_TEXT COMMAND...: the command's exit status
# (128+N for death by signal N) and a text its output must contain.
expect() {
  local name=$1 want=$2 text=$3
  shift 3
  local out status
  out=$("$@" 2>&1)
  status=$?
  if [[ $status == "$want" && $out == *"$text"* ]]; then
    echo "ok   $name: status $status, \"$text\""
  else
    echo "FAIL $name: status $status (want $want), output (want \"$text\"):"
    printf '%s\n' "$out" | sed 's/^/     /'
    fails=$((fails + 1))
  fi
}

run=("$here/run_arm64.sh" "$qemu")
untagged=("$qemu" -cpu max -L / -E GLIBC_TUNABLES=glibc.mem.tagging=0)
# SEGV_MTESERR (9): a synchronous tag check fault.
expect "use after free, MTE sync"      139 "fault signal=11 code=9" "${run[@]}" "$probe" uaf
expect "use after free, tagging off"   0   "survived uaf"           "${untagged[@]}" "$probe" uaf
expect "heap overflow, MTE sync"       139 "fault signal=11 code=9" "${run[@]}" "$probe" oob
expect "heap overflow, tagging off"    0   "survived oob"           "${untagged[@]}" "$probe" oob
# The tiers run with MTE synchronous: the same control register value.
expect "tagged_addr_ctrl: sync"        0   "tagged_addr_ctrl=0x7fff3" "${run[@]}" "$probe" bti-pad
expect "call without landing pad, BTI" 132 "fault signal=4"         "${run[@]}" "$probe" bti
expect "call with landing pad"         0   "survived bti-pad"       "${run[@]}" "$probe" bti-pad
# A failed authentication faults at once with FEAT_FPAC (SIGILL), else the
# return jumps to a non-canonical address (SIGSEGV): either is a fault.
out=$("${run[@]}" "$probe" pac 2>&1); status=$?
if [[ ($status == 132 || $status == 139) && $out == *"fault signal="* && $out != *survived* ]]; then
  echo "ok   corrupted signed return, PAC: status $status"
else
  echo "FAIL corrupted signed return, PAC: status $status:"; printf '%s\n' "$out" | sed 's/^/     /'
  fails=$((fails + 1))
fi
expect "intact signed return"          0   "survived pac-ok"        "${run[@]}" "$probe" pac-ok
if ((fails)); then
  echo "arm64 controls: $fails failed"
  exit 1
fi
echo "arm64 controls: all held"
