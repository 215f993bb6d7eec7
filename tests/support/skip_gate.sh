#!/bin/sh
# skip_gate.sh <not-runnable list> <test name> <command> [args...]
#
# Every CTest test runs through this (bulwark_add_test, cmake/BulwarkTest.cmake).
# Outside CI it passes the command's exit status through: 77 is a skip. In CI
# (BULWARK_CI=1, set by .ci/run) a skip is a failure unless the list names the
# test with its reason (one line: "<test> <reason>"): a tier that cannot run
# on the CI machine class says so in the repository, never by itself.
list=$1
name=$2
shift 2
"$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT HUP
while :; do
  wait "$child"
  rc=$?
  kill -0 "$child" 2>/dev/null || break  # wait was interrupted by a forwarded signal
done
if [ "$rc" -eq 77 ] && [ "${BULWARK_CI:-0}" = 1 ]; then
  reason=$(awk -v n="$name" '$1 == n { $1 = ""; sub(/^[ \t]+/, ""); print; exit }' "$list" 2>/dev/null)
  if [ -z "$reason" ]; then
    echo "FAIL: $name skipped (exit 77) in CI and is not listed as not runnable in $list: in CI a skip is a failure"
    exit 1
  fi
  echo "SKIP (listed in $list as not runnable on this machine class: $reason)"
fi
exit "$rc"
