#include "sandbox/self_privilege.h"

#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/capability.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "bulwark/policy/cbpf.h"
#include "bulwark/policy/compiler.h"
#include "bulwark/policy/explain.h"
#include "bulwark/policy/seccomp.h"
#include "bulwark/policy/values.h"

namespace bulwark {

namespace {

// What agentd keeps, and why. Read from what it does, then checked against
// every capability check the kernel made for agentd's process tree (the
// capability:cap_capable tracepoint: agentd's threads and its sandbox
// children before exec, checks against the host's user namespace) while
// the daemon's tiers and a serve scenario ran; docs/agentd-privilege.md,
// "How the lists were found". Not kept, because a sandbox's user namespace
// is owned by agentd (root), which therefore holds every capability inside
// it without holding it on the host: CAP_KILL (signalling a tool) and
// CAP_SETPCAP (the child empties its own sets; agentd's own drop uses it
// before it goes). CAP_FSETID was consulted only by chmod calls that set no
// set-id bit.
constexpr KeptCapability kKept[] = {
    {CAP_CHOWN, "cap_chown",
     "task work directories and the working files written into them are handed to the sandbox uid (chown, fchownat)"},
    {CAP_DAC_OVERRIDE, "cap_dac_override",
     "the sandbox uid's files and 0700 directories in task work directories are read (outputs, explanations), "
     "written (working files) and removed with the task"},
    {CAP_DAC_READ_SEARCH, "cap_dac_read_search",
     "open_by_handle_at on the cgroup mount: whether a bound cgroup still exists, by its id, when the bindings a "
     "dead agentd left are reaped"},
    {CAP_FOWNER, "cap_fowner", "modes of the sandbox uid's files and directories are set (chmod after chown)"},
    {CAP_SETGID, "cap_setgid", "a sandbox's gid_map maps the sandbox gid (the parent writes it)"},
    {CAP_SETUID, "cap_setuid", "a sandbox's uid_map maps the sandbox uid (the parent writes it)"},
    {CAP_NET_ADMIN, "cap_net_admin",
     "cgroup socket programs (sock_addr, sock_unix) attached; pooled network namespaces' loopback brought up"},
    {CAP_NET_RAW, "cap_net_raw",
     "the BPF truth check opens a raw socket the cgroup sock_create program must refuse: without the capability the "
     "kernel would refuse it first and the check could not tell"},
    {CAP_SYS_PTRACE, "cap_sys_ptrace",
     "/proc/<pid>/fd of every process is read to find who holds the pinned BPF maps (a pin root in use is never "
     "replaced); a process holding capabilities agentd does not is otherwise unreadable"},
    {CAP_SYS_ADMIN, "cap_sys_admin",
     "namespaces made in the host's user namespace (the canary, pooled network namespaces, setns into them for "
     "clone3), bpffs mounted when absent, BPF programs, and this process's own seccomp filter (no no_new_privs)"},
    {CAP_AUDIT_WRITE, "cap_audit_write",
     "the kernel audit source's barrier: a user message whose return marks a run's records as all read"},
    {CAP_AUDIT_CONTROL, "cap_audit_control",
     "the kernel audit source: AUDIT_GET and AUDIT_SET (audit enabled when it was off) on NETLINK_AUDIT"},
    {CAP_AUDIT_READ, "cap_audit_read", "the kernel audit source: the NETLINK_AUDIT multicast group (AUDIT_NLGRP_READLOG)"},
    {CAP_PERFMON, "cap_perfmon", "BPF tracing and LSM programs loaded and attached (raw tracepoints, the monitor)"},
    {CAP_BPF, "cap_bpf", "BPF programs and maps: loaded, pinned, re-adopted from the pin root, the maps updated per run"},
};

constexpr uint64_t bit(int c) { return uint64_t{1} << c; }

std::string errstr(const std::string& what) { return what + ": " + std::strerror(errno); }

int last_cap() {
    std::ifstream in("/proc/sys/kernel/cap_last_cap");
    int v = -1;
    in >> v;
    return v > 0 && v < 64 ? v : 63;
}

nlohmann::json sets_json(const ProcCredentials& c) {
    return {{"effective", capability_names(c.effective)},     {"permitted", capability_names(c.permitted)},
            {"inheritable", capability_names(c.inheritable)}, {"bounding", capability_names(c.bounding)},
            {"ambient", capability_names(c.ambient)},         {"no_new_privs", c.no_new_privs},
            {"seccomp", c.seccomp},                           {"seccomp_filters", c.seccomp_filters}};
}

}  // namespace

std::span<const KeptCapability> kept_capabilities() { return kKept; }

uint64_t kept_capability_mask() {
    uint64_t m = 0;
    for (const auto& k : kKept) m |= bit(k.cap);
    return m;
}

std::expected<ProcCredentials, std::string> read_proc_credentials(const std::string& status_path) {
    std::ifstream in(status_path);
    if (!in) return std::unexpected(errstr("open " + status_path));
    ProcCredentials c;
    int seen = 0;
    std::string line;
    auto hex = [&](const std::string& v, uint64_t& out) {
        out = std::stoull(v, nullptr, 16);
        ++seen;
    };
    while (std::getline(in, line)) {
        auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string key = line.substr(0, colon);
        std::string v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        try {
            if (key == "CapInh") hex(v, c.inheritable);
            else if (key == "CapPrm") hex(v, c.permitted);
            else if (key == "CapEff") hex(v, c.effective);
            else if (key == "CapBnd") hex(v, c.bounding);
            else if (key == "CapAmb") hex(v, c.ambient);
            else if (key == "NoNewPrivs") c.no_new_privs = std::stoi(v);
            else if (key == "Seccomp") c.seccomp = std::stoi(v);
            else if (key == "Seccomp_filters") c.seccomp_filters = std::stoi(v);
        } catch (const std::exception&) {
            return std::unexpected(status_path + ": field " + key + ": not a number: '" + v + "'");
        }
    }
    if (seen != 5) return std::unexpected(status_path + ": the five Cap* lines are not all there");
    return c;
}

std::vector<std::string> capability_names(uint64_t mask) {
    std::vector<std::string> out;
    for (int c = 0; c < 64; ++c) {
        if (!(mask & bit(c))) continue;
        char* n = cap_to_name(static_cast<cap_value_t>(c));
        out.emplace_back(n ? n : std::to_string(c));
        cap_free(n);
    }
    return out;
}

std::expected<CapabilityDrop, std::string> drop_own_capabilities() {
    CapabilityDrop d;
    auto before = read_proc_credentials("/proc/self/status");
    if (!before) return std::unexpected(before.error());
    d.before = *before;
    const uint64_t keep = kept_capability_mask();
    if (d.before.permitted == 0 && d.before.ambient == 0) {
        // Without privilege there is nothing to give up, and no CAP_SETPCAP
        // to shrink the bounding set with (what it still lists cannot be
        // gained: no file capabilities or setuid programs are ever run).
        d.skipped = "agentd holds no capabilities";
        d.after = d.before;
        return d;
    }
    if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0)
        return std::unexpected(errstr("prctl(PR_CAP_AMBIENT_CLEAR_ALL)"));
    // The bounding set first: it needs CAP_SETPCAP in the effective set,
    // which goes with the rest right after.
    for (int c = 0; c <= last_cap(); ++c) {
        if ((keep & bit(c)) || !(d.before.bounding & bit(c))) continue;
        if (::prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0)
            return std::unexpected(errstr("prctl(PR_CAPBSET_DROP, " + capability_names(bit(c)).front() + ")"));
    }
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    const uint64_t now = d.before.permitted & keep;  // a capability not held cannot be added
    data[0].permitted = data[0].effective = static_cast<uint32_t>(now);
    data[1].permitted = data[1].effective = static_cast<uint32_t>(now >> 32);
    if (::syscall(SYS_capset, &hdr, data) != 0) return std::unexpected(errstr("capset(the kept set)"));
    auto after = read_proc_credentials("/proc/self/status");
    if (!after) return std::unexpected(after.error());
    d.after = *after;
    // The sets as the kernel shows them, not as asked for.
    const uint64_t over = (d.after.bounding | d.after.permitted | d.after.effective) & ~keep;
    if (over || d.after.inheritable || d.after.ambient)
        return std::unexpected("capabilities still held after the drop: bounding " +
                               std::to_string(d.after.bounding) + ", permitted " + std::to_string(d.after.permitted) +
                               ", inheritable " + std::to_string(d.after.inheritable) + ", ambient " +
                               std::to_string(d.after.ambient));
    return d;
}

