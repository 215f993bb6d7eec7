// Coverage feedback for libFuzzer when the library is built by GCC.
// libFuzzer dropped -fsanitize-coverage=trace-pc, and GCC has no
// inline-8bit-counters, so the build is made with -finstrument-functions
// (call edges, hashed into 8-bit counters registered with libFuzzer here)
// plus -fsanitize-coverage=trace-cmp (comparison operands, which libFuzzer
// uses with -use_value_profile=1): cmake/BulwarkFuzz.cmake. The fuzzer's
// strong definitions here take the place of glibc's no-op hooks.
#include <cstddef>
#include <cstdint>

extern "C" void __sanitizer_cov_8bit_counters_init(uint8_t* start, uint8_t* stop);

namespace {
constexpr size_t kCounters = 1u << 16;
alignas(64) uint8_t counters[kCounters];

__attribute__((constructor(101), no_instrument_function)) void register_counters() {
    __sanitizer_cov_8bit_counters_init(counters, counters + kCounters);
}
}  // namespace

extern "C" {
__attribute__((no_instrument_function, no_sanitize_address, no_sanitize_undefined)) void __cyg_profile_func_enter(
    void* fn, void* call_site) {
    uintptr_t h = (reinterpret_cast<uintptr_t>(fn) ^ (reinterpret_cast<uintptr_t>(call_site) << 1)) *
                  0x9E3779B97F4A7C15ull;
    ++counters[(h >> 48) & (kCounters - 1)];
}
__attribute__((no_instrument_function)) void __cyg_profile_func_exit(void*, void*) {}
}
