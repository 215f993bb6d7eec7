// exec.allow -> exec rights. Once `exec:` is present every other exec is
// denied (BW_POL_EXEC_ENFORCED); binaries the tool is started as must be
// among the executable paths.
#include "passes.h"

namespace bulwark::policy {
namespace {

void run_exec_rules(CompileContext& ctx) {
    auto& e = ctx.ast.exec;
    if (!e.present) return;
    if (e.allow.empty())
        ctx.note(e.span, "exec-empty", "\"exec\" allows nothing: the tool cannot execute any program");
    for (const auto& item : e.allow)
        ctx.bundle.files.push_back(FileRule{item.path.value, BW_FS_EXEC, 0, item.rule_id});
}

}  // namespace

Pass exec_rules_pass() { return {"exec-rules", run_exec_rules, true}; }

}  // namespace bulwark::policy
