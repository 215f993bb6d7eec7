#include "bulwark/policy/bpf_tables.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "bulwark/policy/match.h"

namespace bulwark::policy {

namespace {

bool is_exec_section(const Bundle& b, uint32_t rule_id) {
    const RuleRef* r = b.rule(rule_id);
    return r && r->section == "exec";
}

Addr16 mask_addr(const Addr16& a, uint8_t prefix) {
    Addr16 out{};
    for (unsigned bit = 0; bit < prefix && bit < 128; ++bit)
        if (a[bit / 8] & (0x80 >> (bit % 8))) out[bit / 8] |= static_cast<uint8_t>(0x80 >> (bit % 8));
    return out;
}

uint32_t find_dns_rule(const Bundle& b) {
    for (const auto& r : b.network.rules)
        if (!r.host && r.prefix == 128 && r.port_lo == 53 && r.port_hi == 53 &&
            r.op_mask == (BW_NET_CONNECT | BW_NET_SEND) && b.rule(r.rule_id) &&
            b.rule(r.rule_id)->text.starts_with("network.dns"))
            return r.rule_id;
    for (const auto& r : b.rules)
        if (r.section == "network" && r.text.starts_with("network.dns")) return r.id;
    return BW_NO_RULE;
}

}  // namespace

std::expected<bw_unix_key, std::string> unix_rule_key(const std::string& address) {
    bw_unix_key k{};
    if (address.starts_with("@")) {
        const size_t n = address.size() - 1;
        if (n > BW_UNIX_NAME_MAX - 1)
            return std::unexpected("abstract name of " + std::to_string(n) + " bytes: sun_path holds " +
                                   std::to_string(BW_UNIX_NAME_MAX - 1) + " after its leading NUL");
        k.kind = BW_UNIX_ABSTRACT;
        k.name[0] = static_cast<uint8_t>(n);
        std::memcpy(k.name + 1, address.data() + 1, n);
        k.prefixlen = 32 + 8 + 8 * static_cast<uint32_t>(1 + n);
        return k;
    }
    if (!address.starts_with("/")) return std::unexpected("a unix socket path must be absolute (or @name for an abstract one)");
    if (address.size() > BW_UNIX_NAME_MAX)
        return std::unexpected("path of " + std::to_string(address.size()) + " bytes: sun_path holds " +
                               std::to_string(BW_UNIX_NAME_MAX));
    if (address.find('\0') != std::string::npos) return std::unexpected("NUL byte in a unix socket path");
    k.kind = BW_UNIX_PATH;
    std::memcpy(k.name, address.data(), address.size());
    const bool subtree = address.ends_with("/");
    k.prefixlen = 32 + 8 + 8 * static_cast<uint32_t>(address.size() + (subtree ? 0 : 1));
    return k;
}

bool range_before(const bw_port_range& a, const bw_port_range& b) {
    if (a.action != b.action) return a.action > b.action;  // deny first
    if (a.lo != b.lo) return a.lo < b.lo;
    if (a.hi != b.hi) return a.hi < b.hi;
    if (a.proto_mask != b.proto_mask) return a.proto_mask < b.proto_mask;
    return a.op_mask < b.op_mask;
}

bool same_range(const bw_port_range& a, const bw_port_range& b) {
    return a.action == b.action && a.lo == b.lo && a.hi == b.hi && a.proto_mask == b.proto_mask &&
           a.op_mask == b.op_mask;
}

uint32_t unrestricted_file_rights(const Bundle& b) {
    bool files = false, exec = false;
    for (const auto& f : b.files) {
        if (is_exec_section(b, f.rule_id))
            exec = true;
        else
            files = true;
    }
    if (files) return 0;
    if (exec) return BW_FS_ALL & ~BW_FS_EXEC;
    return BW_FS_ALL;
}

uint32_t file_policy_flags(const Bundle& b) {
    uint32_t flags = 0;
    for (const auto& f : b.files)
        flags |= is_exec_section(b, f.rule_id) ? BW_POL_EXEC_ENFORCED : BW_POL_FILES_ENFORCED;
    return flags;
}

bw_policy build_policy_header(const Bundle& b) {
    bw_policy h{};
    h.version = 0;
    h.mode = b.mode == Mode::Audit ? BW_MODE_AUDIT : BW_MODE_ENFORCE;
    h.flags = b.bpf.header.flags & (BW_POL_DENY_PTRACE | BW_POL_DENY_MOUNT | BW_POL_DENY_BPF |
                                    BW_POL_FILES_ENFORCED | BW_POL_EXEC_ENFORCED);
    h.flags |= file_policy_flags(b);
    // A profile learns from what the tool does, not only from what it was refused.
    if (b.profile.enabled) h.flags |= BW_POL_REPORT_ALLOW | BW_POL_TRACE_PROC | BW_POL_COUNT_USAGE;
    switch (b.network.mode) {
        case NetMode::None: h.flags |= BW_POL_NET_NONE; break;
        case NetMode::Loopback: h.flags |= BW_POL_NET_LOOPBACK; break;
        case NetMode::Rules: h.flags |= BW_POL_NET_RULES; break;
    }
    if (!b.network.unix_rules.empty()) h.flags |= BW_POL_UNIX_RULES;
    h.af_allow = b.network.af_allow;
    h.sock_type_allow = b.network.sock_type_allow;
    if (b.network.netlink_allow) {
        h.flags |= BW_POL_NETLINK_LIST;
        h.netlink_allow = *b.network.netlink_allow;
    }
    return h;
}

std::vector<BpfFileEntry> build_file_entries(const std::vector<FileRule>& files) {
    std::vector<BpfFileEntry> out;
    std::unordered_map<std::string_view, size_t> index;
    index.reserve(files.size());
    for (const auto& f : files) {
        auto [it, fresh] = index.emplace(f.path, out.size());
        if (fresh) {
            BpfFileEntry e;
            e.path = f.path;
            e.value.allow_rule_id = BW_NO_RULE;
            e.value.deny_rule_id = BW_NO_RULE;
            out.push_back(std::move(e));
        }
        auto& v = out[it->second].value;
        if (f.allow && v.allow_rule_id == BW_NO_RULE) v.allow_rule_id = f.rule_id;
        if (f.deny && v.deny_rule_id == BW_NO_RULE) v.deny_rule_id = f.rule_id;
        v.allow |= f.allow;
        v.deny |= f.deny;
    }
    return out;
}

std::expected<void, TableError> check_file_capacity(const std::vector<BpfFileEntry>& entries) {
    if (entries.size() <= BW_MAX_FILE_RULES) return {};
    return std::unexpected(TableError{"too-many-file-rules", "the policy needs " + std::to_string(entries.size()) +
                                          " file entries; the map holds " + std::to_string(BW_MAX_FILE_RULES),
                                      BW_NO_RULE, {}});
}

std::vector<NetRule> effective_net_rules(const Bundle& b) {
    std::vector<NetRule> rules = b.network.rules;
    if (b.network.mode != NetMode::Rules) return rules;
    uint32_t dns_rule = find_dns_rule(b);
    for (const auto& text : b.network.dns) {
        auto addr = parse_ip(text);
        if (!addr) continue;  // the compiler validated dns entries; a bad one adds nothing
        NetRule r;
        r.addr = *addr;
        r.prefix = 128;
        r.port_lo = r.port_hi = 53;
        r.proto_mask = BW_PROTO_TCP | BW_PROTO_UDP;
        r.op_mask = BW_NET_CONNECT | BW_NET_SEND;
        r.action = BW_NET_ACTION_ALLOW;
        r.rule_id = dns_rule;
        bool present = std::any_of(rules.begin(), rules.end(), [&](const NetRule& o) {
            return !o.host && o.addr == r.addr && o.prefix == 128 && o.port_lo == 53 &&
                   o.port_hi == 53 && o.proto_mask == r.proto_mask && o.op_mask == r.op_mask &&
                   o.action == r.action;
        });
        if (!present) rules.push_back(r);
    }
    return rules;
}

namespace {

struct PrefixKey {
    Addr16 addr;
    uint8_t len;
    bool operator==(const PrefixKey&) const = default;
};
struct PrefixHash {
    size_t operator()(const PrefixKey& k) const {
        size_t h = k.len;
        for (uint8_t b : k.addr) h = h * 131 + b;
        return h;
    }
};

}  // namespace

std::expected<std::vector<BpfNetEntry>, TableError> build_net_entries(const std::vector<NetRule>& rules) {
    // Distinct prefixes in first-seen order, each with its own ranges.
    std::vector<PrefixKey> prefixes;
    std::vector<std::vector<bw_port_range>> own;
    std::unordered_map<PrefixKey, size_t, PrefixHash> index;
    std::array<bool, 129> lengths{};
    for (const auto& r : rules) {
        if (r.host)
            return std::unexpected(TableError{"unresolved-host", "network rule " + std::to_string(r.rule_id) + " still names host '" +
                                                  *r.host + "': instantiate the bundle first",
                                              r.rule_id, {r.rule_id}});
        if (r.prefix > 128)
            return std::unexpected(TableError{"bad-prefix", "network rule " + std::to_string(r.rule_id) + " has prefix length " +
                                                  std::to_string(r.prefix) + " > 128",
                                              r.rule_id, {r.rule_id}});
        PrefixKey k{mask_addr(r.addr, r.prefix), r.prefix};
        auto [it, fresh] = index.emplace(k, prefixes.size());
        if (fresh) {
            prefixes.push_back(k);
            own.emplace_back();
        }
        lengths[r.prefix] = true;
        bw_port_range pr{};
        pr.lo = r.port_lo;
        pr.hi = r.port_hi;
        pr.proto_mask = r.proto_mask;
        pr.op_mask = r.op_mask;
        pr.action = r.action;
        pr.rule_id = r.rule_id;
        own[it->second].push_back(pr);
    }
    if (prefixes.size() > BW_MAX_NET_RULES)
        return std::unexpected(TableError{"too-many-net-rules", "the policy needs " + std::to_string(prefixes.size()) +
                                              " network prefixes; the map holds " + std::to_string(BW_MAX_NET_RULES),
                                          BW_NO_RULE, {}});
    // Entries ordered by prefix length, then address.
    std::vector<size_t> order(prefixes.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        if (prefixes[a].len != prefixes[b].len) return prefixes[a].len < prefixes[b].len;
        return prefixes[a].addr < prefixes[b].addr;
    });
    std::vector<BpfNetEntry> out;
    out.reserve(order.size());
    for (size_t i : order) {
        const PrefixKey& p = prefixes[i];
        // Every prefix containing this one (itself included), least specific first.
        std::vector<bw_port_range> ranges;
        for (unsigned len = 0; len <= p.len; ++len) {
            if (!lengths[len]) continue;
            auto it = index.find(PrefixKey{mask_addr(p.addr, uint8_t(len)), uint8_t(len)});
            if (it != index.end()) ranges.insert(ranges.end(), own[it->second].begin(), own[it->second].end());
        }
        std::stable_sort(ranges.begin(), ranges.end(), range_before);
        std::vector<bw_port_range> uniq;
        for (const auto& r : ranges)
            if (uniq.empty() || !same_range(uniq.back(), r)) uniq.push_back(r);
        if (uniq.size() > BW_PORT_RANGES_MAX) {
            TableError e{"too-many-port-ranges", "network prefix " + format_cidr(p.addr, p.len) + " needs " + std::to_string(uniq.size()) +
                             " port ranges (with those of the prefixes containing it); an entry holds " +
                             std::to_string(BW_PORT_RANGES_MAX),
                         BW_NO_RULE, {}};
            e.at_rule = own[i].front().rule_id;
            for (const auto& r : uniq)
                if (std::find(e.rule_ids.begin(), e.rule_ids.end(), r.rule_id) == e.rule_ids.end())
                    e.rule_ids.push_back(r.rule_id);
            return std::unexpected(std::move(e));
        }
        BpfNetEntry e{};
        e.key.prefixlen = 32u + p.len;
        e.key.policy_id = 0;
        std::memcpy(e.key.addr, p.addr.data(), 16);
        e.value.count = static_cast<uint32_t>(uniq.size());
        std::copy(uniq.begin(), uniq.end(), e.value.ranges);
        out.push_back(e);
    }
    return out;
}

