// cgroup connect_unix / sendmsg_unix programs (Linux 6.7+) on the host kernel:
// a host "daemon" (this process) listens on pathname and abstract unix
// sockets; children inside a sandbox leaf cgroup try to reach them. Every
// attempt is made from outside the sandbox too (the control: it succeeds).
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "audit/audit_record.h"
#include "bpf_env.h"
#include "unix_env.h"
#include "bulwark/policy/bpf_tables.h"

using namespace bwtest;

namespace {

// A socket of `type` bound to `a` (listening unless datagram).
struct UnixServer {
    UnixServer(const std::string& a, int type) : addr(a) {
        fd = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
        sockaddr_un sa;
        socklen_t len = unix_sockaddr(a, sa);
        if (!a.starts_with("@")) ::unlink(a.c_str());
        ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&sa), len) == 0 &&
             (type == SOCK_DGRAM || ::listen(fd, 16) == 0);
    }
    ~UnixServer() {
        if (fd >= 0) ::close(fd);
        if (!addr.starts_with("@")) ::unlink(addr.c_str());
    }
    std::string addr;
    int fd = -1;
    bool ok = false;
};

int unix_connect(const std::string& a, int type) {
    int s = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    if (s < 0) return errno;
    sockaddr_un sa;
    socklen_t len = unix_sockaddr(a, sa);
    int r = ::connect(s, reinterpret_cast<sockaddr*>(&sa), len) == 0 ? 0 : errno;
    ::close(s);
    return r;
}

int unix_sendto(const std::string& a) {
    int s = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return errno;
    sockaddr_un sa;
    socklen_t len = unix_sockaddr(a, sa);
    int r = ::sendto(s, "x", 1, 0, reinterpret_cast<sockaddr*>(&sa), len) == 1 ? 0 : errno;
    ::close(s);
    return r;
}

// socketpair, one byte each way: 0 or errno.
int pair_roundtrip(int type) {
    int sv[2];
    if (::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv) != 0) return errno;
    char c = 0;
    int r = ::send(sv[0], "p", 1, 0) == 1 && ::recv(sv[1], &c, 1, 0) == 1 && c == 'p' ? 0 : EIO;
    ::close(sv[0]);
    ::close(sv[1]);
    return r;
}

BpfTables unix_policy(const std::vector<std::pair<std::string, uint32_t>>& allow_connect,
                      const std::vector<std::pair<std::string, uint32_t>>& allow_send = {}) {
    auto t = net_policy(BW_POL_NET_NONE | (allow_connect.empty() && allow_send.empty() ? 0u : BW_POL_UNIX_RULES));
    auto add = [&](const std::string& a, uint32_t op, uint32_t rule) {
        auto k = bulwark::policy::unix_rule_key(a);
        REQUIRE(k);
        for (auto& e : t.unix_sockets)
            if (std::memcmp(&e.key, &*k, sizeof *k) == 0) {
                e.value.op_mask |= op;
                (op == BW_NET_CONNECT ? e.value.connect_rule_id : e.value.send_rule_id) = rule;
                return;
            }
        bulwark::policy::BpfUnixEntry e{*k, {op, BW_NO_RULE, BW_NO_RULE, 0}};
        (op == BW_NET_CONNECT ? e.value.connect_rule_id : e.value.send_rule_id) = rule;
        t.unix_sockets.push_back(e);
    };
    for (const auto& [a, r] : allow_connect) add(a, BW_NET_CONNECT, r);
    for (const auto& [a, r] : allow_send) add(a, BW_NET_SEND, r);
    return t;
}

std::string dir_for(const char* what) {
    std::string d = "/tmp/bw-unix-" + std::string(what) + "-" + std::to_string(getpid());
    std::filesystem::create_directories(d);
    return d;
}

}  // namespace

