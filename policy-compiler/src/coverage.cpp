// Which layers can hold each rule on their own (see coverage.h).
#include "bulwark/policy/coverage.h"

#include <sys/socket.h>

#include <algorithm>
#include <map>
#include <unordered_map>
#include <string_view>

#include "bulwark/policy/cbpf.h"
#include "bulwark/policy/evaluator.h"
#include "bulwark/policy/landlock_abi.h"
#include "passes.h"

namespace bulwark::policy {
namespace {

// How the mount namespace holds a deny below an allow (agentd/sandbox/mounts.cpp
// applies exactly this): an inaccessible mount when read is denied, else a
// read-only and/or noexec bind of the path onto itself.
std::string mount_how(uint32_t deny) {
    if (deny & BW_FS_READ) {
        std::string s = "an inaccessible mount over it at launch";
        if ((deny & BW_FS_ALL) != BW_FS_ALL) s += " (refuses every right, not only " + rights_to_string(deny) + ")";
        return s;
    }
    std::string s;
    constexpr uint32_t kModify = BW_FS_WRITE | BW_FS_CREATE | BW_FS_REMOVE;
    if (deny & kModify) {
        s = "a read-only bind of it at launch";
        if ((deny & kModify) != kModify) s += " (refuses write, create and remove alike)";
    }
    if (deny & BW_FS_EXEC) s += std::string(s.empty() ? "a" : ", and") + " noexec bind of it at launch";
    return s;
}

std::string kind_of(const RuleRef& r) {
    // A task grant's rules read "grant files.write: /path", "grant network.connect ...".
    std::string_view t = r.text;
    if (t.starts_with("grant ")) t.remove_prefix(6);
    auto end = t.find_first_of(": ");
    std::string k(end == std::string_view::npos ? t : t.substr(0, end));
    if (k.starts_with("environment.")) return "environment";
    return k;
}

// Unix socket addresses: judged before the kernel looks the address up, by
// the cgroup unix programs or the LSM socket hooks, on the same rules.
std::vector<LayerClaim> unix_claims() {
    return {{"sock_unix", "cgroup connect_unix/sendmsg_unix programs (Linux 6.7+)"},
            {"bpf_lsm", "socket_connect/socket_sendmsg hooks"}};
}

// bind(2) refused to the tool altogether: an unconditional syscalls.deny
// entry whose action refuses (the reference evaluator runs the filter).
bool bind_refused_by_seccomp(const Bundle& b) {
    bool listed = std::any_of(b.syscalls.deny.begin(), b.syscalls.deny.end(),
                              [](const auto& d) { return d.first == "bind"; });
    if (!listed) return false;
    Operation op;
    op.kind = OpKind::Syscall;
    op.syscall = "bind";
    return evaluate(b, op).verdict == Verdict::Deny;
}

// Who holds a unix bind rule at `address` ("" stands for the pathname
// default, "@" for the abstract one); seccomp_bind: bind_refused_by_seccomp.
std::vector<LayerClaim> unix_bind_claims(const Bundle& b, const std::string& address, bool own_netns,
                                         bool seccomp_bind) {
    std::vector<LayerClaim> c = {{"bpf_lsm", "socket_bind hook, on the address as written"}};
    const bool landlock_fs = b.landlock.handled_fs & LANDLOCK_ACCESS_FS_MAKE_SOCK;
    if (address.starts_with("@")) {
        if (own_netns) c.push_back({"netns", "a name bound in the tool's own network namespace is out of the host's reach"});
    } else if (address.empty()) {
        if (landlock_fs) c.push_back({"landlock", "make_sock only on the directories of bind rules"});
    } else if (address.ends_with("/") && landlock_fs) {
        c.push_back({"landlock", "make_sock on the directory"});
    }
    if ((address.empty() || address == "@") && seccomp_bind)
        c.push_back({"seccomp", "bind(2) is refused to the tool altogether"});
    return c;
}

// The socket families outside network.families that the bundle's seccomp
// filter lets socket(2) or socketpair(2) create, run through the classic-BPF
// interpreter as the kernel would (each family, the usual types): none once
// the compiler narrowed both calls to the list (and a task's grant that takes
// families away narrowed the filter in turn: narrow_socket_families).
uint64_t families_past_filter(const Bundle& b) {
    if (b.seccomp.program.empty()) return ~b.network.af_allow;
    return (socket_families_through(b.seccomp.program, "socket") |
            socket_families_through(b.seccomp.program, "socketpair")) &
           ~b.network.af_allow;
}

// network.netlink: the LSM's socket_create hook reads the protocol beside the
// family (bw_policy.netlink_allow); the seccomp filter holds the list when no
// protocol left out gets through it.
std::vector<LayerClaim> netlink_claims(const Bundle& b) {
    if (!b.network.netlink_allow) return {};
    std::vector<LayerClaim> c = {{"bpf_lsm", "socket_create hook, the netlink protocol"}};
    if (!b.seccomp.program.empty() && !(netlink_protocols_through(b.seccomp.program) & ~*b.network.netlink_allow))
        c.push_back({"seccomp", "socket(2) in the netlink family only with a listed protocol (argument 2)"});
    return c;
}

// network.families: the LSM's socket_create hook sees every family; the
// cgroup sock_create program only inet and inet6 ones; the seccomp filter
// the families the compiler narrowed socket(2) to.
std::vector<LayerClaim> family_claims(const Bundle& b) {
    std::vector<LayerClaim> c = {{"bpf_lsm", "socket_create hook, every family"}};
    const uint64_t past = families_past_filter(b);
    constexpr uint64_t kInet = (uint64_t{1} << AF_INET) | (uint64_t{1} << AF_INET6);
    if (past == 0)
        c.push_back({"seccomp", "socket(2) and socketpair(2) only in the listed families"});
    else if ((past & ~kInet) == 0)
        c.push_back({"sock_addr", "cgroup sock_create refuses the inet families the filter lets through"});
    return c;
}

std::vector<LayerClaim> claims_for(const std::string& kind) {
    auto one = [](std::string layer, std::string how = {}) { return std::vector<LayerClaim>{{layer, how}}; };
    if (kind == "binaries") return one("supervisor", "started only as a listed binary");
    if (kind == "mode" || kind.starts_with("mandatory") || kind.starts_with("hardening") || kind == "environment")
        return one("supervisor");
    if (kind == "exec.allow")
        return {{"bpf_lsm", "exec check by object"}, {"landlock", "execute right on the path"}};
    // A files rule whose entry a task's grant narrowed away grants nothing:
    // what holds the default deny holds it.
    if (kind.starts_with("files.")) return {{"bpf_lsm", "object walk at every access"}, {"landlock", "path rule"}};
    if (kind == "network") return one("netns", "a network namespace of its own with only lo");
    if (kind.starts_with("network.unix")) return unix_claims();
    if (kind.starts_with("network.")) return one("sock_addr", "cgroup connect/sendmsg/bind programs");
    if (kind.starts_with("syscalls.")) return one("seccomp");
    if (kind == "limits.memory" || kind == "limits.cpu") return one("cgroup");
    if (kind == "limits.pids") return {{"cgroup", "pids controller"}, {"rlimit", "RLIMIT_NPROC"}};
    if (kind == "limits.timeout" || kind == "limits.output") return one("supervisor");
    if (kind == "limits.file_size") return one("rlimit", "RLIMIT_FSIZE");
    if (kind == "limits.open_files") return one("rlimit", "RLIMIT_NOFILE");
    if (kind == "microvm.confidential") return one("tee", "a TDX, SEV-SNP or CCA guest (docs/confidential.md)");
    if (kind.starts_with("microvm.")) return one("microvm", "a VM of its own, the tool inside under the guest's layers");
    if (kind == "profile.respond")
        return one("profile", "agentd serve scores the run against the tool's profile and responds to a finding");
    return {};  // a kind no layer is known to hold: never enforced by assumption
}

}  // namespace

const std::vector<std::string>& coverage_layers() {
    static const std::vector<std::string> names = {"bpf_lsm", "landlock", "mount",  "seccomp",    "sock_addr",
                                                   "sock_unix", "netns", "cgroup", "rlimit", "supervisor",
                                                   "microvm",   "tee",   "profile"};
    return names;
}

namespace {

// A files rule's claims: a deny below an allow is the mount layer's (and the
// LSM's); every other files rule is Landlock's too.
void file_claims(RuleCoverage& c, const FileRule& fr,
                 const std::unordered_map<std::string_view, uint32_t>& allow_at) {
    c.path = fr.path;
    c.layers.clear();
    if (!fr.deny) {
        c.rights = fr.allow;
        c.layers = {{"bpf_lsm", "object walk at every access"},
                    {"landlock", c.kind == "exec.allow" ? "execute right on the path" : "path rule"}};
        return;
    }
    c.rights = fr.deny;
    for_each_ancestor(fr.path, [&](std::string_view a) {
        if (a == fr.path) return;
        if (auto it = allow_at.find(a); it != allow_at.end()) c.deny_below_allow |= it->second & fr.deny;
    });
    c.layers.push_back({"bpf_lsm", "object walk at every access"});
    if (c.deny_below_allow) {
        c.layers.push_back({"mount", mount_how(fr.deny)});
        if (uint32_t rest = fr.deny & ~c.deny_below_allow)
            c.layers.back().how += "; Landlock also refuses " + rights_to_string(rest);
    } else {
        c.layers.push_back({"landlock", "no allow above it grants these rights"});
    }
}

}  // namespace

std::vector<RuleCoverage> rule_coverage(const Bundle& b) {
    std::unordered_map<std::string_view, uint32_t> allow_at;  // path -> rights allowed there
    for (const auto& f : b.files)
        if (f.allow) allow_at[f.path] |= f.allow;
    std::vector<RuleCoverage> out;
    std::map<uint32_t, size_t> row_of;  // rule id -> row, for rules the bundle names
    for (const auto& r : b.rules) {
        RuleCoverage c;
        c.rule_id = r.id;
        c.kind = kind_of(r);
        // A confidential tool never runs unprotected: `unenforceable: run` does not cover it.
        c.unenforceable_run = r.unenforceable_run && c.kind != "microvm.confidential";
        // The tool's name, and rule 0: the policy's defaults (default deny,
        // limits no rule set), which the rows of the rules themselves cover.
        if (c.kind == "tool" || c.kind == "description" || c.kind == "extends" || r.loc.line == 0) continue;
        if (c.kind == "network.unix.unenforceable") continue;  // an opt-out, not a rule to hold
        // What a profile learns from, and a finding that is only recorded,
        // hold nothing back from the tool: only a response is a rule to hold,
        // the one in effect (a base's weaker one an extension replaced is not).
        if (c.kind.starts_with("profile.") &&
            (c.kind != "profile.respond" || b.profile.respond == ProfileResponse::Record ||
             r.id != b.profile.rule_of("respond")))
            continue;
        // `network: none|loopback` of a base that a later `network:` mapping
        // replaced no longer applies (the mapping's rules have rows of their own).
        if (c.kind == "network" && b.network.mode == NetMode::Rules) continue;
        c.layers = c.kind == "network.families"  ? family_claims(b)
                   : c.kind == "network.netlink" ? netlink_claims(b)
                                                 : claims_for(c.kind);
        // A microvm rule of a tool that may run on the host (off, preferred)
        // is also held by the host sandbox falling back, which its report says.
        if (c.kind.starts_with("microvm.") && c.kind != "microvm.confidential" &&
            b.microvm.mode != MicroVmMode::Required)
            c.layers.push_back({"supervisor", "the host sandbox when no microVM can start, said in the run's report"});
        row_of[r.id] = out.size();
        out.push_back(std::move(c));
    }
    // Entries are what the layers enforce: each one's rule gets its claims;
    // an entry whose rule the bundle does not name (a bundle built in code)
    // gets a row of its own, never a pass.
    for (const auto& f : b.files) {
        auto it = b.rule(f.rule_id) ? row_of.find(f.rule_id) : row_of.end();
        if (it == row_of.end()) {
            RuleCoverage c;
            c.rule_id = f.rule_id;
            c.kind = f.deny ? "files.deny" : f.allow == BW_FS_EXEC ? "exec.allow" : "files." + rights_to_string(f.allow);
            file_claims(c, f, allow_at);
            out.push_back(std::move(c));
        } else {
            RuleCoverage& c = out[it->second];
            if (!c.kind.starts_with("files.") && c.kind != "exec.allow")
                c.kind = f.deny ? "files.deny" : "files." + rights_to_string(f.allow);
            file_claims(c, f, allow_at);
        }
    }
    for (const auto& n : b.network.rules) {
        std::string kind = n.action == BW_NET_ACTION_DENY ? "network.deny" : "network.connect";
        auto it = b.rule(n.rule_id) ? row_of.find(n.rule_id) : row_of.end();
        if (it == row_of.end()) {
            RuleCoverage c;
            c.rule_id = n.rule_id;
            c.kind = kind;
            c.layers = claims_for(c.kind);
            out.push_back(std::move(c));
        } else if (out[it->second].layers.empty()) {
            out[it->second].layers = claims_for(kind);
        }
    }
    // With `network:` rules, everything they do not allow is denied: that
    // default is a rule of its own, held where the rules are. It may run
    // unheld only where every network rule may.
    if (b.network.mode == NetMode::Rules) {
        RuleCoverage c;
        c.rule_id = BW_NO_RULE;
        c.kind = "network.default_deny";
        c.text = "network: everything the network rules do not allow is denied";
        c.layers = {{"sock_addr", "cgroup connect/sendmsg/bind programs deny what no rule allows"}};
        bool any = false, all_run = true;
        for (const auto& row : out)
            if (row.kind.starts_with("network.")) any = true, all_run &= row.unenforceable_run;
        c.unenforceable_run = any && all_run;
        out.push_back(std::move(c));
    }
    // Unix bind rules: an abstract name is judged by the LSM's socket_bind
    // alone (no cgroup hook sees a unix bind), and cannot reach the host from
    // a network namespace of the tool's own; a pathname bind makes a socket
    // file, which Landlock's make_sock holds per directory.
    const bool own_netns = b.network.mode != NetMode::Rules;
    for (const auto& u : b.network.unix_rules) {
        if (!(u.op_mask & BW_NET_BIND)) continue;
        auto it = row_of.find(u.rule_id);
        if (it == row_of.end()) continue;
        out[it->second].layers = unix_bind_claims(b, u.address, own_netns, false);
    }
    if (b.network.af_allow & (uint64_t(1) << AF_UNIX)) {
        // The rows of the unix defaults may run unheld where the tool's own
        // file says `unenforceable: run`, or `network.unix.unenforceable: run`.
        const RuleRef* tool = nullptr;  // the tool's own `tool:` line (a base's comes first)
        for (const auto& r : b.rules)
            if (r.text == "tool: " + b.tool) tool = &r;
        bool opted = tool && tool->unenforceable_run;
        for (const auto& r : b.rules)
            opted |= tool && r.unenforceable_run && r.loc.file == tool->loc.file &&
                     r.text.starts_with("network.unix.unenforceable");
        auto unix_default = [&](std::string kind, std::string text, std::vector<LayerClaim> layers) {
            RuleCoverage c;
            c.rule_id = BW_NO_RULE;
            c.kind = std::move(kind);
            c.text = std::move(text);
            c.layers = std::move(layers);
            c.unenforceable_run = opted;
            out.push_back(std::move(c));
        };
        // A tool that may make unix sockets connects (or sends) only to the
        // addresses its network.unix rules name: a file grant on a socket's
        // path is no connect right. Where nothing holds that, every host
        // daemon's socket under a granted path is open to it.
        unix_default("network.unix.default_deny",
                     "network.unix: a connect or addressed send to a unix socket no rule names is refused "
                     "(a file grant is not a connect right)",
                     unix_claims());
        // And it binds only where its bind rules say: a create right is no
        // bind right, and an abstract name a host daemon uses is not its to take.
        const bool seccomp_bind = bind_refused_by_seccomp(b);
        unix_default("network.unix.path_bind_default_deny",
                     "network.unix: binding a pathname unix socket no bind rule names is refused (a create right is "
                     "not a bind right; the sandbox's private /tmp excepted)",
                     unix_bind_claims(b, "", own_netns, seccomp_bind));
        unix_default("network.unix.abstract_bind_default_deny",
                     "network.unix: binding an abstract unix name no bind rule names is refused (no squatting on a "
                     "name a host daemon uses)",
                     unix_bind_claims(b, "@", own_netns, seccomp_bind));
    }
    return out;
}

}  // namespace bulwark::policy
