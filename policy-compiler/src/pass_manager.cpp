// The one place that fixes the order of the passes.
#include "passes.h"

#include <initializer_list>

namespace bulwark::policy {

const std::vector<Pass>& pipeline() {
    static const std::vector<Pass> passes = {
        resolve_extends_pass(),   // bases first; merged tree replaces ctx.ast
        metadata_pass(),          // tool, mode, mandatory layers, binaries
        variables_pass(),         // ${...} names and positions
        normalise_paths_pass(),   // absolute, folded, no `..`, length limits
        file_rules_pass(),        // files: -> FileRule (BW_FS_* bitmasks)
        exec_rules_pass(),        // exec.allow -> exec rights
        libraries_pass(),         // binaries[].libraries: auto -> read+exec of each closure
        network_pass(),           // network: -> NetRule (v6 space), families
        limits_pass(),
        microvm_pass(),           // microvm: mode, memory, vcpus, confidential
        profile_pass(),           // profile: learn, respond
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

void run_pipeline_through(CompileContext& ctx, std::string_view last) {
    for (const auto& p : pipeline()) {
        if (!(p.requires_clean && ctx.failed())) p.run(ctx);
        if (p.name == last) return;
    }
}

namespace {

// The names of the bits set, in table order, joined by sep (appended piece by
// piece: GCC 12 at -O3 reports a false -Wrestrict on `a + std::string(b)` chains).
std::string join_bit_names(uint32_t bits, std::initializer_list<std::pair<uint32_t, const char*>> names,
                           std::string_view sep) {
    std::string s;
    for (auto [bit, name] : names) {
        if (!(bits & bit)) continue;
        if (!s.empty()) s += sep;
        s += name;
    }
    return s;
}

}  // namespace

std::string rights_to_string(uint32_t rights) {
    std::string s = join_bit_names(rights,
                                   {{BW_FS_READ, "read"}, {BW_FS_WRITE, "write"}, {BW_FS_CREATE, "create"},
                                    {BW_FS_REMOVE, "remove"}, {BW_FS_EXEC, "exec"}},
                                   ",");
    return s.empty() ? "none" : s;
}

std::string net_ops_to_string(uint32_t ops, std::string_view sep) {
    return join_bit_names(ops, {{BW_NET_CONNECT, "connect"}, {BW_NET_BIND, "bind"}, {BW_NET_SEND, "send"}}, sep);
}

}  // namespace bulwark::policy
