// Host arch facts and action encodings for the seccomp layer.
#include <linux/audit.h>

#include <array>

#include "seccomp_internal.h"

namespace bulwark::policy::detail {

std::span<const FilterArch> filter_arches() {
    static constexpr std::array<FilterArch, 3> kX86{{
        {SCMP_ARCH_X86_64, AUDIT_ARCH_X86_64, "x86_64", ArchRole::Native},
        {SCMP_ARCH_X86, AUDIT_ARCH_I386, "i386", ArchRole::Compat},
        {SCMP_ARCH_X32, AUDIT_ARCH_X86_64, "x32", ArchRole::Refused},
    }};
    static constexpr std::array<FilterArch, 2> kArm{{
        {SCMP_ARCH_AARCH64, AUDIT_ARCH_AARCH64, "aarch64", ArchRole::Native},
        {SCMP_ARCH_ARM, AUDIT_ARCH_ARM, "arm", ArchRole::Compat},
    }};
    static const std::array<FilterArch, 1> kOther{{
        {seccomp_arch_native(), seccomp_arch_native(), "native", ArchRole::Native},
    }};
    switch (seccomp_arch_native()) {
        case SCMP_ARCH_X86_64: return kX86;
        case SCMP_ARCH_AARCH64: return kArm;
        default: return kOther;
    }
}

std::string_view host_goarch() {
    switch (seccomp_arch_native()) {
        case SCMP_ARCH_X86_64: return "amd64";
        case SCMP_ARCH_X86: return "386";
        case SCMP_ARCH_AARCH64: return "arm64";
        case SCMP_ARCH_ARM: return "arm";
        case SCMP_ARCH_PPC64LE: return "ppc64le";
        case SCMP_ARCH_S390X: return "s390x";
        case SCMP_ARCH_RISCV64: return "riscv64";
        default: return "unknown";
    }
}

uint32_t scmp_action(SeccompAction action, uint16_t errno_value) {
    switch (action) {
        case SeccompAction::Allow: return SCMP_ACT_ALLOW;
        case SeccompAction::Errno: return SCMP_ACT_ERRNO(errno_value);
        case SeccompAction::Kill: return SCMP_ACT_KILL_PROCESS;
        case SeccompAction::Log: return SCMP_ACT_LOG;
        case SeccompAction::Trap: return SCMP_ACT_TRAP;
    }
    return SCMP_ACT_KILL_PROCESS;
}

int action_severity(SeccompAction action) {
    switch (action) {
        case SeccompAction::Kill: return 4;
        case SeccompAction::Trap: return 3;
        case SeccompAction::Errno: return 2;
        case SeccompAction::Log: return 1;
        case SeccompAction::Allow: return 0;
    }
    return 4;
}

std::string_view action_name(SeccompAction action) {
    switch (action) {
        case SeccompAction::Allow: return "allow";
        case SeccompAction::Errno: return "errno";
        case SeccompAction::Kill: return "kill";
        case SeccompAction::Log: return "log";
        case SeccompAction::Trap: return "trap";
    }
    return "?";
}

std::optional<Multiplexed> i386_multiplexed(std::string_view name) {
    struct E { std::string_view name, mux; uint32_t call; };
    static constexpr E kTable[] = {
        {"socket", "socketcall", 1},       {"bind", "socketcall", 2},
        {"connect", "socketcall", 3},      {"listen", "socketcall", 4},
        {"accept", "socketcall", 5},       {"getsockname", "socketcall", 6},
        {"getpeername", "socketcall", 7},  {"socketpair", "socketcall", 8},
        {"send", "socketcall", 9},         {"recv", "socketcall", 10},
        {"sendto", "socketcall", 11},      {"recvfrom", "socketcall", 12},
        {"shutdown", "socketcall", 13},    {"setsockopt", "socketcall", 14},
        {"getsockopt", "socketcall", 15},  {"sendmsg", "socketcall", 16},
        {"recvmsg", "socketcall", 17},     {"accept4", "socketcall", 18},
        {"recvmmsg", "socketcall", 19},    {"sendmmsg", "socketcall", 20},
        {"semop", "ipc", 1},               {"semget", "ipc", 2},
        {"semctl", "ipc", 3},              {"semtimedop", "ipc", 4},
        {"msgsnd", "ipc", 11},             {"msgrcv", "ipc", 12},
        {"msgget", "ipc", 13},             {"msgctl", "ipc", 14},
        {"shmat", "ipc", 21},              {"shmdt", "ipc", 22},
        {"shmget", "ipc", 23},             {"shmctl", "ipc", 24},
    };
    for (const auto& e : kTable)
        if (e.name == name) return Multiplexed{e.mux, e.call};
    return std::nullopt;
}

}  // namespace bulwark::policy::detail

namespace bulwark::policy {

const std::vector<std::string>& compat_arch_names() {
    static const std::vector<std::string> names = {"arm", "i386"};
    return names;
}

const std::vector<std::string>& host_compat_arch_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        for (const auto& a : detail::filter_arches())
            if (a.role == detail::ArchRole::Compat) out.emplace_back(a.name);
        return out;
    }();
    return names;
}

std::string_view arch_name(uint32_t audit_arch) {
    for (const auto& a : detail::filter_arches()) {
        if (a.audit_arch != audit_arch) continue;
        if (a.role == detail::ArchRole::Native) return "native";
        if (a.role == detail::ArchRole::Compat) return a.name;
    }
    return "";
}

std::optional<uint32_t> audit_arch_of(std::string_view name) {
    for (const auto& a : detail::filter_arches()) {
        if (a.role == detail::ArchRole::Native && name == "native") return a.audit_arch;
        if (a.role == detail::ArchRole::Compat && name == a.name) return a.audit_arch;
    }
    return std::nullopt;
}

}  // namespace bulwark::policy
