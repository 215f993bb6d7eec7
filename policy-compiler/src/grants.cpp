#include "bulwark/policy/grants.h"

#include "bulwark/policy/landlock_abi.h"

#include <linux/landlock.h>

#include <algorithm>
#include <map>

#include "bulwark/policy/bpf_tables.h"
#include "bulwark/policy/evaluator.h"
#include "bulwark/policy/seccomp.h"
#include "bulwark/policy/values.h"

namespace bulwark::policy {

namespace {

std::string op_names(uint8_t ops) { return net_ops_to_string(ops, "|"); }

std::string proto_names(uint8_t p) {
    if ((p & (BW_PROTO_TCP | BW_PROTO_UDP)) == (BW_PROTO_TCP | BW_PROTO_UDP)) return "any";
    return p & BW_PROTO_TCP ? "tcp" : "udp";
}

std::string ports(uint16_t lo, uint16_t hi) {
    return lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
}

std::string grant_net_text(const NetGrant& g) {
    return "network." + op_names(g.op_mask) + " " + (g.host ? *g.host + " (" : "") +
           format_cidr(g.addr, g.prefix) + (g.host ? ")" : "") + " ports " + ports(g.port_lo, g.port_hi) +
           " proto " + proto_names(g.proto_mask);
}

struct Builder {
    Bundle& b;
    std::string file;
    uint32_t add_rule(std::string section, std::string text, uint32_t line) {
        RuleRef r;
        r.id = static_cast<uint32_t>(b.rules.size());
        r.loc = {file, line, 1};
        r.text = std::move(text);
        r.section = std::move(section);
        b.rules.push_back(std::move(r));
        return b.rules.back().id;
    }
};

// The parent's network as rules (loopback mode as its two prefixes).
std::vector<NetRule> parent_net_rules(const Bundle& p) {
    if (p.network.mode == NetMode::Rules) return effective_net_rules(p);
    std::vector<NetRule> out;
    if (p.network.mode == NetMode::Loopback) {
        for (const char* c : {"127.0.0.0/8", "::1/128"}) {
            auto cidr = parse_cidr(c);
            NetRule r;
            r.addr = cidr->addr;
            r.prefix = cidr->prefix;
            r.op_mask = BW_NET_CONNECT | BW_NET_BIND | BW_NET_SEND;
            r.rule_id = BW_NO_RULE;
            out.push_back(r);
        }
    }
    return out;
}

bool ranges_cover(std::vector<std::pair<uint16_t, uint16_t>> iv, uint16_t lo, uint16_t hi) {
    std::sort(iv.begin(), iv.end());
    uint32_t next = lo;  // first port not yet covered
    for (auto [a, b] : iv) {
        if (a > next) break;
        if (b + 1u > next) next = b + 1u;
        if (next > hi) return true;
    }
    return next > hi;
}

void check_net_grant(const Bundle& p, const std::vector<NetRule>& rules, const NetGrant& g,
                     std::vector<std::string>& reasons) {
    std::string what = grant_net_text(g);
    if (p.network.mode == NetMode::None) {
        reasons.push_back(what + ": the tool allows no network (network: none)");
        return;
    }
    for (const auto& d : rules) {
        if (d.action != BW_NET_ACTION_DENY) continue;
        if (d.prefix > g.prefix || !prefix_contains(d.addr, d.prefix, g.addr)) continue;
        if (d.port_hi < g.port_lo || d.port_lo > g.port_hi) continue;
        if (!(d.proto_mask & g.proto_mask) || !(d.op_mask & g.op_mask)) continue;
        reasons.push_back(what + ": denied by the tool's " + describe_rule(p, d.rule_id));
        return;
    }
    for (uint8_t op : {BW_NET_CONNECT, BW_NET_BIND, BW_NET_SEND}) {
        if (!(g.op_mask & op)) continue;
        for (uint8_t proto : {BW_PROTO_TCP, BW_PROTO_UDP}) {
            if (!(g.proto_mask & proto)) continue;
            std::vector<std::pair<uint16_t, uint16_t>> iv;
            for (const auto& a : rules) {
                if (a.action != BW_NET_ACTION_ALLOW || !(a.op_mask & op) || !(a.proto_mask & proto)) continue;
                if (a.prefix > g.prefix || !prefix_contains(a.addr, a.prefix, g.addr)) continue;
                iv.emplace_back(a.port_lo, a.port_hi);
            }
            if (!ranges_cover(iv, g.port_lo, g.port_hi)) {
                std::string tool = p.network.mode == NetMode::Loopback
                                       ? "the tool allows loopback only (network: loopback)"
                                       : "no tool network rule allows " + op_names(op) + " " +
                                             (proto == BW_PROTO_TCP ? "tcp" : "udp") + " to all of " +
                                             format_cidr(g.addr, g.prefix) + " ports " +
                                             ports(g.port_lo, g.port_hi);
                reasons.push_back(what + ": " + tool);
                return;
            }
        }
    }
}

std::optional<NetRule> intersect(const NetRule& a, const NetGrant& g, uint8_t scoped, uint32_t rule_id) {
    NetRule r;
    r.op_mask = a.op_mask & g.op_mask & scoped;
    r.proto_mask = a.proto_mask & g.proto_mask;
    r.port_lo = std::max(a.port_lo, g.port_lo);
    r.port_hi = std::min(a.port_hi, g.port_hi);
    if (!r.op_mask || !r.proto_mask || r.port_lo > r.port_hi) return std::nullopt;
    if (a.prefix <= g.prefix && prefix_contains(a.addr, a.prefix, g.addr)) {
        r.addr = g.addr;
        r.prefix = g.prefix;
    } else if (g.prefix < a.prefix && prefix_contains(g.addr, g.prefix, a.addr)) {
        r.addr = a.addr;
        r.prefix = a.prefix;
    } else {
        return std::nullopt;
    }
    r.action = BW_NET_ACTION_ALLOW;
    r.rule_id = rule_id;
    return r;
}

struct LimitField {
    const char* name;
    std::optional<uint64_t> Limits::*field;
};

}  // namespace

uint32_t effective_file_rights(const Bundle& b, std::string_view path) {
    uint32_t allow = unrestricted_file_rights(b), deny = 0;
    for (const auto& f : b.files)
        if (path_covers(f.path, path)) {
            allow |= f.allow;
            deny |= f.deny;
        }
    return allow & ~deny;
}

namespace {

// One grant applied to one tool's bundle, part by part. Every part that
// would widen the tool adds its reason (the refusal lists them all, so a
// caller fixes its grant in one go); n is the narrowed bundle so far.
struct Narrowing {
    Narrowing(const Bundle& parent, const Grant& grant)
        : parent(parent), grant(grant), n(parent),
          rb{n, "grant:" + (grant.name.empty() ? std::string("unnamed") : grant.name)} {}

