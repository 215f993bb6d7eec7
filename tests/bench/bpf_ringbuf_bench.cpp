// Ring buffer throughput: a sandboxed producer makes one event per syscall
// (BW_POL_TRACE_SYSCALLS) while this process consumes; counts events/s read
// and kernel-side reserve failures. Target: >= 1 M events/s with zero loss.
#include <bpf/bpf.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "bpf_bench_util.h"
#include "ringbuf_reader.h"

using namespace bwbench;

int main() {
    Bench b(/*monitor=*/true);
    bulwark::policy::BpfTables t;
    t.header.flags = BW_POL_NET_NONE | BW_POL_TRACE_SYSCALLS;
    auto h = b.maps().load(t);
    if (!h) return 1;
    uint64_t id = 0;
    std::string leaf = make_cgroup(b.parent, "leaf", &id);
    (void)b.maps().bind(id, h->handle);
    uint64_t got = 0;
    auto reader = bulwark::bpf::RingbufReader::create(b.maps().events_fd(), [&](const bw_event& e) {
        if (e.cgroup_id == id) ++got;
    });
    if (!reader) return 2;
    auto before = b.maps().stats().value();
    constexpr long kSyscalls = 1000000;
    uint64_t t0 = now_ns();
    pid_t c = fork();
    if (c == 0) {
        if (!join(leaf)) std::_Exit(3);
        for (long i = 0; i < kSyscalls; ++i) (void)getppid();
        std::_Exit(0);
    }
    int st = 0;
    while (waitpid(c, &st, WNOHANG) == 0) (void)(*reader)->poll(10);
    uint64_t t_prod = now_ns();
    while ((*reader)->consume().value_or(0) > 0) {
    }
    uint64_t t1 = now_ns();
    auto after = b.maps().stats().value();
    uint64_t emitted = after.events_emitted - before.events_emitted;
    uint64_t lost = after.ringbuf_reserve_failures - before.ringbuf_reserve_failures;
    double secs = double(t1 - t0) / 1e9;
    std::printf("ring buffer end to end (one producer, one event per getppid; producer-bound here): %llu events read in %.3f s = %.2f M events/s (producer done after %.3f s); "
                "emitted %llu, reserve failures %llu   target >= 1 M/s, zero loss\n",
                (unsigned long long)got, secs, double(got) / secs / 1e6, double(t_prod - t0) / 1e9,
                (unsigned long long)emitted, (unsigned long long)lost);

    // Reader capacity: fill the ring (no reader running) with fewer records than
    // it holds, then time draining it. Repeated; zero loss required.
    std::vector<double> rates;
    uint64_t lost_total = 0;
    bpf_map_info ring_info{};
    uint32_t info_len = sizeof ring_info;
    if (bpf_obj_get_info_by_fd(b.maps().events_fd(), &ring_info, &info_len) != 0) return 4;
    // Three quarters of what the ring holds (each record has an 8-byte header).
    const long fill = long(ring_info.max_entries / ((sizeof(bw_event) + 8 + 7) / 8 * 8)) * 3 / 4;
    for (int round = 0; round < 10; ++round) {
        auto s0 = b.maps().stats().value();
        pid_t p = fork();
        if (p == 0) {
            if (!join(leaf)) std::_Exit(3);
            for (long i = 0; i < fill; ++i) (void)getppid();
            std::_Exit(0);
        }
        waitpid(p, &st, 0);
        got = 0;
        uint64_t d0 = now_ns();
        while ((*reader)->consume().value_or(0) > 0) {
        }
        uint64_t d1 = now_ns();
        auto s1 = b.maps().stats().value();
        lost_total += s1.ringbuf_reserve_failures - s0.ringbuf_reserve_failures;
        rates.push_back(double(got) / (double(d1 - d0) / 1e9));
    }
    std::printf("ring buffer reader capacity (drain of %ld queued records, 3/4 of the %u KiB ring, 10 rounds): median "
                "%.2f M events/s, min %.2f; reserve failures %llu   target >= 1 M/s, zero loss (ratio %.2fx)\n",
                fill, ring_info.max_entries >> 10, pct(rates, 50) / 1e6, pct(rates, 0) / 1e6, (unsigned long long)lost_total, pct(rates, 50) / 1e6);
    (void)b.maps().unbind(id);
    rmdir(leaf.c_str());
    return 0;
}
