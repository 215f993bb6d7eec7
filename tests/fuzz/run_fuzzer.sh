#!/usr/bin/env bash
# run_fuzzer.sh <fuzzer> <seed corpus> <work dir> <seconds>
# One bounded libFuzzer run: the seeds copied into <work dir>/corpus (what
# the run finds is kept there, never in the source tree), every sanitizer
# report fatal. Fails on a crash, a leak, a timeout, running out of memory
# or a missing fuzzer build, and prints the reproducer.
set -euo pipefail
fuzzer=$1 seeds=$2 work=$3 seconds=$4
if [[ ! -x $fuzzer ]]; then
  echo "fuzzer build missing: $fuzzer (./bulwark test builds it; scripts/build-sanitizers.sh)" >&2
  exit 1
fi
mkdir -p "$work/corpus" "$work/artifacts"
cp -r "$seeds"/. "$work/corpus/"
rm -f "$work/artifacts"/*
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
# abort_on_error for UBSan: GCC's UBSan runtime is not ASan's, so libFuzzer's
# death callback (which writes the reproducer) is not called when UBSan
# halts; an abort reaches libFuzzer's signal handler, which writes it.
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# -timeout: one input taking 10 s is a hang; -rss_limit_mb: a blow-up;
# -use_value_profile: the comparison feedback the GCC build gives.
set +e
# -seed: one fixed sequence of mutations (BULWARK_FUZZ_SEED to explore
# another), so a tier's verdict reproduces on a rerun of the same build.
"$fuzzer" -seed="${BULWARK_FUZZ_SEED:-1}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -use_value_profile=1 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus" 2>"$work/log"
rc=$?
set -e
tail -n 40 "$work/log"
if ((rc != 0)); then
  echo "fuzz: $(basename "$fuzzer") failed (exit $rc); full log $work/log" >&2
  for a in "$work/artifacts"/*; do
    [[ -e $a ]] || continue
    echo "reproducer: $a ($(stat -c %s "$a") bytes); rerun: $fuzzer $a" >&2
    head -c 512 "$a" | od -A d -c | head -n 20 >&2
  done
  exit 1
fi
