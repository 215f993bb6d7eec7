# BULWARK_FUZZ: the ASan+UBSan build's libFuzzer targets (tests/fuzz).
#
# The project's compiler is GCC (clang 14 cannot compile libstdc++ 12's
# std::expected), and GCC has no -fsanitize=fuzzer. So every file of that
# build is compiled with -fsanitize-coverage=trace-cmp (comparison operands,
# which libFuzzer uses with -use_value_profile=1) and -finstrument-functions
# (call edges, which tests/fuzz/fuzz_coverage.cpp turns into libFuzzer's 8-bit
# counters), and each fuzzer links the build's own libraries with clang's
# libFuzzer runtime (libclang-rt-14-dev) supplying main. One compile of each
# file serves the fuzzers and the sanitizer tiers alike; in the tiers the
# hooks are no-ops: glibc's __cyg_profile_func_enter/exit, libasan's weak
# __sanitizer_cov_trace_cmp*, and fuzz_cov_floats.c for the floating-point
# comparisons GCC also traces (libasan and libFuzzer have no hook for them).
option(BULWARK_FUZZ "Build the libFuzzer targets (needs BULWARK_SANITIZE=ON)" OFF)
if(NOT BULWARK_FUZZ)
  return()
endif()
if(NOT BULWARK_SANITIZE STREQUAL "ON" AND NOT BULWARK_SANITIZE STREQUAL "address")
  message(FATAL_ERROR "BULWARK_FUZZ needs the ASan+UBSan build (-DBULWARK_SANITIZE=ON)")
endif()
execute_process(COMMAND clang --print-file-name=libclang_rt.fuzzer-x86_64.a
                OUTPUT_VARIABLE BULWARK_FUZZER_RUNTIME OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT EXISTS "${BULWARK_FUZZER_RUNTIME}")
  message(FATAL_ERROR "BULWARK_FUZZ: libFuzzer runtime not found (clang and libclang-rt-14-dev; scripts/install-deps.sh)")
endif()
add_compile_options(-fsanitize-coverage=trace-cmp -finstrument-functions
                    -finstrument-functions-exclude-file-list=/usr/include)
add_library(bulwark_fuzz_cov_floats STATIC ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_cov_floats.c)
link_libraries(bulwark_fuzz_cov_floats)
