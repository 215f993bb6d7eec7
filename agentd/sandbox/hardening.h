#pragma once
// Hardware and binary hardening of a run. Parent: decide the MTE mode the
// tool's allocator will apply (GLIBC_TUNABLES glibc.mem.tagging, merged into
// the tool's existing tunables) after checking the CPU supports MTE; inspect
// the tool's ELF and its DT_NEEDED closure against the policy's required and
// warned properties. Child: speculation controls (kept across execve).
#include <expected>
#include <string>
#include <vector>

#include "bulwark/policy/bundle.h"
#include "sandbox/run_report.h"

namespace bulwark {

struct HardeningPrep {
    std::string glibc_tunables;       // full new value, "" = leave the variable alone
    unsigned long spec_store_bypass = 0;   // prctl value (PR_SPEC_FORCE_DISABLE) or 0
    unsigned long spec_indirect_branch = 0;
    std::vector<std::string> in_force;     // report lines
    std::vector<std::string> warnings;
};

struct CpuFeatures {
    std::string arch;    // "x86_64", "aarch64"
    bool mte = false;    // HWCAP2_MTE
    static CpuFeatures probe();
};

// Merges glibc.mem.tagging=<value> into an existing GLIBC_TUNABLES value
// (replacing any earlier glibc.mem.tagging).
std::string merge_tunables(const std::string& existing, int mem_tagging);

// Inspects `exe_fd` (named exe_path) and its libraries. Refuses (error) when a
// required property is missing or MTE is required but unsupported; `existing_tunables`
// is the tool's GLIBC_TUNABLES after the environment policy.
std::expected<HardeningPrep, std::string> prepare_hardening(const policy::HardeningPlan& plan,
                                                            int exe_fd, const std::string& exe_path,
                                                            const std::string& existing_tunables,
                                                            const CpuFeatures& cpu,
                                                            const std::string& sysroot = "");

// The spawner's hardening step over the tool's environment (run_tool's p2):
// the existing GLIBC_TUNABLES of `env` (after the environment policy) is
// what prepare_hardening merges into; when the plan sets tunables, `env`'s
// GLIBC_TUNABLES entry is replaced by the merged value.
std::expected<HardeningPrep, std::string> harden_env(std::vector<std::string>& env,
                                                     const policy::HardeningPlan& plan, int exe_fd,
                                                     const std::string& exe_path, const CpuFeatures& cpu,
                                                     const std::string& sysroot = "");

// Child: 0 or -errno.
int hardening_child_apply(const HardeningPrep& prep);

}  // namespace bulwark
