#pragma once
// Helpers shared by the seccomp compiler, the profile importer and their
// tests: the arches a filter covers on this host, action encodings, and the
// i386 multiplexer tables.
#include <seccomp.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "bulwark/policy/seccomp.h"

namespace bulwark::policy::detail {

// How the filter treats one system call ABI of the host.
enum class ArchRole : uint8_t {
    Native,   // the host's own ABI: the rules apply
    Compat,   // a 32-bit ABI the kernel also runs (i386, arm): refused unless
              // `syscalls.architectures` lists it, then the rules apply
    Refused,  // always refused, every call answered with the violation action (x32)
};

struct FilterArch {
    uint32_t token;       // SCMP_ARCH_*
    uint32_t audit_arch;  // AUDIT_ARCH_* the kernel reports in seccomp_data.arch
    std::string_view name;  // as written in `syscalls.architectures` (compat ABIs)
    ArchRole role;
};

// x86_64 hosts: x86_64, i386 (compat), x32 (refused); aarch64 hosts:
// aarch64, arm (compat); anything else: the native arch alone.
std::span<const FilterArch> filter_arches();

// Go's name for the host arch ("amd64", "arm64", ...): what Docker profiles'
// includes/excludes.arches compare against.
std::string_view host_goarch();

// libseccomp action value for a spec action.
uint32_t scmp_action(SeccompAction action, uint16_t errno_value);

// Kernel precedence of actions when two would apply (higher wins).
int action_severity(SeccompAction action);

std::string_view action_name(SeccompAction action);

// On i386 the socket and SysV IPC calls are also reachable through the
// socketcall(2) and ipc(2) multiplexers; the call number is their first
// argument (ipc: its low 16 bits).
struct Multiplexed {
    std::string_view multiplexer;  // "socketcall" or "ipc"
    uint32_t call;
};
std::optional<Multiplexed> i386_multiplexed(std::string_view name);

}  // namespace bulwark::policy::detail
