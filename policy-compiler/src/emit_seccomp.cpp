// SeccompSpec -> SeccompPlan through the seccomp emitter (seccomp.h); its
// errors become diagnostics at the rule at fault.
#include "passes.h"

namespace bulwark::policy {
namespace {

void run_emit_seccomp(CompileContext& ctx) {
    if (!ctx.seccomp_ready) return;
    auto plan = ctx.opts.seccomp_compiler ? ctx.opts.seccomp_compiler(ctx.seccomp) : compile_seccomp(ctx.seccomp);
    if (!plan) {
        ast::Span span = plan.error().rule_id ? ctx.span_of(plan.error().rule_id) : ctx.ast.syscalls.span;
        if (span.loc.file.empty()) span = {{ctx.main_file, 0, 0}, 1};
        ctx.error(span, "seccomp", "seccomp: " + plan.error().message);
        return;
    }
    ctx.bundle.seccomp = std::move(*plan);
}

}  // namespace

Pass emit_seccomp_pass() { return {"emit-seccomp", run_emit_seccomp, true}; }

}  // namespace bulwark::policy
