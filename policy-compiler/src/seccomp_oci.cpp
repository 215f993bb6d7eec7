// export_oci_seccomp(): a `syscalls:` spec as an OCI runtime-spec
// `linux.seccomp` object, the resolved rules one OCI rule each.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "bulwark/policy/seccomp.h"
#include "seccomp_internal.h"

namespace bulwark::policy {
namespace {

using nlohmann::json;

std::string oci_action(SeccompAction a) {
    switch (a) {
        case SeccompAction::Allow: return "SCMP_ACT_ALLOW";
        case SeccompAction::Errno: return "SCMP_ACT_ERRNO";
        case SeccompAction::Kill: return "SCMP_ACT_KILL_PROCESS";
        case SeccompAction::Log: return "SCMP_ACT_LOG";
        case SeccompAction::Trap: return "SCMP_ACT_TRAP";
    }
    return "SCMP_ACT_KILL_PROCESS";
}

std::string oci_op(SyscallArgCond::Op op) {
    using Op = SyscallArgCond::Op;
    switch (op) {
        case Op::Eq: return "SCMP_CMP_EQ";
        case Op::Ne: return "SCMP_CMP_NE";
        case Op::Lt: return "SCMP_CMP_LT";
        case Op::Le: return "SCMP_CMP_LE";
        case Op::Gt: return "SCMP_CMP_GT";
        case Op::Ge: return "SCMP_CMP_GE";
        case Op::MaskedEq: return "SCMP_CMP_MASKED_EQ";
    }
    return "SCMP_CMP_EQ";
}

std::string oci_arch(uint32_t token) {
    switch (token) {
        case SCMP_ARCH_X86_64: return "SCMP_ARCH_X86_64";
        case SCMP_ARCH_X86: return "SCMP_ARCH_X86";
        case SCMP_ARCH_AARCH64: return "SCMP_ARCH_AARCH64";
        case SCMP_ARCH_ARM: return "SCMP_ARCH_ARM";
    }
    return "";
}

}  // namespace

std::expected<json, SeccompError> export_oci_seccomp(const SeccompSpec& spec) {
    // The runtime's libseccomp also emits a 32-bit socket call through
    // socketcall, whose family it cannot read; compile_seccomp refuses those
    // calls on i386, which the OCI format (one rule list for every arch)
    // cannot say.
    if (spec.socket_families && std::ranges::find(spec.compat_arches, "i386") != spec.compat_arches.end())
        return std::unexpected(SeccompError{
            spec.socket_families_rule_id,
            "the OCI runtime's filter cannot hold network.families for i386 programs (socketcall hides the "
            "family): leave i386 out of syscalls.architectures"});
    auto rules = resolve_seccomp_rules(spec);
    if (!rules) return std::unexpected(rules.error());
    json out = json::object();
    out["defaultAction"] = oci_action(spec.violation);
    if (spec.violation == SeccompAction::Errno) out["defaultErrnoRet"] = spec.violation_errno;
    json arches = json::array();
    for (const auto& a : detail::filter_arches()) {
        const bool accepted = a.role == detail::ArchRole::Native ||
                              (a.role == detail::ArchRole::Compat &&
                               std::ranges::find(spec.compat_arches, a.name) != spec.compat_arches.end());
        if (accepted && !oci_arch(a.token).empty()) arches.push_back(oci_arch(a.token));
    }
    out["architectures"] = std::move(arches);
    json syscalls = json::array();
    for (const auto& r : *rules) {
        json rule = {{"names", json::array({r.name})}, {"action", oci_action(r.action)}};
        if (r.action == SeccompAction::Errno) rule["errnoRet"] = r.errno_value;
        if (!r.args.empty()) {
            json args = json::array();
            for (const auto& c : r.args) {
                const bool masked = c.op == SyscallArgCond::Op::MaskedEq;
                // runc and crun: value is libseccomp's datum_a (the mask of a masked compare)
                args.push_back({{"index", c.index},
                                {"value", masked ? c.mask : c.value},
                                {"valueTwo", masked ? c.value : 0},
                                {"op", oci_op(c.op)}});
            }
            rule["args"] = std::move(args);
        }
        syscalls.push_back(std::move(rule));
    }
    out["syscalls"] = std::move(syscalls);
    return out;
}

}  // namespace bulwark::policy