    void narrow_files();
    void narrow_network(const Resolver& resolve);
    void narrow_families();
    void narrow_socket_filter();
    void narrow_limits();
    void narrow_microvm();
    void cut_at_expiry(Clock::time_point now);

    const Bundle& parent;
    const Grant& grant;
    Bundle n;
    Builder rb;  // the grant's own rules, in n
    uint32_t line = 1;
    std::vector<std::string> reasons;
};

// files: rights the grant names are scoped to its paths (each one the tool
// must already have there); the rest of the tool's rights stay.
void Narrowing::narrow_files() {
    if (grant.files || grant.files_confined) {
        uint32_t scoped = grant.files_confined & BW_FS_ALL;
        std::vector<FileRule> added;
        for (const auto& g : grant.files.value_or(std::vector<FileGrant>{})) {
            auto path = normalise_path(g.path);
            uint32_t l = line++;
            if (path && !path->starts_with("/")) path = std::unexpected(std::string("not an absolute path"));
            if (!path) {
                reasons.push_back("files " + g.path + ": " + path.error());
                continue;
            }
            if (!g.rights || (g.rights & ~BW_FS_ALL)) {
                reasons.push_back("files " + *path + ": no valid rights");
                continue;
            }
            uint32_t eff = effective_file_rights(parent, *path);
            for (uint32_t bit = 1; bit <= BW_FS_EXEC; bit <<= 1) {
                if (!(g.rights & bit) || (eff & bit)) continue;
                Operation op;
                op.kind = bit == BW_FS_EXEC     ? OpKind::Exec
                          : bit == BW_FS_CREATE ? OpKind::Create
                          : bit == BW_FS_REMOVE ? OpKind::Remove
                                                : OpKind::Open;
                op.access = bit == BW_FS_WRITE ? FileAccess::Write : FileAccess::Read;
                op.path = *path;
                Bundle enforcing = parent;
                enforcing.mode = Mode::Enforce;  // the reason, not the audit wrapper
                reasons.push_back("files." + format_rights(bit) + " " + *path +
                                  " would widen the tool: " + evaluate(enforcing, op).explanation);
            }
            scoped |= g.rights;
            uint32_t id = rb.add_rule("files", "grant files." + format_rights(g.rights) + ": " + *path, l);
            added.push_back({*path, g.rights & BW_FS_ALL, 0, id});
        }
        // A right confined with no entry naming it is taken away (a deny:
        // with no files rule left, the bundle would read as unrestricted).
        uint32_t named = 0;
        for (const auto& f : added) named |= f.allow;
        if (uint32_t bare = scoped & ~named) {
            uint32_t id = rb.add_rule("files", "grant files." + format_rights(bare) + ": none", line++);
            added.push_back({"/", 0, bare, id});
        }
        if (scoped) {
            uint32_t unrestricted = unrestricted_file_rights(parent);
            std::vector<FileRule> files;
            if (uint32_t keep = unrestricted & ~scoped) {
                uint32_t id = rb.add_rule("files", "grant keeps the tool's unrestricted " +
                                                       format_rights(keep) + " on /", line++);
                files.push_back({"/", keep, 0, id});
            }
            for (auto f : parent.files) {
                f.allow &= ~scoped;
                if (f.allow || f.deny) files.push_back(f);
            }
            files.insert(files.end(), added.begin(), added.end());
            n.files = std::move(files);
            // Landlock: bits only the scoped rights produce leave the tool's
            // paths and come back on the grant's paths only (a bit shared
            // with a right the grant does not name, REFER, stays).
            uint64_t strip = landlock_fs_access(scoped) & ~landlock_fs_access(BW_FS_ALL & ~scoped);
            std::vector<LandlockPathRule> ll;
            for (auto p : parent.landlock.paths) {
                p.access &= ~strip;
                if (p.access) ll.push_back(p);
            }
            for (const auto& f : added)
                if (uint64_t acc = landlock_fs_access(f.allow) & n.landlock.handled_fs)
                    ll.push_back({f.path, acc, f.rule_id});
            n.landlock.paths = std::move(ll);
        }
    }
}

// network: none, or the tool's allow rules intersected with the grant's
// (host names resolved now); deny rules stay.
void Narrowing::narrow_network(const Resolver& resolve) {
    if (grant.network_none) {
        n.network.mode = NetMode::None;
        n.network.rules.clear();
        n.network.dns.clear();
        n.network.af_allow &= 1ull << 1;  // AF_UNIX only
    } else if (grant.network || grant.network_confined) {
        std::vector<NetGrant> entries;
        for (const auto& g : grant.network.value_or(std::vector<NetGrant>{})) {
            if (!g.op_mask || (g.op_mask & ~(BW_NET_CONNECT | BW_NET_BIND | BW_NET_SEND)) || !g.proto_mask ||
                g.port_lo > g.port_hi || g.prefix > 128) {
                reasons.push_back(grant_net_text(g) + ": malformed (operations, protocols and ports must be set)");
                continue;
            }
            if (!g.host) {
                entries.push_back(g);
                continue;
            }
            if (!resolve) {
                reasons.push_back("network host " + *g.host + ": no resolver to resolve it");
                continue;
            }
            auto addrs = resolve(*g.host);
            if (!addrs || addrs->empty()) {
                reasons.push_back("network host " + *g.host + " did not resolve" +
                                  (addrs ? std::string() : ": " + addrs.error()));
                continue;
            }
            for (const auto& text : *addrs) {
                auto a = parse_ip(text);
                if (!a) {
                    reasons.push_back("network host " + *g.host + " resolved to '" + text + "'");
                    continue;
                }
                NetGrant c = g;
                c.addr = *a;
                c.prefix = 128;
                entries.push_back(std::move(c));
            }
        }
        std::vector<NetRule> prules = parent_net_rules(parent);
        uint8_t scoped = grant.network_confined & (BW_NET_CONNECT | BW_NET_BIND | BW_NET_SEND);
        for (const auto& g : entries) {
            check_net_grant(parent, prules, g, reasons);
            scoped |= g.op_mask;
        }
        if (scoped) {
            std::vector<NetRule> rules;
            for (auto r : prules) {
                if (r.action == BW_NET_ACTION_ALLOW) {
                    r.op_mask &= ~scoped;
                    if (!r.op_mask) continue;
                }
                rules.push_back(r);
            }
            for (const auto& g : entries) {
                uint32_t id = rb.add_rule("network", "grant " + grant_net_text(g), line++);
                for (const auto& a : prules) {
                    if (a.action != BW_NET_ACTION_ALLOW) continue;
                    auto r = intersect(a, g, scoped, id);
                    if (!r) continue;
                    bool dup = std::any_of(rules.begin(), rules.end(), [&](const NetRule& o) {
                        return o.addr == r->addr && o.prefix == r->prefix && o.port_lo == r->port_lo &&
                               o.port_hi == r->port_hi && o.proto_mask == r->proto_mask &&
                               o.op_mask == r->op_mask && o.action == r->action;
                    });
                    if (!dup) rules.push_back(*r);
                }
            }
            n.network.mode = parent.network.mode == NetMode::None ? NetMode::None : NetMode::Rules;
            n.network.rules = std::move(rules);
            n.network.dns.clear();  // materialised in the rules above
        }
    }
}

// network.families: a subset of the tool's.
void Narrowing::narrow_families() {
    if (grant.families) {
        if (uint64_t extra = *grant.families & ~parent.network.af_allow) {
            std::string fams;
            for (unsigned f = 0; f < 64; ++f)
                if ((extra >> f) & 1) fams += (fams.empty() ? "" : ", ") + std::to_string(f);
            reasons.push_back("network.families " + fams + ": not allowed by the tool's network.families");
        }
        n.network.af_allow &= *grant.families;
    }
}

// The seccomp filter holds network.families on every host: families the
// grant took away (network.families, network: none) are refused in front
// of the tool's filter too.
void Narrowing::narrow_socket_filter() {
    if (n.network.af_allow == parent.network.af_allow || n.seccomp.program.empty()) return;
    auto narrowed = narrow_socket_families(n.seccomp.program, n.network.af_allow, n.mode == Mode::Audit);
    if (!narrowed) {
        reasons.push_back("network.families: " + narrowed.error().message);
        return;
    }
    n.seccomp.program = std::move(*narrowed);
}

// limits: each one lowered, never raised or switched off.
void Narrowing::narrow_limits() {
    static constexpr LimitField kLimits[] = {
        {"memory", &Limits::memory_bytes},     {"pids", &Limits::pids},
        {"timeout", &Limits::timeout_ms},      {"output", &Limits::output_bytes},
        {"file_size", &Limits::file_size_bytes}, {"open_files", &Limits::open_files},
    };
    auto limit_rule = [&](std::string_view name) {
        for (const auto& [k, id] : parent.limits.rule_ids)
            if (k == name) return describe_rule(parent, id);
        return std::string("limit");
    };
    for (const auto& lf : kLimits) {
        const auto& want = grant.limits.*lf.field;
        if (!want) continue;
        const auto& have = parent.limits.*lf.field;
        if (*want == 0) {
            reasons.push_back(std::string("limits.") + lf.name + " 0 would disable the limit");
        } else if (have && *want > *have) {
            reasons.push_back(std::string("limits.") + lf.name + " " + std::to_string(*want) +
                              " exceeds the tool's " + std::to_string(*have) + " (" + limit_rule(lf.name) + ")");
        } else {
            n.limits.*lf.field = want;
        }
    }
    if (grant.limits.cpu_percent) {
        uint32_t want = *grant.limits.cpu_percent;
        if (want == 0)
            reasons.push_back("limits.cpu 0% would disable the limit");
        else if (parent.limits.cpu_percent && want > *parent.limits.cpu_percent)
            reasons.push_back("limits.cpu " + std::to_string(want) + "% exceeds the tool's " +
                              std::to_string(*parent.limits.cpu_percent) + "% (" + limit_rule("cpu") + ")");
        else
            n.limits.cpu_percent = want;
    }
}

// microvm: a grant may move a tool into a VM (off -> preferred -> required)
// and give it less of one, never take it out or give it more.
void Narrowing::narrow_microvm() {
    const auto& have = parent.microvm;
    auto rule = [&](std::string_view key) {
        uint32_t id = have.rule_of(key);
        return id ? " (" + describe_rule(parent, id) + ")" : std::string(" (the default)");
    };
    static constexpr const char* kModes[] = {"off", "preferred", "required"};
    if (grant.microvm_mode) {
        if (*grant.microvm_mode < have.mode)
            reasons.push_back(std::string("microvm.mode ") + kModes[int(*grant.microvm_mode)] + " is weaker than the tool's " +
                              kModes[int(have.mode)] + rule("mode"));
        else
            n.microvm.mode = *grant.microvm_mode;
    }
    if (grant.microvm_memory_bytes) {
        if (*grant.microvm_memory_bytes > have.memory_bytes)
            reasons.push_back("microvm.memory " + std::to_string(*grant.microvm_memory_bytes) + " exceeds the tool's " +
                              std::to_string(have.memory_bytes) + rule("memory"));
        else if (*grant.microvm_memory_bytes < (128ull << 20))
            reasons.push_back("microvm.memory " + std::to_string(*grant.microvm_memory_bytes) + " is under 128 MiB");
        else
            n.microvm.memory_bytes = *grant.microvm_memory_bytes;
    }
    if (grant.microvm_vcpus) {
        if (*grant.microvm_vcpus > have.vcpus || *grant.microvm_vcpus == 0)
            reasons.push_back("microvm.vcpus " + std::to_string(*grant.microvm_vcpus) + " is not from 1 to the tool's " +
                              std::to_string(have.vcpus) + rule("vcpus"));
        else
            n.microvm.vcpus = *grant.microvm_vcpus;
    }
}

// A time-boxed grant: the run is cut when it expires.
void Narrowing::cut_at_expiry(Clock::time_point now) {
    if (grant.expires_at) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*grant.expires_at - now).count();
        if (left <= 0) {
            reasons.push_back("the grant expired " + std::to_string(-left) + " ms ago");
        } else {
            uint64_t ms = static_cast<uint64_t>(left);
            if (!n.limits.timeout_ms || *n.limits.timeout_ms > ms) n.limits.timeout_ms = ms;
        }
    }
}

}  // namespace

