/* GCC's -fsanitize-coverage=trace-cmp also traces floating-point comparisons,
 * which neither libFuzzer nor libasan takes: no-ops for every program of the
 * fuzz build (cmake/BulwarkFuzz.cmake); they carry no useful signal for the
 * parsers fuzzed. */
__attribute__((no_instrument_function)) void __sanitizer_cov_trace_cmpf(float a, float b) {
    (void)a;
    (void)b;
}
__attribute__((no_instrument_function)) void __sanitizer_cov_trace_cmpd(double a, double b) {
    (void)a;
    (void)b;
}
