#include "sandbox/hardening.h"

#include <sys/auxv.h>
#include <sys/prctl.h>

#include <cerrno>

#include "bulwark/policy/elf_props.h"

namespace bulwark {

CpuFeatures CpuFeatures::probe() {
    CpuFeatures f;
#if defined(__aarch64__)
    f.arch = "aarch64";
    f.mte = (getauxval(AT_HWCAP2) & (1ul << 18)) != 0;  // HWCAP2_MTE
#elif defined(__x86_64__)
    f.arch = "x86_64";
#else
    f.arch = "unknown";
#endif
    return f;
}

std::string merge_tunables(const std::string& existing, int mem_tagging) {
    std::string out;
    size_t s = 0;
    while (s <= existing.size() && !existing.empty()) {
        size_t e = existing.find(':', s);
        if (e == std::string::npos) e = existing.size();
        std::string item = existing.substr(s, e - s);
        if (!item.empty() && !item.starts_with("glibc.mem.tagging=")) out += item + ":";
        s = e + 1;
    }
    return out + "glibc.mem.tagging=" + std::to_string(mem_tagging);
}

std::expected<HardeningPrep, std::string> prepare_hardening(const policy::HardeningPlan& plan, int exe_fd,
                                                            const std::string& exe_path,
                                                            const std::string& existing_tunables,
                                                            const CpuFeatures& cpu,
                                                            const std::string& sysroot) {
    HardeningPrep prep;
    auto requirement = [&](const std::string& name) -> const policy::Requirement* {
        for (const auto& [n, r] : plan.properties)
            if (n == name) return &r;
        return nullptr;
    };

    // MTE: the mode is applied by the tool's own allocator after exec (the
    // kernel resets PR_SET_TAGGED_ADDR_CTRL at execve).
    if (plan.mte != policy::MteMode::Off) {
        const char* mode = plan.mte == policy::MteMode::Sync ? "sync" : "async";
        if (!cpu.mte) {
            std::string why = cpu.arch == "aarch64" ? "MTE unsupported by this CPU (no HWCAP2_MTE)"
                                                    : "MTE unsupported on " + cpu.arch;
            const auto* req = requirement("mte");
            if (req && *req == policy::Requirement::Require)
                return std::unexpected("hardening: mte " + std::string(mode) + " required: " + why);
            prep.warnings.push_back("mte " + std::string(mode) + " requested: " + why + "; running without");
            prep.in_force.push_back("mte: off (" + why + ")");
        } else {
            prep.glibc_tunables = merge_tunables(existing_tunables, plan.mte == policy::MteMode::Sync ? 3 : 1);
            prep.in_force.push_back(std::string("mte: ") + mode + " via GLIBC_TUNABLES (" + prep.glibc_tunables +
                                    "); checked only for glibc-malloc memory");
        }
    } else {
        prep.in_force.push_back("mte: off (not requested)");
    }

    // ELF properties of the tool and its libraries.
    if (!plan.properties.empty()) {
        auto exe = read_elf_props_fd(exe_fd, exe_path);
        if (!exe) {
            bool any_required = false;
            for (const auto& [n, r] : plan.properties) any_required |= r == policy::Requirement::Require;
            if (any_required) return std::unexpected("hardening: cannot inspect " + exe.error());
            prep.warnings.push_back("hardening: cannot inspect " + exe.error());
        } else {
            std::vector<std::string> missing_libs;
            auto libs = read_needed_closure(*exe, sysroot, missing_libs);
            for (const auto& m : missing_libs)
                prep.warnings.push_back("hardening: library " + m + " not found; not inspected");
            for (const auto& [name, req] : plan.properties) {
                if (name == "mte") continue;
                auto [known, ok] = elf_property(*exe, name);
                if (!known) {
                    prep.warnings.push_back("hardening: unknown property " + name);
                    continue;
                }
                std::vector<std::string> lacking;
                if (!ok) lacking.push_back(exe->path);
                if (property_covers_libraries(name))
                    for (const auto& l : libs)
                        if (!elf_property(l, name).second) lacking.push_back(l.path);
                if (lacking.empty()) {
                    prep.in_force.push_back(name + ": yes");
                    continue;
                }
                std::string list;
                for (const auto& l : lacking) list += (list.empty() ? "" : ", ") + l;
                std::string msg = name + ": missing in " + list;
                if (req == policy::Requirement::Require) return std::unexpected("hardening: required " + msg);
                prep.warnings.push_back("hardening: " + msg);
                prep.in_force.push_back(name + ": no (warn)");
            }
        }
    }

    // Speculation: per-task control exists only when the kernel's mitigation
    // mode is prctl/seccomp; otherwise say what holds, and refuse when the
    // speculation the policy wants off cannot be turned off.
    auto spec = [&](bool wanted, unsigned long which, const char* name,
                    unsigned long& out) -> std::expected<void, std::string> {
        if (!wanted) return {};
        int v = ::prctl(PR_GET_SPECULATION_CTRL, which, 0, 0, 0);
        if (v == PR_SPEC_NOT_AFFECTED) {
            prep.in_force.push_back(std::string("speculation: ") + name + ": CPU not affected");
        } else if (v > 0 && (v & PR_SPEC_PRCTL)) {
            out = PR_SPEC_FORCE_DISABLE;
            prep.in_force.push_back(std::string("speculation: ") + name + " force-disabled");
        } else if (v > 0 && (v & (PR_SPEC_DISABLE | PR_SPEC_FORCE_DISABLE))) {
            prep.in_force.push_back(std::string("speculation: ") + name + " disabled by the kernel for all tasks");
        } else {
            return std::unexpected(std::string("hardening: ") + name +
                                   " cannot be disabled per task on this kernel (mitigation mode without prctl "
                                   "control; PR_GET_SPECULATION_CTRL = " + std::to_string(v) + ")");
        }
        return {};
    };
    if (auto r = spec(plan.disable_store_bypass, PR_SPEC_STORE_BYPASS, "store bypass", prep.spec_store_bypass); !r)
        return std::unexpected(r.error());
    if (auto r = spec(plan.disable_indirect_branch, PR_SPEC_INDIRECT_BRANCH, "indirect branch",
                      prep.spec_indirect_branch);
        !r)
        return std::unexpected(r.error());
    return prep;
}

int hardening_child_apply(const HardeningPrep& prep) {
    if (prep.spec_store_bypass &&
        ::prctl(PR_SET_SPECULATION_CTRL, PR_SPEC_STORE_BYPASS, prep.spec_store_bypass, 0, 0) != 0)
        return -errno;
    if (prep.spec_indirect_branch &&
        ::prctl(PR_SET_SPECULATION_CTRL, PR_SPEC_INDIRECT_BRANCH, prep.spec_indirect_branch, 0, 0) != 0)
        return -errno;
    return 0;
}

std::expected<HardeningPrep, std::string> harden_env(std::vector<std::string>& env,
                                                     const policy::HardeningPlan& plan, int exe_fd,
                                                     const std::string& exe_path, const CpuFeatures& cpu,
                                                     const std::string& sysroot) {
    std::string existing;
    for (const auto& kv : env)
        if (kv.starts_with("GLIBC_TUNABLES=")) existing = kv.substr(15);
    auto hard = prepare_hardening(plan, exe_fd, exe_path, existing, cpu, sysroot);
    if (hard && !hard->glibc_tunables.empty()) {
        std::erase_if(env, [](const std::string& kv) { return kv.starts_with("GLIBC_TUNABLES="); });
        env.push_back("GLIBC_TUNABLES=" + hard->glibc_tunables);
    }
    return hard;
}

}  // namespace bulwark
