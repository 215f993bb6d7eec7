#pragma once
// Hand-built bundles for the evaluator, instantiate and grants tests (until
// the compiler is on main, tests construct Bundles directly).
#include <sys/socket.h>

#include <random>
#include <string>

#include "bulwark/policy/bpf_tables.h"
#include "bulwark/policy/bundle.h"
#include "bulwark/policy/evaluator.h"
#include "bulwark/policy/match.h"

namespace bulwark::test {

using namespace bulwark::policy;

struct BundleBuilder {
    Bundle b;
    std::string file = "rules/t.yaml";
    uint32_t line = 1;

    BundleBuilder() { b.tool = "t"; }

    uint32_t rule(std::string section, std::string text) {
        RuleRef r;
        r.id = static_cast<uint32_t>(b.rules.size());
        r.loc = {file, line++, 5};
        r.text = std::move(text);
        r.section = std::move(section);
        b.rules.push_back(r);
        return r.id;
    }
    BundleBuilder& allow(std::string path, uint32_t rights, std::string section = "files") {
        std::string text = section == "exec" ? "exec.allow: " + path
                                             : "files." + format_rights(rights) + ": " + path;
        uint32_t id = rule(section, text);
        b.files.push_back({std::move(path), rights, 0, id});
        return *this;
    }
    BundleBuilder& deny(std::string path, uint32_t rights = BW_FS_ALL) {
        uint32_t id = rule("files", "files.deny: " + path);
        b.files.push_back({std::move(path), 0, rights, id});
        return *this;
    }
    BundleBuilder& net(NetMode m) {
        b.network.mode = m;
        return *this;
    }
    BundleBuilder& net_rule(std::string cidr, uint16_t lo, uint16_t hi,
                            uint8_t ops = BW_NET_CONNECT, uint8_t action = BW_NET_ACTION_ALLOW,
                            uint8_t protos = BW_PROTO_TCP | BW_PROTO_UDP) {
        b.network.mode = NetMode::Rules;
        NetRule r;
        auto c = parse_cidr(cidr);
        if (!c) throw std::runtime_error(c.error());
        r.addr = c->addr;
        r.prefix = c->prefix;
        r.port_lo = lo;
        r.port_hi = hi;
        r.op_mask = ops;
        r.action = action;
        r.proto_mask = protos;
        r.rule_id = rule("network", std::string("network.") +
                                        (action == BW_NET_ACTION_DENY ? "deny" : "connect") + ": " + cidr);
        b.network.rules.push_back(r);
        return *this;
    }
    BundleBuilder& host_rule(std::string host, uint16_t port, uint8_t action = BW_NET_ACTION_ALLOW) {
        b.network.mode = NetMode::Rules;
        NetRule r;
        r.host = host;
        r.port_lo = r.port_hi = port;
        r.action = action;
        r.rule_id = rule("network", "network.connect: " + host);
        b.network.rules.push_back(r);
        return *this;
    }
    BundleBuilder& families(std::initializer_list<int> fams) {
        for (int f : fams) b.network.af_allow |= 1ull << f;
        return *this;
    }
    BundleBuilder& types(std::initializer_list<int> ts) {
        for (int t : ts) b.network.sock_type_allow |= 1u << t;
        return *this;
    }
    BundleBuilder& audit() {
        b.mode = Mode::Audit;
        return *this;
    }
    Bundle build() {
        Bundle out = b;
        auto r = rebuild_bpf_tables(out);
        if (!r) throw std::runtime_error(r.error());
        return out;
    }
};

inline Operation open_op(std::string path, FileAccess a = FileAccess::Read) {
    Operation op;
    op.kind = OpKind::Open;
    op.path = std::move(path);
    op.access = a;
    return op;
}

inline Operation file_op(OpKind k, std::string path) {
    Operation op;
    op.kind = k;
    op.path = std::move(path);
    return op;
}

inline Operation net_op(OpKind k, std::string addr, uint16_t port, uint8_t proto = BW_PROTO_TCP) {
    Operation op;
    op.kind = k;
    auto a = parse_ip(addr);
    if (!a) throw std::runtime_error("bad address " + addr);
    op.addr = *a;
    op.port = port;
    op.proto = proto;
    return op;
}

inline Operation socket_op(uint32_t family, uint32_t type) {
    Operation op;
    op.kind = OpKind::Socket;
    op.family = family;
    op.type = type;
    return op;
}

// ---- random bundles and operations over a small universe, so that rules
// and operations collide often.
struct RandomPolicy {
    std::mt19937_64 rng;
    explicit RandomPolicy(uint64_t seed) : rng(seed) {}

