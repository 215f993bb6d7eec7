// Warnings as errors (when asked), then the content hash.
#include "passes.h"

namespace bulwark::policy {
namespace {

void run_finalize(CompileContext& ctx) {
    if (ctx.opts.warnings_as_errors) {
        for (auto& d : ctx.diags)
            if (d.severity == Severity::Warning) d.severity = Severity::Error;
        if (ctx.failed()) return;
    }
    ctx.ast = ast::RuleFile{};  // not needed any more: lower the peak before the hash's JSON
    ctx.bundle.hash = bundle_hash(ctx.bundle);
}

}  // namespace

Pass finalize_pass() { return {"finalize", run_finalize, true}; }

}  // namespace bulwark::policy
