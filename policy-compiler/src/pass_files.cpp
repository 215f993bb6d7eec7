// files: -> FileRule list, one per source rule, rights as BW_FS_* bits.
#include "passes.h"

namespace bulwark::policy {
namespace {

void run_file_rules(CompileContext& ctx) {
    auto& f = ctx.ast.files;
    if (!f.present) return;
    for (auto* list : {&f.read, &f.write, &f.create, &f.remove, &f.exec})
        for (const auto& item : *list)
            ctx.bundle.files.push_back(FileRule{item.path.value, item.rights, 0, item.rule_id});
    for (const auto& item : f.deny)
        ctx.bundle.files.push_back(FileRule{item.path.value, 0, item.rights, item.rule_id});
}

}  // namespace

Pass file_rules_pass() { return {"file-rules", run_file_rules, true}; }

}  // namespace bulwark::policy
