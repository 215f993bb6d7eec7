#!/usr/bin/env bash
# build-sanitizers.sh <main build dir> [jobs]
# The sanitizer builds `./bulwark test` runs tiers from (tests/sanitizers):
#   <main>/asan  ASan + UBSan, with the libFuzzer targets (tests/fuzz)
#   <main>/tsan  TSan (with BULWARK_TSAN=1)
# Each builds only bulwark_sanitizer_tiers: the executables of its tiers
# and what they link, not the BPF programs, the dashboard or other tiers.
# ASan+UBSan at -O0 -g1: nothing optimised away before the checks run, line
# tables are all a report's stack needs, and it compiles in about half the
# time of -O1 for the Boost.Beast and nlohmann_json code that dominates the
# build (the tiers run slower, well within their timeouts; the fuzzers run
# for a fixed time either way). TSan at -O1 (its own advice: -O0 makes it
# too slow for the daemon's concurrent paths). Assertions stay on (no -DNDEBUG).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$1
JOBS=${2:-$(nproc)}
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache); fi
# The ASan build is also the proof that the tree configures and builds with
# CMake's default generator (Unix Makefiles) and the Debug build type (the
# main build is Ninja and RelWithDebInfo; the arm64 build is Release).
kinds=(asan)
if [[ ${BULWARK_TSAN:-0} == 1 ]]; then kinds+=(tsan); fi
for kind in "${kinds[@]}"; do
  case $kind in
    asan) san=(-G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -g1"
               "-DCMAKE_C_FLAGS_DEBUG=-O0 -g1" -DBULWARK_SANITIZE=ON -DBULWARK_FUZZ=ON) ;;
    tsan) san=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1"
               "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1" -DBULWARK_SANITIZE=thread) ;;
  esac
  start=$SECONDS
  cmake -S "$ROOT" -B "$BUILD/$kind" -DBULWARK_WERROR=ON -DCMAKE_UNITY_BUILD=ON "${san[@]}" "${launcher[@]}" >/dev/null
  cmake --build "$BUILD/$kind" -j "$JOBS" --target bulwark_sanitizer_tiers
  echo "build-sanitizers: $kind built in $((SECONDS - start)) s"
done
