// The one place that fixes the order of the passes.
#include "passes.h"

namespace bulwark::policy {

const std::vector<Pass>& pipeline() {
    static const std::vector<Pass> passes = {
        resolve_extends_pass(),   // bases first; merged tree replaces ctx.ast
        metadata_pass(),          // tool, mode, mandatory layers, binaries
        variables_pass(),         // ${...} names and positions
        normalise_paths_pass(),   // absolute, folded, no `..`, length limits
        file_rules_pass(),        // files: -> FileRule (BW_FS_* bitmasks)
        exec_rules_pass(),        // exec.allow -> exec rights
        network_pass(),           // network: -> NetRule (v6 space), families
        limits_pass(),
        microvm_pass(),           // microvm: mode, memory, vcpus, confidential
        hardening_pass(),
        environment_pass(),
        syscalls_pass(),          // syscalls: -> SeccompSpec
        lint_pass(),              // warnings: broad, shadowed, duplicate rules
        emit_bpf_pass(),          // BpfTables (file entries, LPM net entries)
        emit_landlock_pass(),     // LandlockPlan and its gaps
        emit_seccomp_pass(),      // SeccompSpec -> SeccompPlan
        finalize_pass(),          // rule table, hash
    };
    return passes;
}

void run_pipeline(CompileContext& ctx) {
    for (const auto& p : pipeline()) {
        if (p.requires_clean && ctx.failed()) continue;
        p.run(ctx);
    }
}

std::string rights_to_string(uint32_t rights) {
    static constexpr std::pair<uint32_t, const char*> names[] = {
        {BW_FS_READ, "read"}, {BW_FS_WRITE, "write"}, {BW_FS_CREATE, "create"},
        {BW_FS_REMOVE, "remove"}, {BW_FS_EXEC, "exec"}};
    std::string s;
    for (auto [bit, name] : names)
        if (rights & bit) s += (s.empty() ? "" : ",") + std::string(name);
    return s.empty() ? "none" : s;
}

}  // namespace bulwark::policy
