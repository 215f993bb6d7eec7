// Path normalisation: absolute (or variable-rooted), `//`, `/./` and trailing
// `/` folded, `..` rejected, PATH_MAX / NAME_MAX enforced (never truncated).
#include "passes.h"

namespace bulwark::policy {
namespace {

void run_normalise_paths(CompileContext& ctx) {
    auto& f = ctx.ast.files;
    for (auto* list : {&f.read, &f.write, &f.create, &f.remove, &f.exec, &f.deny, &ctx.ast.exec.allow}) {
        for (auto& item : *list) {
            auto p = normalise_path(item.path.value);
            if (!p) {
                std::vector<std::string> hints;
                if (!item.path.value.empty() && item.path.value.front() != '/' && item.path.value.front() != '$')
                    hints.push_back("did you mean \"/" + item.path.value + "\"?");
                ctx.error(item.path.span, "bad-path", p.error() + ": \"" + item.path.value.substr(0, 80) +
                                                          (item.path.value.size() > 80 ? "...\"" : "\""),
                          std::move(hints));
                continue;
            }
            item.path.value = std::move(*p);
        }
    }
}

}  // namespace

Pass normalise_paths_pass() { return {"normalise-paths", run_normalise_paths, true}; }

}  // namespace bulwark::policy
