// The syscall names libseccomp knows, over every arch a filter can cover.
#include <algorithm>
#include <cstdlib>
#include <memory>

#include "bulwark/policy/seccomp.h"
#include "seccomp_internal.h"

namespace bulwark::policy {

namespace {

constexpr uint32_t kArches[] = {SCMP_ARCH_X86_64, SCMP_ARCH_X86, SCMP_ARCH_X32, SCMP_ARCH_AARCH64, SCMP_ARCH_ARM};

// The numbers a name is known by on `arch`: the arch's table (x32 above its
// 0x40000000 bit) and, on ARM, its private calls.
bool in_scanned_range(uint32_t arch, int nr) {
    const int base = arch == SCMP_ARCH_X32 ? 0x40000000 : 0;
    if (nr >= base && nr <= base + 1023) return true;
    return arch == SCMP_ARCH_ARM && nr >= 0x0f0000 && nr <= 0x0f00ff;
}

}  // namespace

const std::vector<std::string>& known_syscalls() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
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

// A name is known when some arch resolves it to a number of its own table:
// what known_syscalls() lists, asked by name (five lookups, not the ~5,000
// the whole list costs to build, which every compile would otherwise pay).
bool is_known_syscall(std::string_view name) {
    if (name.empty()) return false;
    const std::string n(name);
    for (uint32_t arch : kArches) {
        int nr = seccomp_syscall_resolve_name_arch(arch, n.c_str());
        if (nr != __NR_SCMP_ERROR && in_scanned_range(arch, nr)) return true;
    }
    return false;
}

}  // namespace bulwark::policy
