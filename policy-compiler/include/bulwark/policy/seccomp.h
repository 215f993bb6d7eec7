#pragma once
// The seccomp layer: a rule file's `syscalls:` section as a spec, compiled
// with libseccomp into one filter (arch check first, binary-tree optimised,
// calls of a compat ABI the spec does not accept (i386 through `int $0x80`)
// and of x32 answered with the violation action, an arch value of no ABI of
// the host kills the process, clone3 answered ENOSYS).
#include <cerrno>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <span>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "bulwark/policy/bundle.h"

namespace bulwark::policy {

struct SyscallArgCond {
    enum class Op : uint8_t { Eq, Ne, Lt, Le, Gt, Ge, MaskedEq };
    uint8_t index = 0;  // 0..5
    Op op = Op::Eq;
    uint64_t value = 0;
    uint64_t mask = 0;  // MaskedEq only
};

// action Errno with errno_value 0 means "the violation errno" (EPERM when the
// violation action is not Errno): an errno of 0 would fake success.
struct SyscallRule {
    std::string name;
    std::vector<SyscallArgCond> args;  // all must hold
    SeccompAction action = SeccompAction::Allow;
    uint16_t errno_value = 0;          // for SeccompAction::Errno
    uint32_t rule_id = 0;
};

struct SeccompSpec {
    enum class Baseline : uint8_t { Default, None, Imported };
    Baseline baseline = Baseline::Default;
    std::string import_name;            // file the imported profile came from
    std::vector<SyscallRule> imported;  // Imported: the profile's allow rules
    std::vector<SyscallRule> allow;
    std::vector<SyscallRule> deny;      // win over allow and baseline
    SeccompAction violation = SeccompAction::Errno;
    uint16_t violation_errno = ENOSYS;
    uint32_t violation_rule_id = 0;
    // Compat ABIs accepted besides the native one, by name ("i386" on x86_64
    // hosts, "arm" on arm64 hosts): their calls are judged by the same rules.
    // A compat ABI not named here is refused: each of its calls answers the
    // violation action, or the action of a deny rule naming the call.
    std::vector<std::string> compat_arches;
    // The socket families socket(2) and socketpair(2) may create
    // (network.families; nullopt: the syscall rules alone decide). Each
    // allow of either call is narrowed to these families; a family the list
    // leaves out answers socket_families_errno (EPERM: what the BPF LSM and
    // cgroup sock_create answer), or is logged when the violation action is log. The
    // cgroup sock_create program sees only inet sockets, so without BPF LSM
    // this is the one layer that holds a netlink, packet, vsock, ... family
    // out. On i386 the family sits behind socketcall's pointer: with a list,
    // a 32-bit program's socket and socketpair calls are refused outright.
    std::optional<std::vector<int>> socket_families;
    uint32_t socket_families_rule_id = 0;
    // With AF_NETLINK among socket_families: the netlink protocols
    // (argument 2) socket(2) may open (network.netlink; nullopt: any). The
    // rest answer socket_families_errno, traced to netlink_rule_id.
    std::optional<std::vector<int>> netlink_protocols;
    uint32_t netlink_rule_id = 0;
    uint16_t socket_families_errno = EPERM;
    // What an import changed or left out of the profile (capability-gated
    // rules, names this libseccomp does not know, ...), one sentence each.
    std::vector<std::string> notes;
};

struct SeccompError {
    uint32_t rule_id = 0;  // the rule at fault (0: the section as a whole)
    std::string message;
};

// Compiles the spec into a classic-BPF program covering x86_64, i386 and x32
// (on x86_64 hosts) or aarch64 and arm (on arm64 hosts). The rules apply to
// the native ABI and to the compat ABIs of spec.compat_arches; every other
// ABI of the host is refused (see SeccompSpec::compat_arches).
// Precedence: deny (strongest action first) > clone3 ENOSYS > allow >
// baseline > a socket family network.families leaves out > violation. Conditional denies are subtracted from the allows
// before libseccomp sees them; a syscall whose rules would need more than 32
// libseccomp rules is an error, and so is any program whose decisions differ
// (checked through the cBPF interpreter at every condition boundary) from
// what was asked. On i386 a deny of a socket/IPC call applies whatever its
// arguments (libseccomp also emits the socketcall/ipc form without them).
// Install with no_new_privs; add SECCOMP_FILTER_FLAG_LOG to have the kernel
// log non-allow decisions.
std::expected<SeccompPlan, SeccompError> compile_seccomp(const SeccompSpec& spec);

// One rule of the filter after precedence is settled (deny > clone3 ENOSYS >
// allow > baseline): rules of one syscall with different actions never
// overlap, and a rule whose action is the violation action is left out (the
// default says so). resolve_seccomp_rules compiles the spec and returns the
// rules in the form compile_seccomp verified (for a syscall libseccomp built
// wrongly from them as precedence leaves them, cut apart so that no two
// overlap at all): a runtime's libseccomp is handed what was checked.
struct ResolvedSyscallRule {
    std::string name;
    std::vector<SyscallArgCond> args;  // all must hold
    SeccompAction action = SeccompAction::Allow;
    uint16_t errno_value = 0;          // SeccompAction::Errno
    uint32_t rule_id = 0;
};
std::expected<std::vector<ResolvedSyscallRule>, SeccompError> resolve_seccomp_rules(const SeccompSpec& spec);

// A compiled filter narrowed to the socket families of af_allow: socket(2)
// and socketpair(2) of the native ABI in any other family (or with a family
// argument whose upper half is set) answer EPERM, or are logged when audit;
// every other call goes to the filter unchanged. For a task's grant that
// takes families away (the tool's spec is not in its bundle); compat ABIs
// need nothing more: a compiled filter with network.families refuses their
// socket calls already.
std::expected<std::vector<sock_filter>, SeccompError> narrow_socket_families(std::span<const sock_filter> prog,
                                                                             uint64_t af_allow, bool audit);

// The spec as an OCI runtime-spec `linux.seccomp` object (what runc and crun
// load with their libseccomp): defaultAction (and defaultErrnoRet) from the
// violation action, the native architecture and the compat ABIs the spec
// accepts (every other ABI falls to the runtime's bad-arch action, a refusal),
// and resolve_seccomp_rules() one OCI rule each. The native decisions equal
// compile_seccomp()'s program (tests/unit: both run through the cBPF
// interpreter over every known syscall).
std::expected<nlohmann::json, SeccompError> export_oci_seccomp(const SeccompSpec& spec);

// The compat ABIs `syscalls.architectures` may name, on any host Bulwark
// supports ("arm", "i386"), and those of this host (a subset).
const std::vector<std::string>& compat_arch_names();
const std::vector<std::string>& host_compat_arch_names();
// Name of the ABI of an AUDIT_ARCH_* value as the rule language writes it:
// "native" for the host's own, "i386"/"arm" for a compat ABI, "" otherwise.
std::string_view arch_name(uint32_t audit_arch);
// The reverse, for this host: "native" or one of host_compat_arch_names().
std::optional<uint32_t> audit_arch_of(std::string_view name);

// Syscall names libseccomp knows for any supported arch, sorted.
const std::vector<std::string>& known_syscalls();
bool is_known_syscall(std::string_view name);

// The syscalls Docker's default profile allows unconditionally, and its
// conditional rules, as a spec baseline.
std::vector<SyscallRule> docker_default_rules();

// Docker / OCI runtime-spec seccomp profile JSON -> spec with Baseline::Imported.
std::expected<SeccompSpec, SeccompError> import_seccomp_profile(std::string_view json,
                                                                std::string name);

}  // namespace bulwark::policy
