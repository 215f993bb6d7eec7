// GCC's -fsanitize-coverage=trace-pc calls __sanitizer_cov_trace_pc() at
// every basic block; libFuzzer wants 8-bit counters. Hash each PC into a
// counter table registered with libFuzzer before it starts.
#include <cstddef>
#include <cstdint>

extern "C" void __sanitizer_cov_8bit_counters_init(uint8_t* start, uint8_t* stop);

namespace {
constexpr size_t kCounters = 1u << 16;
alignas(64) uint8_t counters[kCounters];

__attribute__((constructor(101))) void register_counters() {
    __sanitizer_cov_8bit_counters_init(counters, counters + kCounters);
}
}  // namespace

extern "C" __attribute__((no_sanitize_address, no_sanitize_undefined)) void __sanitizer_cov_trace_pc() {
    static thread_local uintptr_t prev = 0;
    uintptr_t pc = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
    uintptr_t cur = (pc >> 1) * 0x9E3779B97F4A7C15ull >> 48;
    ++counters[(cur ^ prev) & (kCounters - 1)];
    prev = cur >> 1;
}
