// Loading a 10,000-rule policy into the maps (batched), for net rules (LPM)
// and file rules (stat + hash); and freeing it. Target: <= 2 ms.
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>

#include "bpf_bench_util.h"

using namespace bwbench;

int main() {
    Bench b;
    constexpr int kRules = 10000, kReps = 9;
    bulwark::policy::BpfTables net;
    net.header.flags = BW_POL_NET_RULES;
    for (int i = 0; i < kRules; ++i) {
        bulwark::policy::BpfNetEntry e;
        e.key.prefixlen = 32 + 128;
        e.key.addr[10] = e.key.addr[11] = 0xff;
        e.key.addr[12] = 10;
        e.key.addr[13] = static_cast<uint8_t>(i >> 16);
        e.key.addr[14] = static_cast<uint8_t>(i >> 8);
        e.key.addr[15] = static_cast<uint8_t>(i);
        e.value.count = 1;
        e.value.ranges[0] = {443, 443, BW_PROTO_TCP, BW_NET_CONNECT, BW_NET_ACTION_ALLOW, 0, static_cast<uint32_t>(i)};
        net.net.push_back(e);
    }
    std::string dir = "/tmp/bulwark-load-bench-" + std::to_string(getpid());
    std::filesystem::create_directories(dir);
    bulwark::policy::BpfTables files;
    files.header.flags = BW_POL_FILES_ENFORCED;
    for (int i = 0; i < kRules; ++i) {
        std::string p = dir + "/f" + std::to_string(i);
        FILE* f = std::fopen(p.c_str(), "w");
        if (f) std::fclose(f);
        bulwark::policy::BpfFileEntry e;
        e.path = p;
        e.value.allow = BW_FS_READ;
        e.value.allow_rule_id = static_cast<uint32_t>(i);
        files.files.push_back(e);
    }
    auto run = [&](const char* what, const bulwark::policy::BpfTables& t) {
        std::vector<double> load_ms, free_ms, resolve_ms, write_ms;
        bool fb = false, nb = false;
        for (int r = 0; r < kReps; ++r) {
            uint64_t s = now_ns();
            auto h = b.maps().load(t);
            uint64_t m = now_ns();
            if (!h) {
                std::printf("%s: load failed: %s\n", what, h.error().message().c_str());
                return;
            }
            (void)b.maps().free(h->handle.slot);
            uint64_t e = now_ns();
            load_ms.push_back(double(m - s) / 1e6);
            resolve_ms.push_back(double(h->resolve_ns) / 1e6);
            write_ms.push_back(double(h->write_ns) / 1e6);
            fb = h->files_batched;
            nb = h->net_batched;
            free_ms.push_back(double(e - m) / 1e6);
        }
        std::printf("load %d %s rules: median %.2f ms (min %.2f, max %.2f) = stat %.2f + map writes %.2f ms"
                    " [batched: files %s, net %s]; free median %.2f ms   target <= 2 ms (ratio %.2fx)\n",
                    kRules, what, pct(load_ms, 50), pct(load_ms, 0), pct(load_ms, 100), pct(resolve_ms, 50),
                    pct(write_ms, 50), fb ? "yes" : "no", nb ? "yes" : "no", pct(free_ms, 50), pct(load_ms, 50) / 2.0);
    };
    run("net (LPM trie)", net);
    run("file (stat + hash)", files);
    std::filesystem::remove_all(dir);
    return 0;
}
