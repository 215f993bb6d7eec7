// Warnings: overly broad grants, allows shadowed by denies, duplicate
// entries, binaries the exec rules would not let start, grants on the host's
// /tmp (which no sandbox shows).
#include <map>
#include <unordered_map>

#include "passes.h"

namespace bulwark::policy {

namespace {

const char* const kSystemRoots[] = {"/",     "/etc", "/usr",  "/bin", "/sbin", "/lib", "/lib64", "/lib32",
                                    "/boot", "/dev", "/proc", "/sys", "/var",  "/root", "/opt",  "/srv"};

bool any_address(const NetRule& r) {
    if (r.host) return false;
    static constexpr std::array<uint8_t, 16> mapped{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0};
    return r.prefix == 0 || (r.prefix == 96 && r.addr == mapped);
}

// A duplicate is the mistake of the file holding the later entry when that
// file is the one being checked, or repeats itself. Two bases that each need
// an entry (a tool extending both) are not wrong, and a base that repeats its
// own base is told when it is checked itself (`policyc check rules/` checks
// every base).
bool own_duplicate(const CompileContext& ctx, uint32_t first, uint32_t again) {
    const RuleRef* a = ctx.bundle.rule(first);
    const RuleRef* b = ctx.bundle.rule(again);
    if (!a || !b) return true;
    return b->loc.file == ctx.main_file || b->loc.file == a->loc.file;
}

void run_lint(CompileContext& ctx) {
    const auto& files = ctx.bundle.files;
    // Broad grants.
    for (const auto& f : files) {
        uint32_t risky = f.allow & (BW_FS_WRITE | BW_FS_CREATE | BW_FS_REMOVE | (f.path == "/" ? BW_FS_EXEC : 0));
        if (!risky) continue;
        for (const char* root : kSystemRoots) {
            if (f.path == root) {
                ctx.warning(ctx.span_of(f.rule_id), "broad-grant",
                            rights_to_string(risky) + " on " + f.path + " reaches the whole " +
                                (f.path == "/" ? std::string("file system") : "system directory " + f.path),
                            {"grant the narrowest directory the tool writes, e.g. \"${workdir}\""});
                break;
            }
        }
    }
    // The host's /tmp: agentd gives every run a private tmpfs /tmp, so a
    // grant on a literal /tmp path reaches a file the tool never sees.
    // ${tmp} names that private /tmp; the workdir is shared with the host.
    for (const auto& f : files) {
        if (!(f.allow & ~f.deny) || !(f.path == "/tmp" || f.path.starts_with("/tmp/"))) continue;
        ctx.warning(ctx.span_of(f.rule_id), "host-tmp",
                    "the sandbox does not show the host's " + f.path +
                        ": every run gets a private, empty /tmp, so this grant reaches nothing",
                    {"for the run's scratch files write \"${tmp}\"" +
                         std::string(f.path == "/tmp" ? "" : " (e.g. \"${tmp}" + f.path.substr(4) + "\")"),
                     "for files shared with the host, put them in the work directory: \"${workdir}/...\""});
    }
    // Duplicates and shadowed allows.
    std::map<std::tuple<std::string, uint32_t, uint32_t>, uint32_t> seen;
    std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> denies;  // path -> bits, first rule
    for (const auto& f : files) {
        auto [it, fresh] = seen.emplace(std::tuple{f.path, f.allow, f.deny}, f.rule_id);
        if (!fresh && own_duplicate(ctx, it->second, f.rule_id))
            ctx.warning(ctx.span_of(f.rule_id), "duplicate-rule",
                        "duplicate entry: " + ctx.describe(it->second) + " already says this");
        if (f.deny) {
            auto& d = denies[f.path];
            if (!d.first) d.second = f.rule_id;
            d.first |= f.deny;
        }
    }
    if (!denies.empty()) {
        for (const auto& f : files) {
            if (!f.allow) continue;
            uint32_t denied = 0, by = 0;
            for_each_ancestor(f.path, [&](std::string_view a) {
                if (auto it = denies.find(a); it != denies.end() && (it->second.first & f.allow)) {
                    denied |= it->second.first;
                    if (!by) by = it->second.second;
                }
            });
            if ((f.allow & ~denied) == 0)
                ctx.warning(ctx.span_of(f.rule_id), "shadowed-rule",
                            "this rule has no effect: " + ctx.describe(by) + " denies what it allows");
        }
    }
    // Network.
    const auto& rules = ctx.bundle.network.rules;
    std::map<std::tuple<std::optional<std::string>, std::array<uint8_t, 16>, uint8_t, uint16_t, uint16_t, uint8_t,
                        uint8_t, uint8_t>,
             uint32_t>
        net_seen;
    std::vector<const NetRule*> net_denies;
    for (const auto& r : rules) {
        auto key = std::tuple{r.host, r.addr, r.prefix, r.port_lo, r.port_hi, r.proto_mask, r.op_mask, r.action};
        auto [it, fresh] = net_seen.emplace(key, r.rule_id);
        if (!fresh && it->second != r.rule_id && own_duplicate(ctx, it->second, r.rule_id))
            ctx.warning(ctx.span_of(r.rule_id), "duplicate-rule",
                        "duplicate entry: " + ctx.describe(it->second) + " already says this");
        if (r.action == BW_NET_ACTION_DENY && !r.host) net_denies.push_back(&r);
        if (r.action == BW_NET_ACTION_ALLOW && any_address(r) && (r.op_mask & (BW_NET_CONNECT | BW_NET_SEND)))
            ctx.warning(ctx.span_of(r.rule_id), "broad-grant",
                        "this rule reaches every " +
                            std::string(r.prefix == 0 ? "IPv6 and IPv4 (v4-mapped)" : "IPv4") + " address",
                        {"name the hosts or networks the tool needs"});
        // An IPv6 prefix short enough to contain ::ffff:0:0/96 also covers IPv4.
        static const Cidr kMapped{{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0}, 96, false};
        if (!r.host && r.prefix > 0 && r.prefix < 96 && cidr_contains(Cidr{r.addr, r.prefix, false}, kMapped))
            ctx.warning(ctx.span_of(r.rule_id), "covers-ipv4",
                        "this IPv6 prefix contains ::ffff:0:0/96, so it also covers every IPv4 address",
                        {"IPv4 is matched as v4-mapped IPv6; write IPv4 networks as IPv4 CIDRs"});
    }
    for (const auto& r : rules) {
        if (r.action != BW_NET_ACTION_ALLOW || r.host) continue;
        Cidr inner{r.addr, r.prefix, false};
        for (const NetRule* d : net_denies) {
            if (cidr_contains(Cidr{d->addr, d->prefix, false}, inner) && d->port_lo <= r.port_lo &&
                d->port_hi >= r.port_hi && (r.proto_mask & ~d->proto_mask) == 0 && (r.op_mask & ~d->op_mask) == 0) {
                ctx.warning(ctx.span_of(r.rule_id), "shadowed-rule",
                            "this rule has no effect: " + ctx.describe(d->rule_id) + " denies what it allows");
                break;
            }
        }
    }
    // Syscalls.
    std::map<std::string, uint32_t> allowed, denied;
    for (const auto& r : ctx.seccomp.allow)
        if (r.args.empty() && !allowed.emplace(r.name, r.rule_id).second &&
            own_duplicate(ctx, allowed[r.name], r.rule_id))
            ctx.warning(ctx.span_of(r.rule_id), "duplicate-rule", "\"" + r.name + "\" is already allowed by " +
                                                                      ctx.describe(allowed[r.name]));
    for (const auto& r : ctx.seccomp.deny) {
        if (!denied.emplace(r.name, r.rule_id).second && own_duplicate(ctx, denied[r.name], r.rule_id))
            ctx.warning(ctx.span_of(r.rule_id), "duplicate-rule",
                        "\"" + r.name + "\" is already denied by " + ctx.describe(denied[r.name]));
    }
    for (const auto& r : ctx.seccomp.allow)
        if (auto it = denied.find(r.name); it != denied.end())
            ctx.warning(ctx.span_of(r.rule_id), "shadowed-rule",
                        "this rule has no effect: " + ctx.describe(it->second) + " denies \"" + r.name +
                            "\" and deny wins");
    // Binaries must be executable under the exec rules.
    if (ctx.ast.files.present || ctx.ast.exec.present) {
        for (const auto& b : ctx.bundle.binaries) {
            bool ok = false;
            for (const auto& f : files)
                if ((f.allow & BW_FS_EXEC) && path_covers(f.path, b.path)) ok = true;
            if (!ok)
                ctx.warning(ctx.span_of(b.rule_id), "binary-not-executable",
                            "binary " + b.path + " is not executable under these rules",
                            {"add it to exec.allow (or files.exec)"});
        }
    }
}

}  // namespace

Pass lint_pass() { return {"lint", run_lint, true}; }

}  // namespace bulwark::policy