    size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }
    bool coin(int percent) { return static_cast<int>(pick(100)) < percent; }

    static constexpr const char* kComps[] = {"a", "b", "c", "ab"};
    std::string path(size_t max_depth = 4) {
        size_t depth = pick(max_depth + 1);
        if (depth == 0) return "/";
        std::string p;
        for (size_t i = 0; i < depth; ++i) p += std::string("/") + kComps[pick(4)];
        return p;
    }
    uint32_t rights() { return static_cast<uint32_t>(pick(BW_FS_ALL) + 1); }

    static constexpr const char* kNets[] = {"10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "10.1.2.3/32",
                                            "0.0.0.0/0",  "::/0",        "2001:db8::/32",
                                            "2001:db8::1/128", "127.0.0.0/8", "192.168.0.0/16"};
    static constexpr const char* kAddrs[] = {"10.1.2.3", "10.1.2.4", "10.9.9.9", "192.168.1.1",
                                             "8.8.8.8",  "2001:db8::1", "2001:db8::2", "::1",
                                             "127.0.0.1", "fe80::1"};
    static constexpr uint16_t kPorts[] = {22, 53, 80, 443, 8080};

    std::pair<uint16_t, uint16_t> port_range() {
        switch (pick(4)) {
            case 0: return {0, 65535};
            case 1: { uint16_t p = kPorts[pick(5)]; return {p, p}; }
            case 2: return {50, 500};
            default: return {443, 8080};
        }
    }

    Bundle bundle(size_t max_files = 6, size_t max_net = 6) {
        BundleBuilder bb;
        size_t nf = pick(max_files + 1);
        for (size_t i = 0; i < nf; ++i) {
            if (coin(25)) bb.deny(path(), rights());
            else bb.allow(path(), rights(), coin(15) ? "exec" : "files");
        }
        // exec-section rules carry exec only
        for (auto& f : bb.b.files)
            if (bb.b.rule(f.rule_id) && bb.b.rule(f.rule_id)->section == "exec") f.allow = BW_FS_EXEC;
        switch (pick(4)) {
            case 0: bb.net(NetMode::None); break;
            case 1: bb.net(NetMode::Loopback); break;
            default: {
                bb.net(NetMode::Rules);
                size_t nn = pick(max_net + 1);
                for (size_t i = 0; i < nn; ++i) {
                    auto [lo, hi] = port_range();
                    uint8_t ops = static_cast<uint8_t>(pick(7) + 1);
                    uint8_t protos = static_cast<uint8_t>(pick(3) + 1);
                    bb.net_rule(kNets[pick(10)], lo, hi, ops,
                                coin(30) ? BW_NET_ACTION_DENY : BW_NET_ACTION_ALLOW, protos);
                }
            }
        }
        for (int f : {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_PACKET})
            if (coin(50)) bb.b.network.af_allow |= 1ull << f;
        for (int t : {SOCK_STREAM, SOCK_DGRAM, SOCK_RAW})
            if (coin(50)) bb.b.network.sock_type_allow |= 1u << t;
        if (coin(20)) bb.audit();
        return bb.build();
    }

    Operation op() {
        Operation o;
        switch (pick(9)) {
            case 0: return open_op(path(5), FileAccess::Read);
            case 1: return open_op(path(5), FileAccess::Write);
            case 2: return file_op(OpKind::Create, path(5));
            case 3: return file_op(OpKind::Remove, path(5));
            case 4: return file_op(OpKind::Exec, path(5));
            case 5: return net_op(OpKind::Connect, kAddrs[pick(10)], kPorts[pick(5)],
                                  coin(50) ? BW_PROTO_TCP : BW_PROTO_UDP);
            case 6: return net_op(OpKind::Bind, kAddrs[pick(10)], kPorts[pick(5)],
                                  coin(50) ? BW_PROTO_TCP : BW_PROTO_UDP);
            case 7: return net_op(OpKind::Send, kAddrs[pick(10)], kPorts[pick(5)], BW_PROTO_UDP);
            default: {
                static constexpr int fams[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_PACKET};
                static constexpr int types[] = {SOCK_STREAM, SOCK_DGRAM, SOCK_RAW};
                return socket_op(fams[pick(5)], types[pick(3)] | (coin(30) ? SOCK_CLOEXEC : 0));
            }
        }
        return o;
    }
};

}  // namespace bulwark::test
