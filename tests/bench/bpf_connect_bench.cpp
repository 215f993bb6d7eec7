// Loopback UDP socket+connect+close under a 1,000-rule cgroup sock_addr policy
// vs the same loop in a cgroup no Bulwark program runs for; interleaved rounds,
// with two more conditions that split the cost: programs at the same hooks that
// allow at once (what any program costs here), and Bulwark's programs under a
// loopback-only policy (no LPM lookup).
// Target: <= 1.05x.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>

#include "bpf_bench_util.h"
#include "empty_sock.skel.h"

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
    uint64_t leaf_id = 0, lo_id = 0;
    std::string leaf = make_cgroup(b.parent, "leaf", &leaf_id);
    (void)b.maps().bind(leaf_id, h->handle);
    // third condition: programs run, loopback-only policy (no LPM lookup), to split the cost
    bulwark::policy::BpfTables lo_pol;
    lo_pol.header = t.header;
    lo_pol.header.flags = BW_POL_NET_LOOPBACK;
    auto hl = b.maps().load(lo_pol);
    if (!hl) return 1;
    std::string lo_leaf = make_cgroup(b.parent, "lo", &lo_id);
    (void)b.maps().bind(lo_id, hl->handle);

    // floor: programs at the same two hooks that allow at once, in a cgroup of their own
    std::string empty_cg = b.outside + "-empty";
    mkdir(empty_cg.c_str(), 0700);
    empty_sock* skel = empty_sock__open_and_load();
    int empty_fd = open(empty_cg.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (!skel || empty_fd < 0 ||
        !(skel->links.bw_bench_empty_sock_create = bpf_program__attach_cgroup(skel->progs.bw_bench_empty_sock_create, empty_fd)) ||
        !(skel->links.bw_bench_empty_connect4 = bpf_program__attach_cgroup(skel->progs.bw_bench_empty_connect4, empty_fd)))
        return std::printf("empty_sock: %s\n", std::strerror(errno)), 1;

    struct Cond {
        const char* name;
        std::string cg;
        std::vector<double> per_op, rounds;
    };
    std::vector<Cond> conds = {{"no program", b.outside, {}, {}},
                               {"empty programs (allow at once; the floor)", empty_cg, {}, {}},
                               {"loopback policy (programs run, no LPM)", lo_leaf, {}, {}},
                               {"1,000-rule policy", leaf, {}, {}}};
    constexpr int kRounds = 40, kOps = 3000;
    pid_t c = fork();
    if (c == 0) {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(9);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
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
        for (int r = 0; r < kRounds; ++r) {  // rotate which condition goes first
            for (size_t k = 0; k < conds.size(); ++k) {
                Cond& cd = conds[(k + size_t(r)) % conds.size()];
                join(cd.cg);
                cd.rounds.push_back(loop(cd.per_op));
            }
        }
        const Cond& none = conds[0];
        const Cond& pol = conds.back();
        std::printf("connect loop (UDP socket+connect+close, loopback), %d interleaved rounds x %d ops\n", kRounds, kOps);
        for (const Cond& cd : conds)
            std::printf("  %-44s round median %5.0f ns/op (%.3fx), per-op p50 %5.0f ns (%.3fx), p99 %6.0f ns\n", cd.name,
                        pct(cd.rounds, 50), pct(cd.rounds, 50) / pct(none.rounds, 50), pct(cd.per_op, 50),
                        pct(cd.per_op, 50) / pct(none.per_op, 50), pct(cd.per_op, 99));
        std::printf("  ratio (round medians) %.3fx, (per-op p50) %.3fx, (p99) %.3fx   target <= 1.05x\n",
                    pct(pol.rounds, 50) / pct(none.rounds, 50), pct(pol.per_op, 50) / pct(none.per_op, 50),
                    pct(pol.per_op, 99) / pct(none.per_op, 99));
        std::fflush(stdout);
        join(b.outside);
        std::_Exit(0);
    }
    int st = 0;
    waitpid(c, &st, 0);
    (void)b.maps().unbind(leaf_id);
    (void)b.maps().unbind(lo_id);
    rmdir(leaf.c_str());
    rmdir(lo_leaf.c_str());
    empty_sock__destroy(skel);
    close(empty_fd);
    rmdir(empty_cg.c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
