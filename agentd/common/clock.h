#pragma once
// Clock readings in nanoseconds, one spelling for the records, counters and
// timers of every subsystem.
#include <chrono>
#include <cstdint>

namespace bulwark {

// Nanoseconds since the Unix epoch (the wall clock): timestamps people and
// records read.
inline int64_t unix_ns(std::chrono::system_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
inline int64_t unix_now_ns() { return unix_ns(std::chrono::system_clock::now()); }

// Nanoseconds of the monotonic clock: intervals, deadlines, latencies.
inline int64_t steady_now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace bulwark
