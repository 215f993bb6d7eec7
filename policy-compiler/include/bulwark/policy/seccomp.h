#pragma once
// The seccomp layer: a rule file's `syscalls:` section as a spec, compiled
// with libseccomp into one filter (arch check first, binary-tree optimised,
// x32 syscalls answered with the violation action, a foreign arch kills the
// process, clone3 answered ENOSYS).
#include <cerrno>
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

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
    // What an import changed or left out of the profile (capability-gated
    // rules, names this libseccomp does not know, ...), one sentence each.
    std::vector<std::string> notes;
};

struct SeccompError {
    uint32_t rule_id = 0;  // the rule at fault (0: the section as a whole)
    std::string message;
};

// Compiles the spec into a classic-BPF program covering x86_64, i386 and x32
// (on x86_64 hosts) or aarch64 and arm (on arm64 hosts).
std::expected<SeccompPlan, SeccompError> compile_seccomp(const SeccompSpec& spec);

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