namespace {

// intersection_grant's files: per right `narrower` confines, its paths that
// `current` gives the right on, and below each one that it does not,
// `current`'s own paths that do.
std::vector<FileGrant> shared_file_grants(const Bundle& current, const Bundle& narrower, uint32_t confined) {
    std::map<std::string, uint32_t> rights;  // path -> rights, one grant entry per path
    auto gives = [&](const std::string& path, uint32_t bit) { return (effective_file_rights(current, path) & bit) != 0; };
    for (uint32_t bit = 1; bit <= BW_FS_EXEC; bit <<= 1) {
        if (!(confined & bit)) continue;
        for (const auto& x : narrower.files) {
            if (!(x.allow & bit)) continue;
            if (gives(x.path, bit)) {
                rights[x.path] |= bit;
                continue;
            }
            for (const auto& c : current.files)
                if ((c.allow & bit) && c.path != x.path && path_covers(x.path, c.path) && gives(c.path, bit))
                    rights[c.path] |= bit;
        }
    }
    std::vector<FileGrant> out;
    for (const auto& [path, r] : rights) out.push_back({path, r});
    return out;
}

// An allow rule's range as a grant entry.
NetGrant grant_of(const NetRule& r) {
    NetGrant g;
    g.addr = r.addr;
    g.prefix = r.prefix;
    g.port_lo = r.port_lo;
    g.port_hi = r.port_hi;
    g.proto_mask = r.proto_mask;
    g.op_mask = r.op_mask;
    return g;
}

// intersection_grant's network: each allow of `narrower` met with each of
// `current`'s, the pieces that no deny of `current` touches.
std::vector<NetGrant> shared_net_grants(const Bundle& current, const Bundle& narrower) {
    const std::vector<NetRule> mine = parent_net_rules(current);
    std::vector<NetGrant> out;
    for (const auto& x : parent_net_rules(narrower)) {
        if (x.action != BW_NET_ACTION_ALLOW) continue;
        for (const auto& c : mine) {
            if (c.action != BW_NET_ACTION_ALLOW) continue;
            auto piece = intersect(c, grant_of(x), x.op_mask, BW_NO_RULE);
            if (!piece) continue;
            NetGrant g = grant_of(*piece);
            std::vector<std::string> refused;
            check_net_grant(current, mine, g, refused);
            if (refused.empty() && std::find(out.begin(), out.end(), g) == out.end()) out.push_back(g);
        }
    }
    return out;
}

}  // namespace