std::expected<SelfFilter, std::string> load_self_filter(const std::string& bundle_path) {
    std::ifstream in(bundle_path, std::ios::binary);
    if (!in) return std::unexpected(errstr("open " + bundle_path));
    std::stringstream ss;
    ss << in.rdbuf();
    auto j = nlohmann::json::parse(ss.str(), nullptr, false);
    if (j.is_discarded()) return std::unexpected(bundle_path + ": not JSON (a bundle written by `policyc compile`)");
    auto b = policy::bundle_from_json(j);
    if (!b) return std::unexpected(bundle_path + ": " + b.error());
    if (b->seccomp.program.empty()) return std::unexpected(bundle_path + ": the bundle carries no seccomp program");
    if (b->seccomp.program.size() > BPF_MAXINSNS)
        return std::unexpected(bundle_path + ": seccomp program of " + std::to_string(b->seccomp.program.size()) +
                               " instructions; the kernel takes at most " + std::to_string(BPF_MAXINSNS));
    SelfFilter f;
    f.path = bundle_path;
    f.tool = b->tool;
    f.hash = b->hash;
    f.baseline = b->seccomp.baseline;
    f.program = std::move(b->seccomp.program);
    f.allowed = b->seccomp.syscall_rules.size();
    return f;
}

namespace {

// "file:line:col: text"
std::string located(const policy::RuleRef& r) {
    return r.loc.text() + ": " + r.text;
}

// The tool's rule written as `text` (the last, where extends repeat it), or none.
const policy::RuleRef* written_as(const policy::Bundle& tool, const std::string& text) {
    const policy::RuleRef* found = nullptr;
    for (const auto& ref : tool.rules)
        if (ref.text == text) found = &ref;
    return found;
}

}  // namespace

