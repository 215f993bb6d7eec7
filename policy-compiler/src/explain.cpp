#include "bulwark/policy/explain.h"

#include <sys/socket.h>

#include <algorithm>
#include <sstream>

#include "bulwark/policy/values.h"
#include "bulwark/policy/coverage.h"
#include "seccomp_internal.h"

namespace bulwark::policy {
namespace {

// Pads s to a column of width w; a longer value keeps the next column aligned
// by continuing on a new line.
std::string pad(std::string s, size_t w, size_t indent = 2) {
    if (s.size() < w) return s + std::string(w - s.size(), ' ');
    return s + "\n" + std::string(indent + w, ' ');
}

std::string rights(uint32_t bits) {
    if (!bits) return "-";
    return bits == BW_FS_ALL ? "all" : rights_to_string(bits);
}

}  // namespace

std::string architectures_text(const Bundle& b) {
    std::string accepted = "native", where, no_effect;
    for (const auto& [name, id] : b.syscalls.architectures) {
        if (name == "native") continue;
        const auto& host = host_compat_arch_names();
        if (std::ranges::find(host, name) == host.end()) {
            no_effect += (no_effect.empty() ? "" : ", ") + name;
            continue;
        }
        accepted += ", " + name;
        where += (where.empty() ? "" : ", ") + rule_where(b, id);
    }
    std::string refused;
    for (const auto& a : detail::filter_arches()) {
        if (a.role == detail::ArchRole::Native) continue;
        if (std::ranges::find(b.seccomp.arches, a.audit_arch) != b.seccomp.arches.end() &&
            a.role == detail::ArchRole::Compat)
            continue;
        refused += (refused.empty() ? "" : ", ") + std::string(a.name);
    }
    std::string out = "architectures: " + accepted + (where.empty() ? "" : " (" + where + ")");
    if (!refused.empty())
        out += "; calls through " + refused + " are refused (the violation action; deny rules keep theirs)";
    if (!no_effect.empty()) out += "; listed, not an ABI of this host: " + no_effect;
    return out;
}

std::string explain_text(const Bundle& b) {
    std::ostringstream o;
    o << "policy " << b.tool << " (" << (b.mode == Mode::Audit ? "audit: denials are recorded, then allowed" : "enforce")
      << ")\n";
    if (!b.description.empty()) o << "  " << b.description << "\n";
    if (!b.extends.empty()) {
        o << "  extends:";
        for (const auto& e : b.extends) o << " " << e;
        o << "\n";
    }
    o << "  mandatory layers: ";
    if (b.mandatory_layers.empty()) o << "none (the run proceeds on the layers the host has)";
    for (size_t i = 0; i < b.mandatory_layers.size(); ++i) o << (i ? ", " : "") << b.mandatory_layers[i];
    o << "\n  hash: " << b.hash << "\n\n";

    o << "binaries (supervisor checks what the tool is started as)\n";
    if (b.binaries.empty()) o << "  (none listed)\n";
    for (const auto& x : b.binaries)
        o << "  " << pad(x.path, 40) << (x.sha256 ? "sha256 " + x.sha256->substr(0, 16) + "..." : "any content") << "\n";

    o << "\nfiles (BPF LSM, Landlock)";
    bool files = b.bpf.header.flags & BW_POL_FILES_ENFORCED;
    bool exec = b.bpf.header.flags & BW_POL_EXEC_ENFORCED;
    o << (files ? ": everything not listed is denied\n" : ": no file rules, file access is not restricted\n");
    if (!b.bpf.files.empty()) {
        o << "  " << pad("path", 40) << pad("allow", 28) << pad("deny", 28) << "rule\n";
        for (const auto& f : b.bpf.files) {
            uint32_t rule = f.value.allow_rule_id != BW_NO_RULE ? f.value.allow_rule_id : f.value.deny_rule_id;
            o << "  " << pad(f.path, 40) << pad(rights(f.value.allow), 28)
              << pad(rights(f.value.deny), 28) << rule_where(b, rule) << "\n";
        }
    }
    o << "\nexec (BPF LSM, Landlock): "
      << (exec ? "only paths with the exec right may be executed\n"
               : files ? "paths with the exec right (files.exec)\n" : "not restricted\n");

    o << "\nnetwork (network namespace, cgroup sock_addr and sock_create, Landlock TCP ports)\n";
    const auto& n = b.network;
    o << "  mode: " << (n.mode == NetMode::None ? "none" : n.mode == NetMode::Loopback ? "loopback only" : "rules")
      << "; socket families: " << family_names(n.af_allow);
    if (n.af_allow & (uint64_t{1} << AF_NETLINK)) {
        o << "; netlink protocols: ";
        if (!n.netlink_allow) {
            o << "every one";
        } else {
            std::string list;
            for (const auto& [name, proto] : netlink_protocols())
                if ((*n.netlink_allow >> proto) & 1) list += (list.empty() ? "" : ", ") + name;
            o << (list.empty() ? "none" : list);
        }
    }
    o << "\n";
    for (const auto& r : n.rules) o << "  " << pad(format_net_rule(r), 64) << rule_where(b, r.rule_id) << "\n";
    if (!n.dns.empty()) {
        o << "  dns resolvers:";
        for (const auto& d : n.dns) o << " " << d;
        o << "\n";
    }
    if (n.mode == NetMode::Rules) o << "  anything not allowed is denied; deny rules override allows\n";

    o << "\nunix sockets (" << kUnixRuleLayers << ")\n";
    if (n.unix_rules.empty())
        o << "  no unix rule: every connect or addressed send to a named unix socket is refused (socketpair is not "
             "affected), and every bind but in the private /tmp\n";
    for (const auto& u : n.unix_rules) {
        const std::string ops = net_ops_to_string(u.op_mask, "+");
        std::string what = u.address.starts_with("@") ? "abstract name " + u.address
                           : u.address.ends_with("/") ? "every socket below " + u.address
                                                      : "socket " + u.address;
        o << "  " << pad(ops + " " + what, 64) << rule_where(b, u.rule_id) << "\n";
    }
    if (!n.unix_rules.empty())
        o << "  judged on the address as written: relative paths, other spellings and \"..\" match no rule; a file "
             "grant is never a connect right, a create right never a bind right (binds: the BPF LSM's socket_bind; "
             "Landlock's make_sock per directory)\n";

    const auto& s = b.syscalls;
    o << "\nsyscalls (seccomp)\n  baseline: " << s.baseline << "; on violation: " << action_name(s.violation, s.violation_errno)
      << "\n";
    o << "  " << architectures_text(b) << "\n";
    if (!s.allow.empty()) {
        o << "  allow:";
        for (const auto& [name, _] : s.allow) o << " " << name;
        o << "\n";
    }
    if (!s.deny.empty()) {
        o << "  deny:";
        for (const auto& [name, _] : s.deny) o << " " << name;
        o << "\n";
    }
    o << "  filter: " << b.seccomp.program.size() << " instructions\n";

    const auto& L = b.limits;
    o << "\nlimits (cgroup, rlimits, supervisor)\n";
    bool any = false;
    auto line = [&](const char* name, const std::string& v) {
        o << "  " << pad(name, 12) << v << "\n";
        any = true;
    };
    if (L.memory_bytes) line("memory", format_size(*L.memory_bytes));
    if (L.pids) line("pids", std::to_string(*L.pids));
    if (L.cpu_percent) line("cpu", std::to_string(*L.cpu_percent) + "% of one CPU");
    if (L.timeout_ms) line("timeout", format_duration(*L.timeout_ms));
    if (L.output_bytes) line("output", format_size(*L.output_bytes));
    if (L.file_size_bytes) line("file_size", format_size(*L.file_size_bytes));
    if (L.open_files) line("open_files", std::to_string(*L.open_files));
    if (!any) o << "  (none)\n";

    if (!b.microvm.rule_ids.empty()) {
        const auto& m = b.microvm;
        static constexpr const char* kModes[] = {"off", "preferred", "required"};
        o << "\nmicrovm (a VM of its own; docs/microvm.md)\n  " << pad("mode", 12) << kModes[int(m.mode)] << "\n";
        if (m.mode != MicroVmMode::Off)
            o << "  " << pad("memory", 12) << format_size(m.memory_bytes) << "\n  " << pad("vcpus", 12) << m.vcpus
              << "\n";
        if (m.confidential) o << "  " << pad("confidential", 12) << "required (a TDX, SEV-SNP or CCA guest)\n";
    }

    if (b.profile.enabled) {
        const auto& p = b.profile;
        o << "\nprofile (agentd serve: each run scored against the tool's usual behaviour; docs/profiles.md)\n  "
          << pad("learn", 12) << p.learn_runs << " runs\n  ";
        if (p.task_learn_runs)
            o << pad("task_learn", 12) << p.task_learn_runs
              << " runs of the tool in one task, then the task's own profile scores too\n  ";
        o << pad("respond", 12) << response_name(p.respond)
          << "\n  observes    allowed decisions and process exec/fork/exit (BPF)\n";
    }

    const auto& h = b.hardening;
    o << "\nhardening (supervisor at launch)\n  mte: "
      << (h.mte == MteMode::Off ? "off" : h.mte == MteMode::Async ? "async" : "sync") << "\n";
    std::string req, warn;
    for (const auto& [p, r] : h.properties) (r == Requirement::Require ? req : warn) += " " + p;
    if (!req.empty()) o << "  require:" << req << "\n";
    if (!warn.empty()) o << "  warn:" << warn << "\n";
    if (h.disable_store_bypass || h.disable_indirect_branch)
        o << "  speculation:" << (h.disable_store_bypass ? " store_bypass disabled" : "")
          << (h.disable_indirect_branch ? " indirect_branch disabled" : "") << "\n";

    o << "\nenvironment (supervisor)\n  " << (b.env.clear_all ? "starts empty" : "inherits the caller's environment")
      << "\n";
    if (!b.env.pass.empty()) {
        o << "  pass:";
        for (const auto& p : b.env.pass) o << " " << p;
        o << "\n";
    }
    for (const auto& [k, v] : b.env.set) o << "  set " << k << "=" << v << "\n";

    o << "\nLandlock: " << b.landlock.paths.size() << " path rules, " << b.landlock.ports.size() << " port rules\n";
    if (b.landlock.gaps.empty()) o << "  no gaps: Landlock expresses every file and TCP rule\n";
    for (const auto& g : b.landlock.gaps) o << "  gap: " << g << "\n";
    o << "\n" << coverage_text(b);
    return o.str();
}

std::string coverage_text(const Bundle& b, const std::vector<std::string>* in_force) {
    std::ostringstream o;
    o << "rules and the layers that hold each one";
    if (in_force) {
        o << " (in force here:";
        for (const auto& l : *in_force) o << " " << l;
        o << ")";
    }
    o << "\n";
    size_t unheld = 0, opted = 0;
    for (const auto& c : rule_coverage(b)) {
        const RuleRef* r = b.rule(c.rule_id);
        o << "  " << (r ? r->loc.text() : "-")
          << " " << (r ? r->text : !c.text.empty() ? c.text : c.kind) << "\n      can be held by: ";
        if (c.layers.empty()) o << "no layer holds a rule of kind " << c.kind;
        std::vector<std::string> here;
        for (size_t i = 0; i < c.layers.size(); ++i) {
            const auto& l = c.layers[i];
            o << (i ? " | " : "") << l.layer;
            if (!l.how.empty()) o << " (" << l.how << ")";
            if (in_force && std::find(in_force->begin(), in_force->end(), l.layer) != in_force->end())
                here.push_back(l.layer);
        }
        if (in_force) {
            if (here.empty()) {
                ++unheld;
                opted += c.unenforceable_run;
                o << "\n      NOT HELD HERE" << (c.unenforceable_run ? " (unenforceable: run: the tool starts anyway)"
                                                                     : ": agentd refuses to start the tool");
            } else {
                o << "\n      held here by:";
                for (const auto& h : here) o << " " << h;
            }
        } else if (c.unenforceable_run) {
            o << "\n      unenforceable: run";
        }
        o << "\n";
    }
    if (in_force) {
        o << "  " << unheld << " rule(s) held by no layer in force here";
        if (opted) o << " (" << opted << " marked unenforceable: run)";
        o << "\n";
    }
    return o.str();
}

std::string format_size(uint64_t b) {
    static constexpr std::pair<uint64_t, const char*> units[] = {
        {1ull << 40, "TiB"}, {1ull << 30, "GiB"}, {1ull << 20, "MiB"}, {1ull << 10, "KiB"}};
    for (auto [f, n] : units)
        if (b >= f && b % f == 0) return std::to_string(b / f) + n;
    return std::to_string(b) + "B";
}

std::string format_duration(uint64_t ms) {
    if (ms % 3600000 == 0) return std::to_string(ms / 3600000) + "h";
    if (ms % 60000 == 0) return std::to_string(ms / 60000) + "m";
    if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
    return std::to_string(ms) + "ms";
}

std::string format_net_rule(const NetRule& r) {
    std::string ops;
    if (r.op_mask & BW_NET_CONNECT) ops += "connect";
    if (r.op_mask & BW_NET_BIND) ops += std::string(ops.empty() ? "" : "+") + "bind";
    if (r.op_mask & BW_NET_SEND) ops += std::string(ops.empty() ? "" : "+") + "send";
    std::string proto = r.proto_mask == (BW_PROTO_TCP | BW_PROTO_UDP) ? "tcp+udp"
                        : r.proto_mask == BW_PROTO_TCP               ? "tcp"
                                                                     : "udp";
    std::string dest = r.host ? *r.host : format_cidr(r.addr, r.prefix);
    std::string ports = r.port_lo == 0 && r.port_hi == 65535 ? "all ports"
                        : r.port_lo == r.port_hi ? "port " + std::to_string(r.port_lo)
                                                 : "ports " + std::to_string(r.port_lo) + "-" + std::to_string(r.port_hi);
    return std::string(r.action == BW_NET_ACTION_DENY ? "deny " : "allow ") + ops + " " + proto + " " + dest + " " + ports;
}

std::string family_names(uint64_t af) {
    std::string s;
    for (const auto& [name, num] : socket_families())
        if (af & (uint64_t(1) << num)) s += (s.empty() ? "" : ", ") + name;
    return s.empty() ? "none" : s;
}

std::string action_name(SeccompAction a, uint16_t e) {
    switch (a) {
        case SeccompAction::Allow: return "allow";
        case SeccompAction::Errno: return "errno " + std::to_string(e);
        case SeccompAction::Kill: return "kill";
        case SeccompAction::Log: return "log";
        case SeccompAction::Trap: return "trap";
    }
    return "?";
}

std::string rule_where(const Bundle& b, uint32_t id) {
    const RuleRef* r = b.rule(id);
    if (!r || r->loc.line == 0) return "-";
    return r->loc.file + ":" + std::to_string(r->loc.line);
}

}  // namespace bulwark::policy
