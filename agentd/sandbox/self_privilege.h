#pragma once
// agentd's own privilege: the enforcement plane runs as root and parses
// untrusted input (HTTP, JSON, YAML, kernel audit records, ring-buffer
// events), so it keeps only what its work needs.
//
//  - Capabilities: the table below (kept_capabilities) names each capability
//    agentd keeps and why. drop_own_capabilities() runs first thing in
//    `agentd serve` and `agentd run`, before any thread exists (capability
//    sets are per thread; threads started later inherit the main thread's):
//    every other capability leaves the bounding set, then the permitted and
//    effective sets are cut to the table, the inheritable set emptied and the
//    ambient set cleared. CAP_SETPCAP, needed for the drop itself, is not in
//    the table: once it is gone the bounding set cannot change again.
//  - Seccomp: a filter of agentd's own, compiled by policyc from one rule file
//    (deploy/systemd/agentd-self.yaml), loaded as the compiled bundle and
//    installed on every thread (TSYNC) before the API serves its first
//    request. Like any seccomp filter it is inherited: every sandbox is
//    created under it, and a tool's own filter stacks on top.
#include <linux/filter.h>
#include <sys/types.h>

#include <cstdint>
#include <expected>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace bulwark {
namespace policy {
struct Bundle;
}

struct KeptCapability {
    int cap;                // CAP_* number
    std::string_view name;  // cap_sys_admin, as libcap and capsh spell it
    std::string_view why;   // what agentd does with it
};

// The table (docs/agentd-privilege.md repeats it; integration_privilege keeps the two equal).
std::span<const KeptCapability> kept_capabilities();
uint64_t kept_capability_mask();

// The capability sets, no_new_privs and seccomp mode of a process, as its
// /proc/<pid>/status says.
struct ProcCredentials {
    uint64_t inheritable = 0, permitted = 0, effective = 0, bounding = 0, ambient = 0;
    int no_new_privs = -1;
    int seccomp = -1;          // 0 off, 1 strict, 2 filter
    int seccomp_filters = -1;  // -1: the kernel does not say
};
std::expected<ProcCredentials, std::string> read_proc_credentials(const std::string& status_path);

// cap_sys_admin, ... for every bit of `mask` (numbers for bits libcap does not name).
std::vector<std::string> capability_names(uint64_t mask);

// What the drop did: the sets before and after, or why nothing was dropped
// (a process without privilege has nothing to give up).
struct CapabilityDrop {
    ProcCredentials before, after;
    std::string skipped;  // "" when the drop ran
};
// Fails (the caller does not start) when a capability outside the table
// cannot leave a set: a root agentd never runs with more than the table.
std::expected<CapabilityDrop, std::string> drop_own_capabilities();

// agentd's own seccomp filter: a policy bundle compiled by policyc (its
// `syscalls:` section is the filter), the program taken as compiled.
struct SelfFilter {
    std::string path;  // the bundle file
    std::string tool;  // the rule file's `tool:`
    std::string hash;  // the bundle's content hash
    std::string baseline;
    std::vector<sock_filter> program;
    size_t allowed = 0;  // syscall names the rules allow or deny by name
};
std::expected<SelfFilter, std::string> load_self_filter(const std::string& bundle_path);
// A tool's syscalls agentd's own filter refuses. The filter is inherited by
// every sandbox, so such a call answers its errno (131) whatever the tool's
// rules say: agentd-self.yaml lists what the shipped rules allow, and a
// site's own rule file may go beyond it. Each of the tool's native syscalls
// is run through both programs (the compiler's cBPF interpreter) with zero
// arguments; socket(2) and socketpair(2) also in each socket family the
// tool's filter lets through (agentd's answers EPERM for a family outside
// its network.families).
struct OwnFilterRefusal {
    std::string syscall;  // "ptrace", or "socket(packet)" for a family
    std::string rule;  // "file:line:col: <rule as written>", or "baseline <name>"
};
std::vector<OwnFilterRefusal> refused_by_own_filter(const SelfFilter& f, const policy::Bundle& tool);
// What `agentd serve` and `agentd run` say of them, one line for the tool
// ("" when the filter refuses none of its calls).
std::string own_filter_warning(const SelfFilter& f, const std::string& tool_name, const policy::Bundle& tool);

// Every thread of the process (SECCOMP_FILTER_FLAG_TSYNC), denials logged to
// kernel audit (SECCOMP_FILTER_FLAG_LOG). Needs CAP_SYS_ADMIN (kept) or
// no_new_privs.
std::expected<void, std::string> install_self_filter(const SelfFilter& f);

// /v1/health's host.hardening.privilege: the table, this process's sets as
// /proc/self/status shows them now, and its seccomp filter (or none).
nlohmann::json own_privilege_json(const CapabilityDrop* drop, const SelfFilter* filter);

}  // namespace bulwark