std::vector<OwnFilterRefusal> refused_by_own_filter(const SelfFilter& f, const policy::Bundle& tool) {
    std::vector<OwnFilterRefusal> out;
    const auto native = policy::audit_arch_of("native");
    if (!native || tool.seccomp.program.empty()) return out;
    const std::map<std::string, uint32_t> rule_of(tool.seccomp.syscall_rules.begin(),
                                                  tool.seccomp.syscall_rules.end());
    const auto allows = [](uint32_t ret) {
        const uint32_t a = policy::seccomp_ret_action(ret);
        return a == SECCOMP_RET_ALLOW || a == SECCOMP_RET_LOG;
    };
    for (const auto& name : policy::known_syscalls()) {
        const int nr = seccomp_syscall_resolve_name(name.c_str());
        if (nr < 0) continue;  // not a syscall of this ABI
        seccomp_data d{};
        d.nr = nr;
        d.arch = *native;
        if (!allows(policy::run_seccomp_filter(tool.seccomp.program, d)) ||
            allows(policy::run_seccomp_filter(f.program, d)))
            continue;
        OwnFilterRefusal r{name, "baseline " + tool.seccomp.baseline};
        if (auto it = rule_of.find(name); it != rule_of.end())
            if (const auto* ref = tool.rule(it->second)) r.rule = located(*ref);
        out.push_back(std::move(r));
    }
    // The socket families: the tool's filter narrows socket(2) to its
    // network.families, agentd's to its own.
    for (const char* call : {"socket", "socketpair"}) {
        const uint64_t refused = policy::socket_families_through(tool.seccomp.program, call) &
                                 ~policy::socket_families_through(f.program, call);
        for (uint32_t family = 0; family < 64; ++family) {
            if (!((refused >> family) & 1)) continue;
            const std::string name = policy::family_names(uint64_t{1} << family);
            OwnFilterRefusal r{std::string(call) + "(" + name + ")", "network.families"};
            if (const auto* ref = written_as(tool, "network.families: " + name)) r.rule = located(*ref);
            out.push_back(std::move(r));
        }
    }
    // The netlink protocols: the tool's network.netlink (or every protocol),
    // agentd's own list.
    const uint32_t nl_refused = policy::netlink_protocols_through(tool.seccomp.program) &
                                ~policy::netlink_protocols_through(f.program);
    for (const auto& [name, proto] : policy::netlink_protocols()) {
        if (!((nl_refused >> proto) & 1)) continue;
        OwnFilterRefusal r{"socket(netlink " + name + ")", "network.families: netlink"};
        // the protocol's own rule, else the family's
        const policy::RuleRef* by = written_as(tool, "network.netlink: " + name);
        if (!by) by = written_as(tool, "network.families: netlink");
        if (by) r.rule = located(*by);
        out.push_back(std::move(r));
    }
    return out;
}

