// environment: variable names checked, values may use task variables;
// passing loader variables from the caller is flagged.
#include "passes.h"

namespace bulwark::policy {
namespace {

bool valid_name(std::string_view n) {
    if (n.empty() || n.size() > 255) return false;
    auto head = [](char c) { return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); };
    if (!head(n.front())) return false;
    return std::all_of(n.begin(), n.end(), [&](char c) { return head(c) || (c >= '0' && c <= '9'); });
}

void run_environment(CompileContext& ctx) {
    auto& e = ctx.ast.environment;
    auto& out = ctx.bundle.env;
    if (!e.present) return;
    for (const auto& p : e.pass) {
        if (!valid_name(p.value)) {
            ctx.error(p.span, "bad-env-name", "invalid environment variable name \"" + p.value + "\"");
            continue;
        }
        if (p.value.starts_with("LD_") || p.value == "GCONV_PATH" || p.value == "PYTHONPATH" ||
            p.value == "NODE_OPTIONS" || p.value == "BASH_ENV")
            ctx.warning(p.span, "risky-env", "passing " + p.value + " lets the caller change what code the tool runs");
        if (std::find(out.pass.begin(), out.pass.end(), p.value) == out.pass.end()) out.pass.push_back(p.value);
    }
    for (const auto& [name, value] : e.set) {
        if (!valid_name(name.value)) {
            ctx.error(name.span, "bad-env-name", "invalid environment variable name \"" + name.value + "\"");
            continue;
        }
        out.set.emplace_back(name.value, value.value);
    }
    if (e.clear) {
        if (e.clear->value == "true") out.clear_all = true;
        else if (e.clear->value == "false") out.clear_all = false;
        else ctx.error(e.clear->span, "wrong-type", "environment.clear must be true or false");
    }
}

}  // namespace

Pass environment_pass() { return {"environment", run_environment, false}; }

}  // namespace bulwark::policy
