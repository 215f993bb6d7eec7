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
struct NrRange {
    int first, last;
    bool holds(int nr) const { return nr >= first && nr <= last; }
};
std::vector<NrRange> table_ranges(uint32_t arch) {
    const int base = arch == SCMP_ARCH_X32 ? 0x40000000 : 0;
    std::vector<NrRange> r{{base, base + 1023}};
    if (arch == SCMP_ARCH_ARM) r.push_back({0x0f0000, 0x0f00ff});
    return r;
}

}  // namespace

const std::vector<std::string>& known_syscalls() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        for (uint32_t arch : kArches)
            for (const NrRange& r : table_ranges(arch))
                for (int nr = r.first; nr <= r.last; ++nr) {
                    std::unique_ptr<char, decltype(&std::free)> name(
                        seccomp_syscall_resolve_num_arch(arch, nr), &std::free);
                    if (name) out.emplace_back(name.get());
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
        if (nr != __NR_SCMP_ERROR && std::ranges::any_of(table_ranges(arch), [&](const NrRange& r) { return r.holds(nr); }))
            return true;
    }
    return false;
}

}  // namespace bulwark::policy
