// Ring buffer throughput. Target: >= 1 M events/s consumed on one core with zero loss.
// 1. End to end: a sandboxed producer makes one event per syscall
//    (BW_POL_TRACE_SYSCALLS) while this process consumes; bound by the producer's
//    syscall cost on a slow machine.
// 2. Reader capacity: the ring filled with no reader running, then drained.
// 3. Sustained: a BPF producer on another thread (ringbuf_producer.bpf.c, records
//    written through the monitor's own helpers, pacing itself on unread bytes)
//    while this thread consumes concurrently; the consumer is the bottleneck.
#include <bpf/bpf.h>
#include <sched.h>
#include <sys/wait.h>

#include <linux/types.h>

#include <atomic>
#include <cstring>
#include <cstdio>
#include <thread>

#include "bpf_bench_util.h"
#include "bpf/ringbuf_producer.h"
#include "ringbuf_producer.skel.h"
#include "bpf/ringbuf_reader.h"

using namespace bwbench;

namespace {

uint64_t thread_cpu_ns() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

void pin_to_cpu(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)sched_setaffinity(0, sizeof set, &set);
}

// Consumer throughput while a producer writes concurrently, 5 rounds of 4 M records.
int sustained(Bench& b, bulwark::bpf::RingbufReader& reader, uint64_t& got, uint64_t cgroup_id) {
    LIBBPF_OPTS(bpf_object_open_opts, oo, .pin_root_path = b.pin_root.c_str());
    ringbuf_producer* skel = ringbuf_producer__open_opts(&oo);
    if (!skel || ringbuf_producer__load(skel) != 0) {
        std::printf("ringbuf_producer: load failed: %s\n", std::strerror(errno));
        ringbuf_producer__destroy(skel);
        return 5;
    }
    const int prog = bpf_program__fd(skel->progs.bw_bench_produce);
    constexpr uint64_t kPerRound = 4'000'000;
    cpu_set_t before;
    CPU_ZERO(&before);
    (void)sched_getaffinity(0, sizeof before, &before);
    pin_to_cpu(0);  // the consumer: this thread, alone on CPU 0; `before` restored after
    std::vector<double> rates, busy;
    uint64_t lost_total = 0, calls_total = 0;
    bool failed = false;
    for (int round = 0; round < 5 && !failed; ++round) {
        auto s0 = b.maps().stats().value();
        got = 0;
        std::atomic<bool> prod_failed{false};
        uint64_t t0 = now_ns(), c0 = thread_cpu_ns();
        std::thread producer([&] {
            pin_to_cpu(1);
            uint64_t left = kPerRound;
            while (left > 0) {
                bw_bench_args a{};
                a.cgroup_id = cgroup_id;
                a.count = uint32_t(std::min<uint64_t>(left, 4096));
                a.max_unread = BW_RINGBUF_BYTES / 2;
                LIBBPF_OPTS(bpf_test_run_opts, r, .ctx_in = &a, .ctx_size_in = sizeof a);
                if (bpf_prog_test_run_opts(prog, &r) != 0) {
                    prod_failed = true;
                    return;
                }
                left -= a.written;
                ++calls_total;
            }
        });
        while (got < kPerRound && !prod_failed) (void)reader.poll(10);
        uint64_t t1 = now_ns(), c1 = thread_cpu_ns();
        busy.push_back(double(c1 - c0) / double(t1 - t0));
        producer.join();
        auto s1 = b.maps().stats().value();
        lost_total += s1.ringbuf_reserve_failures - s0.ringbuf_reserve_failures;
        failed = prod_failed;
        rates.push_back(double(got) / (double(t1 - t0) / 1e9));
    }
    ringbuf_producer__destroy(skel);
    (void)sched_setaffinity(0, sizeof before, &before);
    if (failed) return std::printf("ringbuf_producer: BPF_PROG_RUN failed: %s\n", std::strerror(errno)), 6;
    std::printf("ring buffer sustained (BPF producer on CPU 1, paced at half the ring unread; the reader on CPU 0 "
                "consumes concurrently; 5 rounds x %llu records, %llu producer runs): median %.2f M events/s, min "
                "%.2f; reader busy %.0f%% of its core; reserve failures %llu   target >= 1 M/s, zero loss (ratio %.2fx)\n",
                (unsigned long long)kPerRound, (unsigned long long)calls_total, pct(rates, 50) / 1e6,
                pct(rates, 0) / 1e6, pct(busy, 50) * 100, (unsigned long long)lost_total, pct(rates, 50) / 1e6);
    return 0;
}

}  // namespace

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
    if (int r = sustained(b, **reader, got, id); r != 0) return r;
    (void)b.maps().unbind(id);
    rmdir(leaf.c_str());
    return 0;
}