Grant intersection_grant(const Bundle& current, const Bundle& narrower, std::string name) {
    Grant g;
    g.name = std::move(name);
    g.files_confined = BW_FS_ALL & ~unrestricted_file_rights(narrower);
    if (g.files_confined) g.files = shared_file_grants(current, narrower, g.files_confined);
    if (narrower.network.mode == NetMode::None) {
        g.network_none = current.network.mode != NetMode::None;
    } else if (current.network.mode != NetMode::None) {
        g.network_confined = BW_NET_CONNECT | BW_NET_BIND | BW_NET_SEND;
        g.network = shared_net_grants(current, narrower);
    }
    if (uint64_t both = current.network.af_allow & narrower.network.af_allow; both != current.network.af_allow)
        g.families = both;
    return g;
}

std::expected<NarrowedBundle, GrantRefusal> apply_grant(const Bundle& parent, const Grant& grant,
                                                        Clock::time_point now, const Resolver& resolve) {
    if (!is_instantiated(parent))
        return std::unexpected(GrantRefusal{{"the tool bundle still has task variables or host rules: "
                                             "instantiate it before applying a grant"}});
    Narrowing g(parent, grant);
    g.narrow_files();
    g.narrow_network(resolve);
    g.narrow_families();
    g.narrow_socket_filter();
    g.narrow_limits();
    g.narrow_microvm();
    g.cut_at_expiry(now);
    if (!g.reasons.empty()) return std::unexpected(GrantRefusal{std::move(g.reasons)});
    if (auto ok = rebuild_bpf_tables(g.n); !ok)
        return std::unexpected(GrantRefusal{{"the narrowed network rules do not fit the kernel table: " + ok.error()}});
    return NarrowedBundle{std::move(g.n), grant.expires_at};
}

}  // namespace bulwark::policy
