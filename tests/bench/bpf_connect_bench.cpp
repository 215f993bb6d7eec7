// Loopback UDP socket+connect+close under a 1,000-rule cgroup sock_addr policy
// vs the same loop in a cgroup no Bulwark program runs for; interleaved rounds,
// with two more conditions that split the cost: programs at the same hooks that
// allow at once (what any program costs here), and Bulwark's programs under a
// loopback-only policy (no LPM lookup).
// Target: <= 1.05x.
// Then the same for unix sockets (Linux 6.7+ hooks): datagram socket+connect+
// close to a pathname socket, under a 1,000-rule unix policy (the cgroup
// connect_unix program: one LPM lookup on the path) vs no program.
#include <arpa/inet.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "bpf_bench_util.h"
#include "bulwark/policy/bpf_tables.h"
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

    // unix: 999 unrelated socket paths + the one the loop connects to
    const std::string sock_path = "/run/bulwark-bench-" + std::to_string(getpid()) + ".sock";
    bulwark::policy::BpfTables ut;
    ut.header.flags = BW_POL_UNIX_RULES;
    ut.header.af_allow = 1ull << AF_UNIX;
    ut.header.sock_type_allow = (1u << SOCK_STREAM) | (1u << SOCK_DGRAM);
    std::vector<bulwark::policy::UnixRule> urules;
    for (int i = 0; i < 999; ++i) urules.push_back({"/run/app-" + std::to_string(i) + "/s.sock", BW_NET_CONNECT, uint32_t(i)});
    urules.push_back({sock_path, BW_NET_CONNECT, 999});
    auto uentries = bulwark::policy::build_unix_entries(urules);  // the compiler's own map entries
    if (!uentries) return std::printf("unix entries: %s\n", uentries.error().message.c_str()), 1;
    ut.unix_sockets = std::move(*uentries);
    const auto* unix_prog = b.loader->program("cgroup/connect_unix");  // attached (this bench runs no canary)
    const bool unix_hooks = unix_prog && unix_prog->state != bulwark::bpf::ProgState::Unavailable;
    uint64_t unix_id = 0;
    std::string unix_leaf;
    if (unix_hooks) {
        auto hu = b.maps().load(ut);
        if (!hu) return std::printf("load unix: %s\n", hu.error().message().c_str()), 1;
        unix_leaf = make_cgroup(b.parent, "unix", &unix_id);
        (void)b.maps().bind(unix_id, hu->handle);
    }
    sockaddr_un ua{};
    ua.sun_family = AF_UNIX;
    std::memcpy(ua.sun_path, sock_path.data(), sock_path.size());
    const socklen_t ua_len = socklen_t(offsetof(sockaddr_un, sun_path) + sock_path.size() + 1);
    unlink(sock_path.c_str());
    int usrv = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (usrv < 0 || bind(usrv, reinterpret_cast<sockaddr*>(&ua), ua_len) != 0)
        return std::printf("unix bind %s: %s\n", sock_path.c_str(), std::strerror(errno)), 1;

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
        if (!unix_hooks) {
            std::printf("unix connect loop: skipped, no cgroup connect_unix program on this kernel\n");
            std::fflush(stdout);
            join(b.outside);
            std::_Exit(0);
        }
        std::vector<Cond> uconds = {{"no program", b.outside, {}, {}}, {"1,000-rule unix policy", unix_leaf, {}, {}}};
        auto uloop = [&](std::vector<double>& per_op) {
            uint64_t t0 = now_ns();
            for (int i = 0; i < kOps; ++i) {
                uint64_t s = now_ns();
                int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                if (connect(fd, reinterpret_cast<const sockaddr*>(&ua), ua_len) != 0) std::_Exit(4);
                close(fd);
                per_op.push_back(double(now_ns() - s));
            }
            return double(now_ns() - t0) / kOps;
        };
        for (int r = 0; r < kRounds; ++r)
            for (size_t k = 0; k < uconds.size(); ++k) {
                Cond& cd = uconds[(k + size_t(r)) % uconds.size()];
                join(cd.cg);
                cd.rounds.push_back(uloop(cd.per_op));
            }
        std::printf("unix connect loop (datagram socket+connect+close, pathname), %d interleaved rounds x %d ops\n",
                    kRounds, kOps);
        for (const Cond& cd : uconds)
            std::printf("  %-44s round median %5.0f ns/op (%.3fx), per-op p50 %5.0f ns (%.3fx), p99 %6.0f ns\n", cd.name,
                        pct(cd.rounds, 50), pct(cd.rounds, 50) / pct(uconds[0].rounds, 50), pct(cd.per_op, 50),
                        pct(cd.per_op, 50) / pct(uconds[0].per_op, 50), pct(cd.per_op, 99));
        std::fflush(stdout);
        join(b.outside);
        std::_Exit(0);
    }
    int st = 0;
    waitpid(c, &st, 0);
    (void)b.maps().unbind(leaf_id);
    (void)b.maps().unbind(lo_id);
    if (unix_hooks) {
        (void)b.maps().unbind(unix_id);
        rmdir(unix_leaf.c_str());
    }
    close(usrv);
    unlink(sock_path.c_str());
    rmdir(leaf.c_str());
    rmdir(lo_leaf.c_str());
    empty_sock__destroy(skel);
    close(empty_fd);
    rmdir(empty_cg.c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
