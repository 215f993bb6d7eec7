#pragma once
// Percentiles of one benchmark variant's samples, and the audit store as the
// store benchmarks open it.
#include <algorithm>
#include <filesystem>
#include <vector>

#include "audit/audit_db.h"

namespace bulwark::bench {

struct Stats {
    double p50, p99, mean;
};

inline Stats stats(std::vector<double> v) {
    if (v.empty()) return {0, 0, 0};
    std::sort(v.begin(), v.end());
    double sum = 0;
    for (double x : v) sum += x;
    return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 99 / 100)], sum / double(v.size())};
}

// A store at `path` that never refuses for disk space, keeps every row and
// queues up to 1 Mi records: what is measured is the writer, not the limits.
inline audit::StoreOptions bench_store_options(const std::filesystem::path& path) {
    audit::StoreOptions o;
    o.path = path;
    o.min_free_bytes = 0;
    o.retention.reset();
    o.queue_capacity = 1 << 20;
    return o;
}

}  // namespace bulwark::bench