std::string unix_rule_unsound(const Bundle& b, const std::string& address) {
    if (address.starts_with("@")) return {};
    std::string path = address.size() > 1 && address.ends_with("/") ? address.substr(0, address.size() - 1) : address;
    constexpr uint32_t kMoves = BW_FS_CREATE | BW_FS_REMOVE;
    if (unrestricted_file_rights(b) & kMoves)
        return "the tool's file rights are unrestricted (no files: rules), so it could replace " + path +
               " or a directory above it with a symlink to another socket";
    // the path itself and every directory above it
    for (std::string at = path;;) {
        uint32_t allow = 0, deny = 0;
        uint32_t by = BW_NO_RULE;
        for (const auto& f : b.files) {
            if (!path_covers(f.path, at)) continue;
            if ((f.allow & kMoves) && by == BW_NO_RULE) by = f.rule_id;
            allow |= f.allow;
            deny |= f.deny;
        }
        if (uint32_t r = allow & ~deny & kMoves; r) {
            const RuleRef* rule = b.rule(by);
            return std::string("the tool may ") + ((r & BW_FS_CREATE) ? "create" : "remove") + " at " + at +
                   (rule ? " (" + rule->text + ")" : std::string()) +
                   ", so it could put another socket, or a symlink to one, under " + path;
        }
        // up one directory; a variable root ("${workdir}") is as far as the path goes here
        size_t slash = at.rfind('/');
        if (at == "/" || slash == std::string::npos) break;
        at = slash == 0 ? "/" : at.substr(0, slash);
    }
    return {};
}

