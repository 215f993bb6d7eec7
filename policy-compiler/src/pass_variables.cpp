// Task variables: only ${workdir}, ${home}, ${tmp} and ${task_id} exist.
#include "passes.h"

namespace bulwark::policy {
namespace {

const std::vector<std::string> kVars = {"workdir", "home", "tmp", "task_id"};

void check(CompileContext& ctx, const ast::Scalar& s) {
    const std::string& v = s.value;
    for (size_t i = v.find("${"); i != std::string::npos; i = v.find("${", i + 2)) {
        size_t close = v.find('}', i);
        if (close == std::string::npos) {
            ctx.error(s.span, "bad-variable", "unterminated variable in \"" + v + "\"", {"variables are written ${name}"});
            return;
        }
        std::string name = v.substr(i + 2, close - i - 2);
        if (std::find(kVars.begin(), kVars.end(), name) == kVars.end()) {
            std::vector<std::string> hints;
            if (auto m = closest_match(name, kVars); !m.empty()) hints.push_back("did you mean \"${" + m + "}\"?");
            hints.push_back("variables: ${workdir}, ${home}, ${tmp}, ${task_id}");
            ctx.error(s.span, "unknown-variable", "unknown variable \"${" + name + "}\"", std::move(hints));
        }
    }
}

void run_variables(CompileContext& ctx) {
    auto& f = ctx.ast.files;
    for (auto* list : {&f.read, &f.write, &f.create, &f.remove, &f.exec, &f.deny, &ctx.ast.exec.allow})
        for (const auto& item : *list) check(ctx, item.path);
    for (const auto& [name, value] : ctx.ast.environment.set) check(ctx, value);
    for (auto* list : {&ctx.ast.network.unix_connect, &ctx.ast.network.unix_send, &ctx.ast.network.unix_bind})
        for (const auto& s : *list) check(ctx, s);
}

}  // namespace

Pass variables_pass() { return {"variables", run_variables, false}; }

}  // namespace bulwark::policy
