// Placeholder for the seccomp filter emitter, which lands from its own
// branch; the merge deletes this file. Until then every compile that reaches
// seccomp emission fails closed with "seccomp emitter not built". The name
// table comes from libseccomp so the compiler's syscall checks are real.
#include <seccomp.h>

#include <algorithm>
#include <string>

#include "bulwark/policy/seccomp.h"

namespace bulwark::policy {

std::expected<SeccompPlan, SeccompError> compile_seccomp(const SeccompSpec&) {
    return std::unexpected(SeccompError{0, "seccomp emitter not built"});
}

const std::vector<std::string>& known_syscalls() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        const uint32_t arches[] = {SCMP_ARCH_X86_64, SCMP_ARCH_X86, SCMP_ARCH_X32, SCMP_ARCH_AARCH64, SCMP_ARCH_ARM};
        for (uint32_t arch : arches) {
            for (int nr = 0; nr < 1024; ++nr) {
                char* name = seccomp_syscall_resolve_num_arch(arch, arch == SCMP_ARCH_X32 ? nr | 0x40000000 : nr);
                if (!name) continue;
                out.emplace_back(name);
                free(name);
            }
        }
        std::sort(out.begin(), out.end());
        out.erase(std::unique(out.begin(), out.end()), out.end());
        return out;
    }();
    return names;
}

bool is_known_syscall(std::string_view name) {
    const auto& n = known_syscalls();
    return std::binary_search(n.begin(), n.end(), name, std::less<>{});
}

std::expected<SeccompSpec, SeccompError> import_seccomp_profile(std::string_view, std::string) {
    return std::unexpected(SeccompError{0, "seccomp emitter not built"});
}

}  // namespace bulwark::policy
