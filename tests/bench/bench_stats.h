#pragma once
// Percentiles of one benchmark variant's samples.
#include <algorithm>
#include <vector>

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

}  // namespace bulwark::bench