TEST_CASE("unix: without a rule, connect and addressed sends to pathname and abstract sockets are refused; socketpair works") {
    if (!unix_programs_enforcing()) return;
    const std::string dir = dir_for("none");
    const std::string tag = std::to_string(getpid());
    UnixServer st(dir + "/stream.sock", SOCK_STREAM), dg(dir + "/dgram.sock", SOCK_DGRAM),
        sp(dir + "/seqpacket.sock", SOCK_SEQPACKET), ab("@bw-unix-test-" + tag, SOCK_STREAM),
        abd("@bw-unix-test-dgram-" + tag, SOCK_DGRAM);
    for (auto* s : {&st, &dg, &sp, &ab, &abd}) REQUIRE(s->ok);

    // control: the host reaches every one of them
    CHECK(unix_connect(st.addr, SOCK_STREAM) == 0);
    CHECK(unix_sendto(dg.addr) == 0);
    CHECK(unix_connect(dg.addr, SOCK_DGRAM) == 0);
    CHECK(unix_connect(sp.addr, SOCK_SEQPACKET) == 0);
    CHECK(unix_connect(ab.addr, SOCK_STREAM) == 0);
    CHECK(unix_sendto(abd.addr) == 0);

    Leaf leaf("unix-none");
    auto h = load(unix_policy({}));
    REQUIRE(Env::get().maps().bind(leaf.id, h));
    auto* res = shared<int>(9);
    CHECK(run_in(leaf.path, [&] {
              res[0] = unix_connect(st.addr, SOCK_STREAM);
              res[1] = unix_sendto(dg.addr);
              res[2] = unix_connect(dg.addr, SOCK_DGRAM);
              res[3] = unix_connect(sp.addr, SOCK_SEQPACKET);
              res[4] = unix_connect(ab.addr, SOCK_STREAM);
              res[5] = unix_sendto(abd.addr);
              res[6] = pair_roundtrip(SOCK_STREAM);
              res[7] = pair_roundtrip(SOCK_DGRAM);
              // relative path of the same socket, from its directory
              res[8] = chdir(dir.c_str()) == 0 ? unix_connect("stream.sock", SOCK_STREAM) : errno;
              return 0;
          }) == 0);
    CHECK(res[0] == EPERM);
    CHECK(res[1] == EPERM);
    CHECK(res[2] == EPERM);
    CHECK(res[3] == EPERM);
    CHECK(res[4] == EPERM);
    CHECK(res[5] == EPERM);
    CHECK(res[6] == 0);
    CHECK(res[7] == 0);
    CHECK(res[8] == EPERM);

    auto ev = Env::get().events_of(leaf.id);
    REQUIRE(ev.size() == 7);
    for (const auto& e : ev) {
        CHECK(e.layer == BW_LAYER_SOCK_UNIX);
        CHECK(e.decision == BW_DECISION_DENY);
        CHECK(e.ret == -EPERM);
        CHECK(e.rule_id == BW_NO_RULE);
        CHECK(e.obj_kind == BW_OBJ_UNIX);
        CHECK(e.obj.unx.family == AF_UNIX);
        CHECK(e.policy_id == h.slot);
        CHECK(e.cgroup_id == leaf.id);
    }
    using bulwark::audit::render_object;
    CHECK(ev[0].op == BW_OP_CONNECT);
    CHECK(render_object(ev[0]) == "unix stream " + st.addr);
    CHECK(ev[1].op == BW_OP_SENDMSG);
    CHECK(render_object(ev[1]) == "unix dgram " + dg.addr);
    CHECK(ev[2].op == BW_OP_CONNECT);
    CHECK(render_object(ev[3]) == "unix seqpacket " + sp.addr);
    CHECK(ev[4].obj.unx.kind == BW_UNIX_ABSTRACT);
    CHECK(render_object(ev[4]) == "unix stream " + ab.addr);
    CHECK(ev[5].op == BW_OP_SENDMSG);
    CHECK(render_object(ev[5]) == "unix dgram " + abd.addr);
    CHECK(render_object(ev[6]) == "unix stream stream.sock");
    REQUIRE(Env::get().maps().free(h.slot));
    std::filesystem::remove_all(dir);
}