std::string own_filter_warning(const SelfFilter& f, const std::string& tool_name, const policy::Bundle& tool) {
    std::string list;
    for (const auto& r : refused_by_own_filter(f, tool))
        list += (list.empty() ? "" : "; ") + r.syscall + " (" + r.rule + ")";
    if (list.empty()) return list;
    return "tool " + tool_name + ": its rules allow syscalls agentd's own seccomp filter (" + f.tool +
           ") refuses, which answer errno 131 (a socket family: EPERM) in its runs: " + list;
}

std::expected<void, std::string> install_self_filter(const SelfFilter& f) {
    sock_fprog prog{static_cast<unsigned short>(f.program.size()), const_cast<sock_filter*>(f.program.data())};
    long r = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC | SECCOMP_FILTER_FLAG_LOG, &prog);
    if (r < 0) return std::unexpected(errstr("seccomp(SECCOMP_SET_MODE_FILTER, TSYNC|LOG, " + f.path + ")"));
    if (r > 0)
        return std::unexpected("seccomp(TSYNC, " + f.path + "): thread " + std::to_string(r) +
                               " could not take the filter");
    return {};
}

nlohmann::json own_privilege_json(const CapabilityDrop* drop, const SelfFilter* filter) {
    nlohmann::json kept = nlohmann::json::array();
    for (const auto& k : kKept) kept.push_back({{"name", k.name}, {"why", k.why}});
    nlohmann::json out{{"kept", std::move(kept)}};
    if (auto now = read_proc_credentials("/proc/self/status"))
        out["now"] = sets_json(*now);
    else
        out["now"] = {{"error", now.error()}};
    if (drop) {
        out["dropped"] = capability_names(drop->before.bounding & ~drop->after.bounding);
        if (!drop->skipped.empty()) out["drop_skipped"] = drop->skipped;
    }
    if (filter)
        out["seccomp_filter"] = {{"bundle", filter->path},
                                 {"tool", filter->tool},
                                 {"hash", filter->hash},
                                 {"baseline", filter->baseline},
                                 {"instructions", filter->program.size()},
                                 {"named_syscalls", filter->allowed}};
    else
        out["seccomp_filter"] = nullptr;
    return out;
}

}  // namespace bulwark
