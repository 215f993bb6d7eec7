// The syscall names libseccomp knows, over every arch a filter can cover.
#include <algorithm>
#include <cstdlib>
#include <memory>

#include "bulwark/policy/seccomp.h"
#include "seccomp_internal.h"

namespace bulwark::policy {

const std::vector<std::string>& known_syscalls() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        constexpr uint32_t kArches[] = {SCMP_ARCH_X86_64, SCMP_ARCH_X86,     SCMP_ARCH_X32,
                                        SCMP_ARCH_AARCH64, SCMP_ARCH_ARM};
        auto scan = [&](uint32_t arch, int first, int last) {
            for (int nr = first; nr <= last; ++nr) {
                std::unique_ptr<char, decltype(&std::free)> name(
                    seccomp_syscall_resolve_num_arch(arch, nr), &std::free);
                if (name) out.emplace_back(name.get());
            }
        };
        for (uint32_t arch : kArches) {
            const int base = arch == SCMP_ARCH_X32 ? 0x40000000 : 0;
            scan(arch, base, base + 1023);
            if (arch == SCMP_ARCH_ARM) scan(arch, 0x0f0000, 0x0f00ff);  // ARM private calls
        }
        std::ranges::sort(out);
        out.erase(std::unique(out.begin(), out.end()), out.end());
        return out;
    }();
    return names;
}

bool is_known_syscall(std::string_view name) {
    const auto& names = known_syscalls();
    return std::ranges::binary_search(names, name, {}, [](const std::string& s) {
        return std::string_view(s);
    });
}

}  // namespace bulwark::policy
