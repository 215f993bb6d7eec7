#!/bin/sh
# run_arm64.sh QEMU PROGRAM [ARGS...]: an aarch64 program of the arm64 core
# build under qemu-user on a CPU with MTE, PAC and BTI (-cpu max), with the
# arm64 multiarch root as its root (-L /: Debian's arm64 loader, glibc and
# libraries, one glibc build for all), and glibc's heap tagging in
# synchronous mode (glibc.mem.tagging=3: every malloc'd block tagged, a
# mismatched access faults at the instruction that makes it).
set -eu
qemu=$1
shift
exec "$qemu" -cpu max -L / -E GLIBC_TUNABLES=glibc.mem.tagging=3 "$@"
