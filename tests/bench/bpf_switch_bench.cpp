// Subtask policy switch: one bw_sandboxes update rebinding a cgroup between two
// loaded policies. Target: p99 <= 5 us.
#include <cstdio>

#include "bpf_bench_util.h"

using namespace bwbench;

int main() {
    Bench b;
    bulwark::policy::BpfTables a, d;
    a.header.flags = BW_POL_NET_LOOPBACK;
    d.header.flags = BW_POL_NET_NONE;
    auto ha = b.maps().load(a), hd = b.maps().load(d);
    if (!ha || !hd) return 1;
    uint64_t id = 0;
    std::string leaf = make_cgroup(b.parent, "leaf", &id);
    constexpr int kFlips = 200000;
    std::vector<double> ns;
    ns.reserve(kFlips);
    for (int i = 0; i < kFlips; ++i) {
        uint64_t s = now_ns();
        if (!b.maps().bind(id, (i & 1) ? ha->handle : hd->handle)) return 2;
        ns.push_back(double(now_ns() - s));
    }
    std::printf("policy switch (one bw_sandboxes update), %d flips: p50 %.0f ns, p99 %.0f ns, p99.9 %.0f ns, max %.0f ns"
                "   target p99 <= 5000 ns\n",
                kFlips, pct(ns, 50), pct(ns, 99), pct(ns, 99.9), pct(ns, 100));
    (void)b.maps().unbind(id);
    rmdir(leaf.c_str());
    return 0;
}