TEST_CASE("unix: a rule allows its socket (or its directory's sockets, or its abstract name) and nothing else") {
    if (!unix_programs_enforcing()) return;
    const std::string dir = dir_for("rules");
    const std::string tag = std::to_string(getpid());
    std::filesystem::create_directories(dir + "/sub");
    UnixServer allowed(dir + "/app.sock", SOCK_STREAM), other(dir + "/app.sock2", SOCK_STREAM),
        below(dir + "/sub/x.sock", SOCK_STREAM), dgram(dir + "/log.sock", SOCK_DGRAM),
        ab("@bw-unix-ok-" + tag, SOCK_STREAM), ab_longer("@bw-unix-ok-" + tag + "x", SOCK_STREAM);
    for (auto* s : {&allowed, &other, &below, &dgram, &ab, &ab_longer}) REQUIRE(s->ok);
    // the abstract rule names the name with one more NUL byte: a different name
    std::string ab_nul = ab.addr + std::string(1, '\0');
    UnixServer ab_nul_srv(ab_nul, SOCK_STREAM);
    REQUIRE(ab_nul_srv.ok);

    Leaf leaf("unix-rules");
    auto h = load(unix_policy({{allowed.addr, 21}, {dir + "/sub/", 22}, {ab.addr, 23}}, {{dgram.addr, 24}}));
    REQUIRE(Env::get().maps().bind(leaf.id, h));
    CHECK(unix_connect(dir + "/sub/../app.sock2", SOCK_STREAM) == 0);  // control: the path reaches a socket
    auto* res = shared<int>(11);
    CHECK(run_in(leaf.path, [&] {
              res[0] = unix_connect(allowed.addr, SOCK_STREAM);
              res[1] = unix_connect(other.addr, SOCK_STREAM);            // same dir, other socket
              res[2] = unix_connect(below.addr, SOCK_STREAM);            // below the /sub/ rule
              res[3] = unix_connect(dir + "/./app.sock", SOCK_STREAM);   // same inode, other spelling
              res[4] = unix_connect(ab.addr, SOCK_STREAM);
              res[5] = unix_connect(ab_longer.addr, SOCK_STREAM);
              res[6] = unix_connect(ab_nul, SOCK_STREAM);
              res[7] = unix_sendto(dgram.addr);                          // send allowed
              res[8] = unix_connect(dgram.addr, SOCK_DGRAM);             // connect is not
              res[9] = unix_connect(dir + "/sub", SOCK_STREAM);          // the directory itself: no
              res[10] = unix_connect(dir + "/sub/../app.sock2", SOCK_STREAM);  // climbing out of /sub/
              return 0;
          }) == 0);
    CHECK(res[0] == 0);
    CHECK(res[1] == EPERM);
    CHECK(res[2] == 0);
    CHECK(res[3] == EPERM);
    CHECK(res[4] == 0);
    CHECK(res[5] == EPERM);
    CHECK(res[6] == EPERM);
    CHECK(res[7] == 0);
    CHECK(res[8] == EPERM);
    CHECK(res[9] == EPERM);
    CHECK(res[10] == EPERM);
    auto ev = Env::get().events_of(leaf.id);
    REQUIRE(ev.size() == 7);
    CHECK(bulwark::audit::render_object(ev[6]) == "unix stream " + dir + "/sub/../app.sock2");
    CHECK(bulwark::audit::render_object(ev[0]) == "unix stream " + other.addr);
    CHECK(bulwark::audit::render_object(ev[3]) == "unix stream " + ab_nul.substr(0, ab_nul.size() - 1) + "\\x00");
    for (uint32_t rule : {21u, 22u, 23u, 24u}) {
        auto hits = Env::get().maps().rule_hits(h.slot, rule);
        REQUIRE(hits);
        CHECK(*hits == 1);
    }
    REQUIRE(Env::get().maps().free(h.slot));
    std::filesystem::remove_all(dir);
}

TEST_CASE("unix: audit mode records the would-be refusal and lets the connect through") {
    if (!unix_programs_enforcing()) return;
    const std::string dir = dir_for("audit");
    UnixServer st(dir + "/a.sock", SOCK_STREAM);
    REQUIRE(st.ok);
    Leaf leaf("unix-audit");
    auto t = unix_policy({});
    t.header.mode = BW_MODE_AUDIT;
    auto h = load(t);
    REQUIRE(Env::get().maps().bind(leaf.id, h));
    auto* res = shared<int>(1);
    run_in(leaf.path, [&] {
        res[0] = unix_connect(st.addr, SOCK_STREAM);
        return 0;
    });
    CHECK(res[0] == 0);
    auto ev = Env::get().events_of(leaf.id);
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].decision == BW_DECISION_AUDIT);
    CHECK(ev[0].layer == BW_LAYER_SOCK_UNIX);
    REQUIRE(Env::get().maps().free(h.slot));
    std::filesystem::remove_all(dir);
}
