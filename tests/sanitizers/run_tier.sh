#!/usr/bin/env bash
# run_tier.sh address|thread <tier executable in a sanitizer build> [args...]
# Runs one tier of a sanitizer build with every report fatal. A missing
# build is a failure (exit 1), never a skip: `./bulwark test` builds it.
set -euo pipefail
kind=$1 exe=$2
shift 2
if [[ ! -x $exe ]]; then
  echo "sanitizer build missing: $exe (./bulwark test builds it; scripts/build-sanitizers.sh)" >&2
  exit 1
fi
case "$kind" in
  address)
    # halt_on_error: the first report ends the run (UBSan is also built with
    # -fno-sanitize-recover=all). detect_leaks: LeakSanitizer works here (it
    # needs ptrace of its own threads; the tiers run unconfined).
    export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:detect_invalid_pointer_pairs=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
    ;;
  thread)
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
    ;;
  *)
    echo "run_tier.sh: unknown sanitizer '$kind'" >&2
    exit 2
    ;;
esac
exec "$exe" "$@"
