#pragma once
// The compiler's passes, each in its own file behind a one-line factory;
// pass_manager.cpp fixes their order in one place.
#include <string_view>
#include <vector>

#include "context.h"

namespace bulwark::policy {

struct Pass {
    std::string_view name;
    void (*run)(CompileContext&);
    // Runs only when no error has been reported so far (it needs the
    // results of earlier passes to be complete).
    bool requires_clean = true;
};

Pass resolve_extends_pass();
Pass metadata_pass();
Pass variables_pass();
Pass normalise_paths_pass();
Pass file_rules_pass();
Pass exec_rules_pass();
Pass libraries_pass();
Pass network_pass();
Pass limits_pass();
Pass microvm_pass();
Pass profile_pass();
Pass hardening_pass();
Pass environment_pass();
Pass syscalls_pass();
Pass lint_pass();
Pass emit_bpf_pass();
Pass emit_landlock_pass();
Pass emit_seccomp_pass();
Pass finalize_pass();

const std::vector<Pass>& pipeline();
void run_pipeline(CompileContext& ctx);
// The passes in order up to and including the one named `last` (the
// extends pass alone: flatten_rule_file).
void run_pipeline_through(CompileContext& ctx, std::string_view last);

// Shared by the network pass and the emitters.
inline constexpr uint32_t kAllFsRights = BW_FS_ALL;

// Calls f(ancestor) for `path` and each parent directory of it, ending with
// "/" (for variable-rooted paths: ending with the variable itself, then "/").
template <class F>
void for_each_ancestor(std::string_view path, F&& f) {
    std::string_view p = path;
    while (true) {
        f(p);
        if (p == "/") return;
        auto slash = p.rfind('/');
        if (slash == std::string_view::npos) {
            f(std::string_view("/"));
            return;
        }
        p = slash == 0 ? std::string_view("/") : p.substr(0, slash);
    }
}


}  // namespace bulwark::policy
