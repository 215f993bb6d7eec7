// Loopback UDP socket+connect+close under a 1,000-rule cgroup sock_addr policy
// vs the same loop in a cgroup no Bulwark program runs for; interleaved rounds.
// Target: <= 1.05x.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cstring>

#include "bpf_bench_util.h"

using namespace bwbench;

int main() {
    Bench b;
    bulwark::policy::BpfTables t;
    t.header.flags = BW_POL_NET_RULES;
    t.header.af_allow = (1ull << AF_INET) | (1ull << AF_INET6);
    t.header.sock_type_allow = (1u << SOCK_STREAM) | (1u << SOCK_DGRAM);
    for (int i = 0; i < 999; ++i) {  // 999 unrelated /32s + the one the loop uses
        bulwark::policy::BpfNetEntry e;
        e.key.prefixlen = 32 + 128;
        e.key.addr[10] = e.key.addr[11] = 0xff;
        e.key.addr[12] = 10;
        e.key.addr[13] = static_cast<uint8_t>(i >> 8);
        e.key.addr[14] = static_cast<uint8_t>(i);
        e.key.addr[15] = 1;
        e.value.count = 1;
        e.value.ranges[0] = {1, 65535, BW_PROTO_TCP | BW_PROTO_UDP, BW_NET_CONNECT, BW_NET_ACTION_ALLOW, 0,
                             static_cast<uint32_t>(i)};
        t.net.push_back(e);
    }
    bulwark::policy::BpfNetEntry lo;
    lo.key.prefixlen = 32 + 128;
    lo.key.addr[10] = lo.key.addr[11] = 0xff;
    lo.key.addr[12] = 127;
    lo.key.addr[15] = 1;
    lo.value.count = 1;
    lo.value.ranges[0] = {9, 9, BW_PROTO_UDP, BW_NET_CONNECT, BW_NET_ACTION_ALLOW, 0, 999};
    t.net.push_back(lo);
    auto h = b.maps().load(t);
    if (!h) return std::printf("load: %s\n", h.error().message().c_str()), 1;
    uint64_t leaf_id = 0;
    std::string leaf = make_cgroup(b.parent, "leaf", &leaf_id);
    (void)b.maps().bind(leaf_id, h->handle);

    constexpr int kRounds = 40, kOps = 3000;
    pid_t c = fork();
    if (c == 0) {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(9);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        std::vector<double> with, without, round_with, round_without;
        auto loop = [&](std::vector<double>& per_op) {
            uint64_t t0 = now_ns();
            for (int i = 0; i < kOps; ++i) {
                uint64_t s = now_ns();
                int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) std::_Exit(3);
                close(fd);
                per_op.push_back(double(now_ns() - s));
            }
            return double(now_ns() - t0) / kOps;
        };
        for (int r = 0; r < kRounds; ++r) {  // alternate which side goes first
            bool sandbox_first = r % 2;
            for (int k = 0; k < 2; ++k) {
                bool in_sandbox = (k == 0) == sandbox_first;
                join(in_sandbox ? leaf : b.outside);
                double v = loop(in_sandbox ? with : without);
                (in_sandbox ? round_with : round_without).push_back(v);
            }
        }
        double mw = pct(round_with, 50), mo = pct(round_without, 50);
        std::printf("connect loop (UDP socket+connect+close, loopback), %d interleaved rounds x %d ops\n", kRounds, kOps);
        std::printf("  no program:        round median %.0f ns/op, per-op p50 %.0f ns, p99 %.0f ns\n", mo,
                    pct(without, 50), pct(without, 99));
        std::printf("  1,000-rule policy: round median %.0f ns/op, per-op p50 %.0f ns, p99 %.0f ns\n", mw,
                    pct(with, 50), pct(with, 99));
        std::printf("  ratio (round medians) %.3fx, (per-op p50) %.3fx, (p99) %.3fx   target <= 1.05x\n", mw / mo,
                    pct(with, 50) / pct(without, 50), pct(with, 99) / pct(without, 99));
        std::fflush(stdout);
        join(b.outside);
        std::_Exit(0);
    }
    int st = 0;
    waitpid(c, &st, 0);
    (void)b.maps().unbind(leaf_id);
    rmdir(leaf.c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