std::string unix_rule_check(const Bundle& b, const UnixRule& r) {
    if (r.op_mask & BW_NET_BIND)
        if (std::string why = unix_bind_uncreatable(b, r.address); !why.empty()) return "the tool could never bind here: " + why;
    if (r.op_mask & ~uint32_t(BW_NET_BIND))
        if (std::string why = unix_rule_unsound(b, r.address); !why.empty()) return "cannot be held to its socket: " + why;
    return {};
}

bool unix_bind_in_private_tmp(std::string_view address) {
    for (std::string_view tmp : {"/tmp/", "${tmp}/"})
        if (address.starts_with(tmp)) return true;
    return address == "/tmp" || address == "${tmp}";
}

std::string unix_bind_uncreatable(const Bundle& b, const std::string& address) {
    if (address.starts_with("@") || unix_bind_in_private_tmp(address)) return {};
    if (unrestricted_file_rights(b) & BW_FS_CREATE) return {};
    std::string path = address.size() > 1 && address.ends_with("/") ? address.substr(0, address.size() - 1) : address;
    uint32_t allow = 0, deny = 0;
    for (const auto& f : b.files)
        if (path_covers(f.path, path)) allow |= f.allow, deny |= f.deny;
    if (allow & ~deny & BW_FS_CREATE) return {};
    return std::string("no files rule lets it create at ") + path + ((deny & BW_FS_CREATE) ? " (a deny takes create away)" : "");
}

