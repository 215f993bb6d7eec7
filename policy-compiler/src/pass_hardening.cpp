// hardening: MTE mode, binary properties required or warned about, and
// speculation controls.
#include "passes.h"

namespace bulwark::policy {
namespace {

const std::vector<std::string> kProperties = {"pie",    "relro",     "bind-now",  "nx",  "stack-protector",
                                              "fortify", "cet-ibt", "cet-shstk", "bti", "pac"};

void run_hardening(CompileContext& ctx) {
    auto& h = ctx.ast.hardening;
    auto& out = ctx.bundle.hardening;
    if (!h.present) return;
    out.rule_id = h.rule_id;
    if (h.mte && ctx.check_choice(*h.mte, {"off", "async", "sync"}, "mte mode"))
        out.mte = h.mte->value == "off" ? MteMode::Off : h.mte->value == "async" ? MteMode::Async : MteMode::Sync;
    for (const auto& r : h.require) {
        if (!ctx.check_choice(r, kProperties, "hardening property")) continue;
        std::erase_if(out.properties, [&](const auto& p) { return p.first == r.value; });
        out.properties.emplace_back(r.value, Requirement::Require);
    }
    for (const auto& w : h.warn) {
        if (!ctx.check_choice(w, kProperties, "hardening property")) continue;
        auto it = std::find_if(out.properties.begin(), out.properties.end(),
                               [&](const auto& p) { return p.first == w.value; });
        if (it != out.properties.end()) {
            if (it->second == Requirement::Require)
                ctx.warning(w.span, "require-and-warn",
                            "\"" + w.value + "\" is both required and warned about; require wins");
            continue;
        }
        out.properties.emplace_back(w.value, Requirement::Warn);
    }
    std::sort(out.properties.begin(), out.properties.end());
    auto spec = [&](const std::optional<ast::Scalar>& s, bool& field, const char* what) {
        if (s && ctx.check_choice(*s, {"disable", "enable"}, what)) field = s->value == "disable";
    };
    spec(h.store_bypass, out.disable_store_bypass, "speculation.store_bypass setting");
    spec(h.indirect_branch, out.disable_indirect_branch, "speculation.indirect_branch setting");
}

}  // namespace

Pass hardening_pass() { return {"hardening", run_hardening, false}; }

}  // namespace bulwark::policy
