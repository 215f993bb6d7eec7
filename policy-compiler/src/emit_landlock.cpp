// LandlockPlan: our rights mapped to LANDLOCK_ACCESS_FS_*, TCP port rules
// where the network rules are expressible by port, and the gaps: what the
// policy asks that Landlock cannot express (enforced by other layers only).
#include <map>
#include <set>
#include <unordered_map>

#include "bulwark/policy/bpf_tables.h"
#include "bulwark/policy/landlock_abi.h"
#include "passes.h"

namespace bulwark::policy {

uint64_t landlock_fs_access(uint32_t rights) {
    uint64_t a = 0;
    if (rights & BW_FS_READ) a |= LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
    if (rights & BW_FS_WRITE) a |= LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE;
    // create makes files, directories, symlinks and fifos; a socket file only
    // where a network.unix.bind rule names it (emit_fs): a bind is a right of its own
    if (rights & BW_FS_CREATE)
        a |= LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_SYM |
             LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_REFER;
    if (rights & BW_FS_REMOVE)
        a |= LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REFER;
    if (rights & BW_FS_EXEC) a |= LANDLOCK_ACCESS_FS_EXECUTE;
    return a;
}

namespace {

// Everything we handle once files: is present; MAKE_CHAR/MAKE_BLOCK are
// handled and never granted (no device nodes).
constexpr uint64_t kHandledFs = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |
                                LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
                                LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |
                                LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |
                                LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
                                LANDLOCK_ACCESS_FS_MAKE_SYM | LANDLOCK_ACCESS_FS_REFER |
                                LANDLOCK_ACCESS_FS_TRUNCATE;
constexpr size_t kMaxPortRules = 1024;

void emit_fs(CompileContext& ctx) {
    auto& ll = ctx.bundle.landlock;
    if (ctx.ast.files.present) ll.handled_fs = kHandledFs;
    else if (ctx.ast.exec.present) ll.handled_fs = LANDLOCK_ACCESS_FS_EXECUTE;
    else return;
    const auto& entries = ctx.bundle.bpf.files;
    std::unordered_map<std::string_view, const BpfFileEntry*> by_path;
    for (const auto& e : entries) by_path.emplace(e.path, &e);
    for (const auto& e : entries) {
        // Denies on the path itself or above it subtract; Landlock grants are
        // unions over ancestors, so the subtracted set is what we grant here.
        uint32_t denied = 0;
        for_each_ancestor(e.path, [&](std::string_view a) {
            if (auto it = by_path.find(a); it != by_path.end()) denied |= it->second->value.deny;
        });
        uint32_t effective = e.value.allow & ~denied;
        uint64_t access = landlock_fs_access(effective) & ll.handled_fs;
        if (access) ll.paths.push_back(LandlockPathRule{e.path, access, e.value.allow_rule_id});
        // A deny strictly below an allow of the same right cannot be expressed.
        if (!e.value.deny) continue;
        for_each_ancestor(e.path, [&](std::string_view a) {
            if (a == e.path) return;
            auto it = by_path.find(a);
            if (it == by_path.end()) return;
            uint32_t overlap = it->second->value.allow & e.value.deny;
            if (!overlap) return;
            std::string gap = ctx.describe(e.value.deny_rule_id) + " denies " + rights_to_string(overlap) +
                              " below " + ctx.describe(it->second->value.allow_rule_id) +
                              "; Landlock cannot take rights away below an allowed directory, so the BPF LSM and "
                              "agentd's mount masks enforce this deny";
            ctx.note(ctx.span_of(e.value.deny_rule_id), "landlock-gap",
                     "Landlock cannot enforce this deny: " + ctx.describe(it->second->value.allow_rule_id) +
                         " allows " + rights_to_string(overlap) + " above it",
                     {"the BPF LSM holds it where the kernel loads it; elsewhere agentd masks the path in the "
                      "tool's mount namespace at launch (docs/rule-language.md)"});
            ll.gaps.push_back(std::move(gap));
        });
    }
    // network.unix.bind: make_sock on the directory a pathname bind rule names
    // ("/run/app/") or the one holding its socket ("/run/app/ctl.sock": Landlock
    // cannot tell names in a directory apart, the BPF LSM does). The sandbox's
    // private /tmp has it already (agentd/sandbox/landlock.cpp).
    for (const auto& u : ctx.bundle.network.unix_rules) {
        if (!(u.op_mask & BW_NET_BIND) || u.address.starts_with("@") || unix_bind_in_private_tmp(u.address)) continue;
        std::string dir = u.address.substr(0, u.address.rfind('/'));
        ll.paths.push_back(LandlockPathRule{dir.empty() ? "/" : dir, LANDLOCK_ACCESS_FS_MAKE_SOCK, u.rule_id});
        if (!u.address.ends_with("/"))
            ll.gaps.push_back(ctx.describe(u.rule_id) + ": Landlock lets the tool bind any socket in " + ll.paths.back().path +
                              "; the BPF LSM holds the one name");
    }
}

std::string list_rules(CompileContext& ctx, const std::vector<uint32_t>& ids) {
    std::string s;
    for (size_t i = 0; i < ids.size() && i < 3; ++i) s += (i ? ", " : "") + ctx.describe(ids[i]);
    if (ids.size() > 3) s += " and " + std::to_string(ids.size() - 3) + " more";
    return s;
}

void emit_net(CompileContext& ctx) {
    auto& ll = ctx.bundle.landlock;
    const auto& net = ctx.bundle.network;
    ll.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
    // Landlock's abstract scope refuses every abstract name outside the tool's
    // domain: with it an allowed @name could never be reached. Without it the
    // cgroup unix programs alone refuse the other abstract names.
    for (const auto& u : net.unix_rules)
        if (u.address.starts_with("@")) {
            ll.scoped &= ~uint64_t(LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET);
            ll.gaps.push_back("abstract unix scope not applied: " + ctx.describe(u.rule_id) +
                              " allows an abstract name; the cgroup unix programs (Linux 6.7+) alone refuse the others");
            break;
        }
    if (net.mode == NetMode::None) {
        ll.handled_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
        return;
    }
    if (net.mode == NetMode::Loopback) {
        ll.gaps.push_back("network: loopback: Landlock cannot restrict addresses; the network namespace and the "
                          "cgroup sock_addr programs enforce it");
        return;
    }
    struct OpPlan {
        uint64_t access;
        uint8_t op;
        const char* name;
        std::map<uint16_t, uint32_t> ports;  // port -> first rule
        std::vector<uint32_t> unbounded;     // rules allowing every port
        bool too_many = false;
    };
    OpPlan plans[] = {{LANDLOCK_ACCESS_NET_CONNECT_TCP, BW_NET_CONNECT, "connect", {}, {}},
                      {LANDLOCK_ACCESS_NET_BIND_TCP, BW_NET_BIND, "bind", {}, {}}};
    std::vector<uint32_t> addr_limited, udp, denies;
    std::set<uint32_t> seen_addr, seen_udp, seen_deny;
    for (const auto& r : net.rules) {
        if (r.action == BW_NET_ACTION_DENY) {
            if (seen_deny.insert(r.rule_id).second) denies.push_back(r.rule_id);
            continue;
        }
        if ((r.proto_mask & BW_PROTO_UDP) && seen_udp.insert(r.rule_id).second) udp.push_back(r.rule_id);
        if (!(r.proto_mask & BW_PROTO_TCP)) continue;
        bool any_addr = !r.host && r.prefix == 0;
        if (!any_addr && seen_addr.insert(r.rule_id).second) addr_limited.push_back(r.rule_id);
        for (auto& p : plans) {
            if (!(r.op_mask & p.op) || p.too_many) continue;
            if (r.port_lo == 0 && r.port_hi == 65535) {
                p.unbounded.push_back(r.rule_id);
                continue;
            }
            if (size_t(r.port_hi - r.port_lo) + 1 + p.ports.size() > kMaxPortRules) {
                p.too_many = true;
                continue;
            }
            for (uint32_t port = r.port_lo; port <= r.port_hi; ++port) p.ports.emplace(uint16_t(port), r.rule_id);
        }
    }
    std::map<uint16_t, LandlockPortRule> port_rules;
    for (auto& p : plans) {
        if (!p.unbounded.empty()) {
            ll.gaps.push_back(std::string("TCP ") + p.name + " is not restricted by Landlock: " +
                              list_rules(ctx, p.unbounded) + " allow every port");
            continue;
        }
        if (p.too_many) {
            ll.gaps.push_back(std::string("TCP ") + p.name + " is not restricted by Landlock: the rules allow more than " +
                              std::to_string(kMaxPortRules) + " distinct ports");
            continue;
        }
        ll.handled_net |= p.access;
        for (const auto& [port, rule] : p.ports) {
            auto [it, fresh] = port_rules.emplace(port, LandlockPortRule{port, 0, rule});
            it->second.access |= p.access;
        }
    }
    for (auto& [_, pr] : port_rules) ll.ports.push_back(pr);
    if (!addr_limited.empty())
        ll.gaps.push_back("Landlock checks only the TCP port of " + list_rules(ctx, addr_limited) +
                          "; the address is enforced by the cgroup sock_addr programs");
    if (!udp.empty())
        ll.gaps.push_back("Landlock does not cover UDP: " + list_rules(ctx, udp) +
                          " are enforced by the cgroup sock_addr programs only");
    if (!denies.empty())
        ll.gaps.push_back("Landlock cannot deny by address: " + list_rules(ctx, denies) +
                          " are enforced by the cgroup sock_addr programs only");
}

void run_emit_landlock(CompileContext& ctx) {
    emit_fs(ctx);
    emit_net(ctx);
}

}  // namespace

Pass emit_landlock_pass() { return {"emit-landlock", run_emit_landlock, true}; }

}  // namespace bulwark::policy