std::expected<std::vector<BpfUnixEntry>, TableError> build_unix_entries(const std::vector<UnixRule>& rules) {
    struct Acc {
        std::string address;
        BpfUnixEntry e;
        size_t connect_spec = 0, send_spec = 0, bind_spec = 0;  // length of the rule that gave each op
    };
    std::vector<Acc> acc;
    for (const auto& r : rules) {
        if (!path_variable(r.address).empty())
            return std::unexpected(TableError{"unresolved-variable", "unix rule " + r.address + " still holds a variable",
                                              r.rule_id, {r.rule_id}});
        auto k = unix_rule_key(r.address);
        if (!k) return std::unexpected(TableError{"bad-unix-address", r.address + ": " + k.error(), r.rule_id, {r.rule_id}});
        if (std::none_of(acc.begin(), acc.end(), [&](const Acc& a) { return a.address == r.address; }))
            acc.push_back({r.address, {*k, {0, BW_NO_RULE, BW_NO_RULE, BW_NO_RULE}}});
    }
    // every entry carries the ops of every rule covering it: itself, or a directory rule above it
    for (auto& a : acc) {
        for (const auto& r : rules) {
            bool covers = r.address == a.address ||
                          (r.address.ends_with("/") && !a.address.starts_with("@") && a.address.starts_with(r.address));
            if (!covers) continue;
            a.e.value.op_mask |= r.op_mask;
            if ((r.op_mask & BW_NET_CONNECT) && r.address.size() > a.connect_spec) {
                a.connect_spec = r.address.size();
                a.e.value.connect_rule_id = r.rule_id;
            }
            if ((r.op_mask & BW_NET_SEND) && r.address.size() > a.send_spec) {
                a.send_spec = r.address.size();
                a.e.value.send_rule_id = r.rule_id;
            }
            if ((r.op_mask & BW_NET_BIND) && r.address.size() > a.bind_spec) {
                a.bind_spec = r.address.size();
                a.e.value.bind_rule_id = r.rule_id;
            }
        }
    }
    if (acc.size() > BW_MAX_UNIX_RULES)
        return std::unexpected(TableError{"too-many-unix-rules", "the policy needs " + std::to_string(acc.size()) +
                                              " unix entries; the map holds " + std::to_string(BW_MAX_UNIX_RULES),
                                          BW_NO_RULE, {}});
    std::sort(acc.begin(), acc.end(), [](const Acc& x, const Acc& y) { return x.address < y.address; });
    std::vector<BpfUnixEntry> out;
    for (auto& a : acc) out.push_back(a.e);
    return out;
}

std::expected<void, std::string> rebuild_bpf_tables(Bundle& b) {
    auto net = build_net_entries(b.network.mode == NetMode::Rules ? effective_net_rules(b)
                                                                   : std::vector<NetRule>{});
    if (!net) return std::unexpected(net.error().message);
    for (const auto& u : b.network.unix_rules)
        if (std::string why = unix_rule_check(b, u); !why.empty()) return std::unexpected("unix rule " + u.address + ": " + why);
    auto unix_entries = build_unix_entries(b.network.unix_rules);
    if (!unix_entries) return std::unexpected(unix_entries.error().message);
    b.bpf.unix_sockets = std::move(*unix_entries);
    auto files = build_file_entries(b.files);
    if (auto ok = check_file_capacity(files); !ok) return std::unexpected(ok.error().message);
    b.bpf.header = build_policy_header(b);
    b.bpf.files = std::move(files);
    b.bpf.net = std::move(*net);
    return {};
}

}  // namespace bulwark::policy
