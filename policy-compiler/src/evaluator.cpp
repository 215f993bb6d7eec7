#include "bulwark/policy/evaluator.h"

#include <seccomp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <span>

#include "bulwark/policy/bpf_tables.h"
#include "bulwark/policy/cbpf.h"
#include "bulwark/policy/seccomp.h"

namespace bulwark::policy {

namespace {

// ---------------------------------------------------------------- naming

struct Named {
    std::string_view name;
    uint32_t value;
};

constexpr Named kFamilies[] = {
    {"unix", AF_UNIX},       {"local", AF_UNIX},     {"inet", AF_INET},
    {"inet6", AF_INET6},     {"netlink", AF_NETLINK}, {"packet", AF_PACKET},
    {"ax25", AF_AX25},       {"ipx", AF_IPX},        {"appletalk", AF_APPLETALK},
    {"x25", AF_X25},         {"key", AF_KEY},        {"rds", AF_RDS},
    {"can", AF_CAN},         {"tipc", AF_TIPC},      {"bluetooth", AF_BLUETOOTH},
    {"alg", AF_ALG},         {"vsock", AF_VSOCK},    {"xdp", AF_XDP},
    {"llc", AF_LLC},         {"ib", AF_IB},          {"mpls", AF_MPLS},
    {"nfc", AF_NFC},         {"qipcrtr", AF_QIPCRTR}, {"smc", AF_SMC},
};

constexpr Named kSockTypes[] = {
    {"stream", SOCK_STREAM}, {"dgram", SOCK_DGRAM},         {"raw", SOCK_RAW},
    {"rdm", SOCK_RDM},       {"seqpacket", SOCK_SEQPACKET}, {"dccp", SOCK_DCCP},
    {"packet", SOCK_PACKET},
};

std::string family_name(uint32_t f) {
    for (const auto& n : kFamilies)
        if (n.value == f && n.name != "local") return std::string(n.name);
    return "family " + std::to_string(f);
}

std::string type_name(uint32_t t) {
    for (const auto& n : kSockTypes)
        if (n.value == t) return std::string(n.name);
    return "type " + std::to_string(t);
}

std::string proto_name(uint8_t p) { return p == BW_PROTO_UDP ? "udp" : p == BW_PROTO_TCP ? "tcp" : "proto?"; }

uint8_t net_op_bit(OpKind k) {
    switch (k) {
        case OpKind::Connect: return BW_NET_CONNECT;
        case OpKind::Bind: return BW_NET_BIND;
        case OpKind::Send: return BW_NET_SEND;
        default: return 0;
    }
}

std::string_view net_op_word(OpKind k) {
    switch (k) {
        case OpKind::Connect: return "connect";
        case OpKind::Bind: return "bind";
        case OpKind::Send: return "send";
        default: return "?";
    }
}

std::string endpoint(const Operation& op) {
    std::string a = format_addr(op.addr);
    if (!is_v4_mapped(op.addr)) a = "[" + a + "]";
    return a + ":" + std::to_string(op.port) + "/" + proto_name(op.proto);
}

Decision make(Verdict v, uint16_t layer, uint32_t rule, std::string text) {
    return Decision{v, layer, rule, std::move(text), rule};
}

Decision apply_mode(bool audit, Decision d) {
    if (audit && d.verdict == Verdict::Deny) {
        d.verdict = Verdict::Audit;
        d.explanation = "audit mode, allowed but recorded: would be " + d.explanation;
    }
    return d;
}

// ---------------------------------------------------------------- files

// What covers the path, seen either from the rules or from the map entries.
// rule ids are attributed as the kernel does: the deepest covering entry that
// carries the bit decides, and reports its allow_rule_id / deny_rule_id (the
// first rule on that exact path contributing allow / deny bits). The
// *_exact ids name the rule that carries the bit itself, for explanations.
struct FileView {
    uint32_t allow = 0, deny = 0;          // unions over covering entries
    uint32_t allow_rule = BW_NO_RULE, deny_rule = BW_NO_RULE;
    uint32_t allow_exact = BW_NO_RULE, deny_exact = BW_NO_RULE;
    std::string allow_path, deny_path;
    long allow_depth = -1, deny_depth = -1;
};

void consider(FileView& v, uint32_t right, const std::string& path, uint32_t allow, uint32_t deny,
              uint32_t allow_rule, uint32_t deny_rule, uint32_t allow_exact, uint32_t deny_exact) {
    long d = static_cast<long>(path_depth(path));
    v.allow |= allow;
    v.deny |= deny;
    if ((allow & right) && d > v.allow_depth) {
        v.allow_rule = allow_rule;
        v.allow_exact = allow_exact;
        v.allow_path = path;
        v.allow_depth = d;
    }
    if ((deny & right) && d > v.deny_depth) {
        v.deny_rule = deny_rule;
        v.deny_exact = deny_exact;
        v.deny_path = path;
        v.deny_depth = d;
    }
}

std::string op_phrase(const Operation& op, uint32_t right) {
    return format_rights(right) + " on " + op.path;
}

// Suggests what would make a default-denied file operation legal.
std::string file_hint(const Bundle& b, const std::string& path, uint32_t right, const FileView& v) {
    std::string out;
    if (v.allow) {
        out += "; rules covering it grant only " + format_rights(v.allow);
        bool first = true;
        for (const auto& f : b.files) {
            if (!f.allow || !path_covers(f.path, path)) continue;
            out += first ? " (" : ", ";
            out += describe_rule(b, f.rule_id);
            first = false;
        }
        if (!first) out += ")";
    }
    std::string section = right == BW_FS_EXEC ? "exec.allow" : "files." + format_rights(right);
    out += "; a grant that would allow it: " + section + " on a path covering " + path;
    return out;
}

Decision decide_file(const Bundle& b, const Operation& op, const FileView& v,
                     const std::string& path, uint32_t right, bool enforced) {
    const uint16_t L = BW_LAYER_BPF_LSM;
    if (v.deny & right) {
        Decision d = make(Verdict::Deny, L, v.deny_rule,
                          "denied: " + op_phrase(op, right) + " is denied by " +
                              describe_rule(b, v.deny_exact) + " (covers " + v.deny_path +
                              "); deny rules override every allow and no grant can lift them");
        d.right_rule_id = v.deny_exact;
        return d;
    }
    if (v.allow & right) {
        Decision d = make(Verdict::Allow, L, v.allow_rule,
                          "allowed: " + op_phrase(op, right) + " by " + describe_rule(b, v.allow_exact) +
                              " (covers " + v.allow_path + ")");
        d.right_rule_id = v.allow_exact;
        return d;
    }
    if (!enforced) {
        return make(Verdict::Allow, L, BW_NO_RULE,
                    "allowed: " + op_phrase(op, right) +
                        (right == BW_FS_EXEC ? " (the policy has no exec allow-list or files rules)"
                                             : " (the policy has no files rules)"));
    }
    std::string why = right == BW_FS_EXEC
                          ? "; exec of anything not allowed is denied"
                          : "; once files rules exist everything they do not cover is denied";
    return make(Verdict::Deny, L, BW_NO_RULE,
                "denied: no rule allows " + op_phrase(op, right) + why +
                    file_hint(b, path, right, v));
}

Decision eval_file(const Bundle& b, const Operation& op, bool tables) {
    uint32_t right = required_right(op);
    auto path = resolve_operation_path(op.path);
    bool audit = tables ? b.bpf.header.mode == BW_MODE_AUDIT : b.mode == Mode::Audit;
    if (!path)
        return apply_mode(audit, make(Verdict::Deny, BW_LAYER_BPF_LSM, BW_NO_RULE,
                                      "denied: " + path.error()));
    Operation shown = op;
    shown.path = *path;
    FileView v;
    bool enforced;
    if (!tables) {
        // Rules on one path form one map entry: find the entry's attribution
        // (first rule with allow / deny bits) and the exact rule for the right.
        auto first_at = [&](const std::string& at, auto pred) {
            for (const auto& g : b.files)
                if (g.path == at && pred(g)) return g.rule_id;
            return BW_NO_RULE;
        };
        for (const auto& f : b.files) {
            if (!path_covers(f.path, *path)) continue;
            uint32_t ar = first_at(f.path, [](const FileRule& g) { return g.allow != 0; });
            uint32_t dr = first_at(f.path, [](const FileRule& g) { return g.deny != 0; });
            uint32_t ae = first_at(f.path, [&](const FileRule& g) { return (g.allow & right) != 0; });
            uint32_t de = first_at(f.path, [&](const FileRule& g) { return (g.deny & right) != 0; });
            consider(v, right, f.path, f.allow, f.deny, ar, dr, ae, de);
        }
        enforced = (unrestricted_file_rights(b) & right) == 0;
    } else {
        for (const auto& e : b.bpf.files)
            if (path_covers(e.path, *path))
                consider(v, right, e.path, e.value.allow, e.value.deny, e.value.allow_rule_id,
                         e.value.deny_rule_id, e.value.allow_rule_id, e.value.deny_rule_id);
        uint32_t flags = b.bpf.header.flags;
        enforced = right == BW_FS_EXEC
                       ? (flags & (BW_POL_FILES_ENFORCED | BW_POL_EXEC_ENFORCED)) != 0
                       : (flags & BW_POL_FILES_ENFORCED) != 0;
    }
    return apply_mode(audit, decide_file(b, shown, v, *path, right, enforced));
}

// Rights in force at a path (allows or unrestricted, minus denies) and the
// rule id the kernel attributes to the deepest entry granting any of `want`.
struct Effective {
    uint32_t rights = 0;
    uint32_t rule = BW_NO_RULE;
    std::string rule_path;
    uint32_t exact = BW_NO_RULE;
};

Effective effective_at(const Bundle& b, const std::string& path, uint32_t want) {
    FileView v;
    for (const auto& f : b.files) {
        if (!path_covers(f.path, path)) continue;
        uint32_t ar = BW_NO_RULE, ae = BW_NO_RULE;
        for (const auto& g : b.files) {
            if (g.path != f.path) continue;
            if (ar == BW_NO_RULE && g.allow) ar = g.rule_id;
            if (ae == BW_NO_RULE && (g.allow & want)) ae = g.rule_id;
        }
        consider(v, want, f.path, f.allow, f.deny, ar, BW_NO_RULE, ae, BW_NO_RULE);
    }
    return {(v.allow | unrestricted_file_rights(b)) & ~v.deny & BW_FS_ALL, v.allow_rule, v.allow_path, v.allow_exact};
}

// ---------------------------------------------------------------- network

struct NetMatch {
    uint32_t rule = BW_NO_RULE;
    int prefix = -1;
    bool found = false;
};

Decision decide_net_rules(const Bundle& b, const Operation& op, const NetMatch& deny,
                          const NetMatch& allow, std::string_view unresolved) {
    const uint16_t L = BW_LAYER_SOCK_ADDR;
    std::string what = std::string(net_op_word(op.kind)) + " to " + endpoint(op);
    if (op.kind == OpKind::Bind) what = "bind to " + endpoint(op);
    if (deny.found)
        return make(Verdict::Deny, L, deny.rule,
                    "denied: " + what + " is denied by " + describe_rule(b, deny.rule) +
                        "; network deny rules override every allow");
    if (allow.found)
        return make(Verdict::Allow, L, allow.rule,
                    "allowed: " + what + " by " + describe_rule(b, allow.rule));
    std::string text = "denied: no network rule allows " + what +
                       "; with a network mapping everything not allowed is denied; a grant that "
                       "would allow it: network." +
                       std::string(net_op_word(op.kind)) + " { cidr: " + format_addr(op.addr) +
                       (is_v4_mapped(op.addr) ? "/32" : "/128") + ", ports: [" +
                       std::to_string(op.port) + "], proto: " + proto_name(op.proto) + " }";
    if (!unresolved.empty())
        text += " (the bundle still has unresolved host rules: " + std::string(unresolved) +
                "; instantiate it first)";
    return make(Verdict::Deny, L, BW_NO_RULE, std::move(text));
}

Decision decide_net_mode(const Operation& op, NetMode mode) {
    const uint16_t L = BW_LAYER_SOCK_ADDR;
    std::string what = std::string(net_op_word(op.kind)) + " to " + endpoint(op);
    if (mode == NetMode::None)
        return make(Verdict::Deny, L, BW_NO_RULE,
                    "denied: " + what + ": the policy says network: none");
    if (is_loopback(op.addr))
        return make(Verdict::Allow, L, BW_NO_RULE,
                    "allowed: " + what + ": loopback under network: loopback");
    return make(Verdict::Deny, L, BW_NO_RULE,
                "denied: " + what +
                    ": the policy says network: loopback, only 127.0.0.0/8 and ::1 are reachable");
}

bool range_matches(uint16_t lo, uint16_t hi, uint8_t protos, uint8_t ops, const Operation& op) {
    return op.port >= lo && op.port <= hi && (protos & op.proto) && (ops & net_op_bit(op.kind));
}

// Connecting or sending to the wildcard address reaches the local host: it is
// judged as the loopback address of its family (0.0.0.0 and ::ffff:0.0.0.0 as
// 127.0.0.1, :: as ::1), as the BPF programs do (net.bpf.h
// bw_canonicalise), so a rule about 127.0.0.1 cannot be sidestepped through
// 0.0.0.0. A bind keeps the wildcard: it names every local address.
Operation canonical_destination(const Operation& op) {
    Operation out = op;
    if (op.kind == OpKind::Bind) return out;
    Addr16& a = out.addr;
    bool rest_zero = std::all_of(a.begin() + 12, a.end(), [](uint8_t x) { return x == 0; });
    if (is_v4_mapped(a) && rest_zero) {
        a[12] = 127, a[15] = 1;
    } else if (rest_zero && std::all_of(a.begin(), a.begin() + 12, [](uint8_t x) { return x == 0; })) {
        a[15] = 1;
    }
    return out;
}

Decision eval_net(const Bundle& b, const Operation& given, bool tables) {
    const Operation op = canonical_destination(given);
    if (!tables) {
        bool audit = b.mode == Mode::Audit;
        if (b.network.mode != NetMode::Rules) return apply_mode(audit, decide_net_mode(op, b.network.mode));
        // Attribution as the map entry orders its ranges (range_before, then
        // least specific prefix, then source order): the first match decides.
        NetMatch deny, allow;
        const NetRule* best_deny = nullptr;
        const NetRule* best_allow = nullptr;
        auto before = [](const NetRule& x, const NetRule& y) {
            bw_port_range a{}, c{};
            a.lo = x.port_lo, a.hi = x.port_hi, a.proto_mask = x.proto_mask, a.op_mask = x.op_mask;
            c.lo = y.port_lo, c.hi = y.port_hi, c.proto_mask = y.proto_mask, c.op_mask = y.op_mask;
            if (range_before(a, c)) return true;
            if (range_before(c, a)) return false;
            return x.prefix < y.prefix;
        };
        std::string unresolved;
        std::vector<NetRule> rules = effective_net_rules(b);
        for (const auto& r : rules) {
            if (r.host) {
                unresolved += (unresolved.empty() ? "" : ", ") + *r.host;
                continue;
            }
            if (!prefix_contains(r.addr, r.prefix, op.addr)) continue;
            if (!range_matches(r.port_lo, r.port_hi, r.proto_mask, r.op_mask, op)) continue;
            const NetRule*& best = r.action == BW_NET_ACTION_DENY ? best_deny : best_allow;
            if (!best || before(r, *best)) best = &r;
        }
        if (best_deny) deny = {best_deny->rule_id, best_deny->prefix, true};
        if (best_allow) allow = {best_allow->rule_id, best_allow->prefix, true};
        return apply_mode(audit, decide_net_rules(b, op, deny, allow, unresolved));
    }
    const bw_policy& h = b.bpf.header;
    bool audit = h.mode == BW_MODE_AUDIT;
    if (h.flags & BW_POL_NET_NONE) return apply_mode(audit, decide_net_mode(op, NetMode::None));
    if (h.flags & BW_POL_NET_LOOPBACK) return apply_mode(audit, decide_net_mode(op, NetMode::Loopback));
    if (!(h.flags & BW_POL_NET_RULES))
        return apply_mode(audit, make(Verdict::Deny, BW_LAYER_SOCK_ADDR, BW_NO_RULE,
                                      "denied: the policy header sets no network mode"));
    // LPM: the longest prefix containing the address decides alone.
    const BpfNetEntry* best = nullptr;
    for (const auto& e : b.bpf.net) {
        if (e.key.prefixlen < 32 || e.key.prefixlen > 32 + 128) continue;
        Addr16 a;
        std::memcpy(a.data(), e.key.addr, 16);
        uint8_t len = static_cast<uint8_t>(e.key.prefixlen - 32);
        if (!prefix_contains(a, len, op.addr)) continue;
        if (!best || e.key.prefixlen > best->key.prefixlen) best = &e;
    }
    NetMatch deny, allow;
    if (best) {
        uint32_t n = std::min<uint32_t>(best->value.count, BW_PORT_RANGES_MAX);
        for (uint32_t k = 0; k < n; ++k) {
            const bw_port_range& r = best->value.ranges[k];
            if (!range_matches(r.lo, r.hi, r.proto_mask, r.op_mask, op)) continue;
            NetMatch& m = r.action == BW_NET_ACTION_DENY ? deny : allow;
            if (!m.found) m = {r.rule_id, 0, true};
        }
    }
    return apply_mode(audit, decide_net_rules(b, op, deny, allow, {}));
}

// ---------------------------------------------------------------- unix sockets

// What the cgroup unix programs read from the address: a path up to its first
// NUL, or an abstract name. A path with a ".." component matches no rule.
bool has_dotdot(std::string_view p) {
    for (size_t i = 0; (i = p.find("/..", i)) != std::string_view::npos; ++i)
        if (i + 3 == p.size() || p[i + 3] == '/') return true;
    return false;
}

std::string unix_list(OpKind k) { return k == OpKind::Send ? "send" : k == OpKind::Bind ? "bind" : "connect"; }

std::string unix_grant_hint(const Operation& op) {
    std::string list = unix_list(op.kind);
    if (op.unix_addr.starts_with("@")) return "network.unix." + list + ": [\"" + op.unix_addr + "\"]";
    if (!op.unix_addr.starts_with("/"))
        return "none: the address is relative; a rule matches the absolute, normalised path the tool connects to";
    return "network.unix." + list + ": [" + op.unix_addr + "]";
}

Decision eval_unix(const Bundle& b, const Operation& op, bool tables) {
    // no cgroup hook sees a unix bind: the BPF LSM's socket_bind judges it
    const uint16_t L = op.kind == OpKind::Bind ? BW_LAYER_BPF_LSM : BW_LAYER_SOCK_UNIX;
    const uint32_t bit = op.kind == OpKind::Send ? BW_NET_SEND : op.kind == OpKind::Bind ? BW_NET_BIND : BW_NET_CONNECT;
    const bool audit = tables ? b.bpf.header.mode == BW_MODE_AUDIT : b.mode == Mode::Audit;
    std::string a = op.unix_addr;
    if (!a.starts_with("@")) a = a.substr(0, a.find('\0'));
    const std::string what = (op.kind == OpKind::Send   ? "send to unix socket "
                              : op.kind == OpKind::Bind ? "bind of unix socket "
                                                        : "connect to unix socket ") + a;
    uint32_t rule = BW_NO_RULE;
    bool allowed = false;
    const bool unmatchable = !a.starts_with("@") && has_dotdot(a);
    if (op.kind == OpKind::Bind && !unmatchable && unix_bind_in_private_tmp(a))
        return make(Verdict::Allow, L, BW_NO_RULE, "allowed: " + what + ": the sandbox's private /tmp is its own");
    if (!unmatchable && !tables) {
        size_t spec = 0;
        for (const auto& r : b.network.unix_rules) {
            if (!(r.op_mask & bit)) continue;
            bool covers = r.address == a || (r.address.ends_with("/") && !a.starts_with("@") && a.starts_with(r.address));
            if (!covers || r.address.size() <= spec) continue;
            spec = r.address.size();
            rule = r.rule_id;
            allowed = true;
        }
    } else if (!unmatchable && (b.bpf.header.flags & BW_POL_UNIX_RULES)) {
        // the longest entry whose key is a prefix of the address's key decides alone
        bw_unix_key want{};
        if (a.starts_with("@")) {
            size_t n = std::min<size_t>(a.size() - 1, BW_UNIX_NAME_MAX - 1);
            want.kind = BW_UNIX_ABSTRACT;
            want.name[0] = static_cast<uint8_t>(n);
            std::memcpy(want.name + 1, a.data() + 1, n);
        } else if (!a.empty()) {
            want.kind = BW_UNIX_PATH;
            std::memcpy(want.name, a.data(), std::min<size_t>(a.size(), BW_UNIX_NAME_MAX));
        }
        const BpfUnixEntry* best = nullptr;
        for (const auto& e : b.bpf.unix_sockets) {
            if (e.key.prefixlen < 40 || e.key.prefixlen > BW_UNIX_PREFIX_FULL || e.key.kind != want.kind) continue;
            uint32_t bits = e.key.prefixlen - 40, bytes = bits / 8;
            if (bits % 8 || std::memcmp(e.key.name, want.name, bytes) != 0) continue;
            if (!best || e.key.prefixlen > best->key.prefixlen) best = &e;
        }
        if (best && want.kind && (best->value.op_mask & bit)) {
            allowed = true;
            rule = bit == BW_NET_SEND   ? best->value.send_rule_id
                   : bit == BW_NET_BIND ? best->value.bind_rule_id
                                        : best->value.connect_rule_id;
        }
    }
    if (allowed) return make(Verdict::Allow, L, rule, "allowed: " + what + " by " + describe_rule(b, rule));
    std::string why = unmatchable               ? "a path with a \"..\" component matches no unix rule"
                      : op.kind == OpKind::Bind ? "no network.unix.bind rule allows it; a create right on the "
                                                  "directory is no bind right"
                                                : "no network.unix rule allows it; a file grant on the socket or its "
                                                  "directory is no connect right";
    return apply_mode(audit, make(Verdict::Deny, L, BW_NO_RULE,
                                  "denied: " + what + ": " + why + "; a grant that would allow it: " + unix_grant_hint(op)));
}

// ---------------------------------------------------------------- sockets

Decision eval_socket(const Bundle& b, const Operation& op, bool tables) {
    uint64_t af = tables ? b.bpf.header.af_allow : b.network.af_allow;
    uint32_t types = tables ? b.bpf.header.sock_type_allow : b.network.sock_type_allow;
    bool audit = tables ? b.bpf.header.mode == BW_MODE_AUDIT : b.mode == Mode::Audit;
    uint32_t type = op.type & 0xf;  // strip SOCK_NONBLOCK / SOCK_CLOEXEC
    const uint16_t L = BW_LAYER_SOCK_CREATE;
    std::string what = "socket(" + family_name(op.family) + ", " + type_name(type) + ")";
    if (op.family >= 64 || !((af >> op.family) & 1))
        return apply_mode(audit, make(Verdict::Deny, L, BW_NO_RULE,
                                      "denied: " + what + ": family " + family_name(op.family) +
                                          " is not in network.families; a grant that would allow "
                                          "it: network.families: [" +
                                          family_name(op.family) + "]"));
    if (type >= 32 || !((types >> type) & 1))
        return apply_mode(audit, make(Verdict::Deny, L, BW_NO_RULE,
                                      "denied: " + what + ": socket type " + type_name(type) +
                                          " is not allowed by the policy"));
    return make(Verdict::Allow, L, BW_NO_RULE, "allowed: " + what + " (family and type allowed)");
}

// ---------------------------------------------------------------- syscalls

std::string seccomp_action_text(uint32_t ret) {
    switch (seccomp_ret_action(ret)) {
        case SECCOMP_RET_KILL_PROCESS: return "kill (process)";
        case SECCOMP_RET_KILL_THREAD: return "kill";
        case SECCOMP_RET_TRAP: return "trap (SIGSYS)";
        case SECCOMP_RET_ERRNO: return "errno " + std::to_string(seccomp_ret_data(ret));
        case SECCOMP_RET_USER_NOTIF: return "user notification";
        case SECCOMP_RET_TRACE: return "trace";
        case SECCOMP_RET_LOG: return "log";
        case SECCOMP_RET_ALLOW: return "allow";
    }
    return "action " + std::to_string(ret);
}

bool is_deny_rule(const Bundle& b, uint32_t id) {
    const RuleRef* r = b.rule(id);
    return r && (r->text.starts_with("syscalls.deny") || r->text.starts_with("syscalls.on_violation"));
}

uint32_t syscall_rule(const Bundle& b, const std::string& name) {
    for (const auto& [n, id] : b.seccomp.syscall_rules)
        if (n == name) return id;
    return BW_NO_RULE;
}

// A bundle whose seccomp plan carries a program is decided by running it
// through the classic-BPF interpreter, as the kernel would.
Decision eval_syscall_program(const Bundle& b, const Operation& op) {
    bool audit = b.mode == Mode::Audit;
    const uint16_t L = BW_LAYER_SECCOMP;
    uint32_t arch = op.arch ? op.arch : seccomp_arch_native();
    int nr = seccomp_syscall_resolve_name_arch(arch, op.syscall.c_str());
    if (nr == __NR_SCMP_ERROR || nr < 0)
        return apply_mode(audit, make(Verdict::Deny, L, BW_NO_RULE,
                                      "denied: '" + op.syscall + "' is not a system call of this architecture"));
    seccomp_data d{};
    d.nr = nr;
    d.arch = arch;
    for (size_t i = 0; i < 6; ++i) d.args[i] = op.args[i];
    uint32_t ret = run_seccomp_filter(b.seccomp.program, d);
    uint32_t action = seccomp_ret_action(ret);
    uint32_t id = syscall_rule(b, op.syscall);
    // A compat ABI the rules do not accept (i386 through int $0x80): the
    // filter answers the violation action there, deny rules their own.
    const std::string_view abi = arch_name(arch);
    if (!abi.empty() && abi != "native" && !b.seccomp.arches.empty() &&
        std::ranges::find(b.seccomp.arches, arch) == b.seccomp.arches.end()) {
        const std::string what = "syscall " + op.syscall + " through the " + std::string(abi) + " ABI";
        if (action == SECCOMP_RET_ALLOW || action == SECCOMP_RET_LOG)
            return make(Verdict::Allow, L, BW_NO_RULE,
                        "allowed: " + what + ", which syscalls.architectures does not accept, by the violation "
                        "action (" + seccomp_action_text(ret) + ")");
        if (is_deny_rule(b, id))
            return apply_mode(audit, make(Verdict::Deny, L, id,
                                          "denied: " + what + " is denied by " + describe_rule(b, id) +
                                              ", the filter answers " + seccomp_action_text(ret) +
                                              "; deny rules hold on every ABI"));
        return apply_mode(audit, make(Verdict::Deny, L, BW_NO_RULE,
                                      "denied: " + what + ": syscalls.architectures does not accept " +
                                          std::string(abi) + ", so the filter answers every call of it " +
                                          seccomp_action_text(ret) + "; to judge such calls by the rules: "
                                          "syscalls: { architectures: [native, " + std::string(abi) + "] }"));
    }
    if (action == SECCOMP_RET_ALLOW || action == SECCOMP_RET_LOG) {
        if (is_deny_rule(b, id)) id = BW_NO_RULE;
        return make(Verdict::Allow, L, id,
                    "allowed: syscall " + op.syscall + " by " +
                        (id == BW_NO_RULE ? "the seccomp filter (baseline " + b.seccomp.baseline + ")"
                                          : describe_rule(b, id)));
    }
    if (is_deny_rule(b, id))
        return apply_mode(audit, make(Verdict::Deny, L, id,
                                      "denied: syscall " + op.syscall + " is denied by " + describe_rule(b, id) +
                                          ", the filter answers " + seccomp_action_text(ret) +
                                          "; syscall deny rules override allows and the baseline"));
    std::string why = id != BW_NO_RULE ? " (" + describe_rule(b, id) + " allows it only with other arguments)"
                                       : " (not in baseline " + b.seccomp.baseline + " or syscalls.allow)";
    return apply_mode(audit, make(Verdict::Deny, L, BW_NO_RULE,
                                  "denied: syscall " + op.syscall + " is not allowed" + why +
                                      ", the filter answers " + seccomp_action_text(ret) +
                                      "; a grant that would allow it: syscalls.allow: [" + op.syscall + "]"));
}

// A bundle without a compiled program (built by hand) is decided from
// SeccompPlan::syscall_rules and the default action; argument conditions
// cannot be evaluated that way.
Decision eval_syscall(const Bundle& b, const Operation& op) {
    if (!b.seccomp.program.empty()) return eval_syscall_program(b, op);
    bool audit = b.mode == Mode::Audit;
    const uint16_t L = BW_LAYER_SECCOMP;
    uint32_t id = syscall_rule(b, op.syscall);
    if (id != BW_NO_RULE && is_deny_rule(b, id))
        return apply_mode(audit, make(Verdict::Deny, L, id,
                                      "denied: syscall " + op.syscall + " is denied by " + describe_rule(b, id) +
                                          "; syscall deny rules override allows and the baseline"));
    if (id != BW_NO_RULE)
        return make(Verdict::Allow, L, id, "allowed: syscall " + op.syscall + " by " + describe_rule(b, id));
    SeccompAction d = b.seccomp.default_action;
    if (d == SeccompAction::Allow || d == SeccompAction::Log)
        return make(Verdict::Allow, L, BW_NO_RULE,
                    "allowed: syscall " + op.syscall + " by the filter's default action");
    std::string action = d == SeccompAction::Kill   ? "kill"
                         : d == SeccompAction::Trap ? "trap"
                                                    : "errno " + std::to_string(b.seccomp.default_errno);
    return apply_mode(audit, make(Verdict::Deny, L, BW_NO_RULE,
                                  "denied: syscall " + op.syscall + " is not allowed (baseline " +
                                      (b.seccomp.baseline.empty() ? "none" : b.seccomp.baseline) +
                                      "), the filter answers " + action +
                                      "; a grant that would allow it: syscalls.allow: [" + op.syscall + "]"));
}

Decision eval(const Bundle& b, const Operation& op, bool tables) {
    switch (op.kind) {
        case OpKind::Open:
        case OpKind::Create:
        case OpKind::Remove:
        case OpKind::Exec: return eval_file(b, op, tables);
        case OpKind::Connect:
        case OpKind::Bind:
        case OpKind::Send:
            if (!op.unix_addr.empty()) return eval_unix(b, op, tables);
            return eval_net(b, op, tables);
        case OpKind::Socket: return eval_socket(b, op, tables);
        case OpKind::Syscall: return eval_syscall(b, op);
    }
    return make(Verdict::Deny, BW_LAYER_NONE, BW_NO_RULE, "denied: unknown operation");
}

}  // namespace

uint32_t required_right(const Operation& op) {
    switch (op.kind) {
        case OpKind::Open: return op.access == FileAccess::Write ? BW_FS_WRITE : BW_FS_READ;
        case OpKind::Create: return BW_FS_CREATE;
        case OpKind::Remove: return BW_FS_REMOVE;
        case OpKind::Exec: return BW_FS_EXEC;
        default: return 0;
    }
}

Decision evaluate(const Bundle& bundle, const Operation& op) { return eval(bundle, op, false); }

Decision evaluate_move(const Bundle& b, const std::string& from, const std::string& to, bool rename) {
    const char* verb = rename ? "rename" : "link";
    auto src = resolve_operation_path(from);
    auto dst = resolve_operation_path(to);
    bool audit = b.mode == Mode::Audit;
    if (!src || !dst)
        return apply_mode(audit, make(Verdict::Deny, BW_LAYER_BPF_LSM, BW_NO_RULE,
                                      "denied: " + (!src ? src.error() : dst.error())));
    auto prefixed = [&](Decision d) {
        d.explanation = std::string(verb) + " " + *src + " -> " + *dst + ": " + d.explanation;
        return d;
    };
    Operation op;
    if (rename) {
        op.kind = OpKind::Remove;
        op.path = *src;
        Decision d = eval_file(b, op, false);
        if (d.verdict != Verdict::Allow) return prefixed(std::move(d));
    }
    op.kind = OpKind::Create;
    op.path = *dst;
    Decision created = eval_file(b, op, false);
    if (created.verdict != Verdict::Allow) return prefixed(std::move(created));
    constexpr uint32_t kContent = BW_FS_READ | BW_FS_WRITE | BW_FS_EXEC;
    uint32_t gain = effective_at(b, *dst, kContent).rights & ~effective_at(b, *src, kContent).rights & kContent;
    if (gain) {
        Effective g = effective_at(b, *dst, gain);
        return apply_mode(audit, make(Verdict::Deny, BW_LAYER_BPF_LSM, g.rule,
                                      "denied: " + std::string(verb) + " " + *src + " -> " + *dst +
                                          " would give the object " + format_rights(gain) + " it does not have at " +
                                          *src + " (granted there by " + describe_rule(b, g.exact) + ", covers " +
                                          g.rule_path + "); a move may not widen what a file can be used for"));
    }
    return prefixed(std::move(created));
}
Decision evaluate_tables(const Bundle& bundle, const Operation& op) { return eval(bundle, op, true); }

std::string_view to_string(Verdict v) {
    switch (v) {
        case Verdict::Allow: return "allow";
        case Verdict::Deny: return "deny";
        case Verdict::Audit: return "audit";
    }
    return "?";
}

std::string_view to_string(OpKind k) {
    switch (k) {
        case OpKind::Open: return "open";
        case OpKind::Create: return "create";
        case OpKind::Remove: return "remove";
        case OpKind::Exec: return "exec";
        case OpKind::Connect: return "connect";
        case OpKind::Bind: return "bind";
        case OpKind::Send: return "send";
        case OpKind::Socket: return "socket";
        case OpKind::Syscall: return "syscall";
    }
    return "?";
}

std::expected<OpKind, std::string> parse_op_kind(std::string_view s) {
    for (auto k : {OpKind::Open, OpKind::Create, OpKind::Remove, OpKind::Exec, OpKind::Connect,
                   OpKind::Bind, OpKind::Send, OpKind::Socket, OpKind::Syscall})
        if (to_string(k) == s) return k;
    return std::unexpected("unknown op '" + std::string(s) +
                           "' (open, create, remove, exec, connect, bind, send, socket, syscall)");
}

std::expected<uint32_t, std::string> parse_family(std::string_view s) {
    for (const auto& n : kFamilies)
        if (n.name == s) return n.value;
    return std::unexpected("unknown socket family '" + std::string(s) + "'");
}

std::expected<uint32_t, std::string> parse_sock_type(std::string_view s) {
    for (const auto& n : kSockTypes)
        if (n.name == s) return n.value;
    return std::unexpected("unknown socket type '" + std::string(s) + "'");
}

std::string format_rights(uint32_t rights) {
    static constexpr std::pair<uint32_t, std::string_view> names[] = {
        {BW_FS_READ, "read"}, {BW_FS_WRITE, "write"}, {BW_FS_CREATE, "create"},
        {BW_FS_REMOVE, "remove"}, {BW_FS_EXEC, "exec"}};
    std::string out;
    for (auto [bit, name] : names) {
        if (!(rights & bit)) continue;
        if (!out.empty()) out += '|';
        out += name;
    }
    return out.empty() ? "nothing" : out;
}

std::string describe_rule(const Bundle& bundle, uint32_t rule_id) {
    if (rule_id == BW_NO_RULE) return "the default";
    const RuleRef* r = bundle.rule(rule_id);
    if (!r) return "rule #" + std::to_string(rule_id);
    std::string out;
    if (!r->loc.file.empty())
        out = r->loc.text() + " ";
    return out + (r->text.empty() ? "rule #" + std::to_string(rule_id) : r->text);
}

}  // namespace bulwark::policy
