#include "sandbox/rule_coverage.h"

#include <nlohmann/json.hpp>

#include "bulwark/policy/landlock_abi.h"

namespace bulwark {

std::string LayersInForce::why_not(const std::string& layer) const {
    auto it = state.find(layer);
    return it == state.end() ? "not in force in this run" : it->second;
}

namespace {

// "" when `layer` holds rule `c` at this launch, else why not.
std::string layer_holds(const LayersInForce& in, const std::string& layer, const policy::RuleCoverage& c) {
    if (std::string why = in.why_not(layer); !why.empty()) return why;
    if (layer == "mount") return in.mount ? in.mount(c) : "no mount plan for this rule";
    if (layer == "supervisor" && in.supervisor) return in.supervisor(c);
    if (layer == "landlock" && c.rights && (policy::landlock_fs_access(c.rights) & ~in.landlock_fs))
        return "this kernel's Landlock ABI does not handle every right the rule needs";
    return "";
}

}  // namespace

std::vector<DenyMaskRequest> deny_mask_requests(const std::vector<policy::RuleCoverage>& claims) {
    std::vector<DenyMaskRequest> out;
    for (const auto& c : claims)
        if (c.deny_below_allow) out.push_back({c.rule_id, c.path, c.rights});
    return out;
}

CoverageReport judge_coverage(std::vector<policy::RuleCoverage> claims, const LayersInForce& in) {
    CoverageReport r;
    for (auto& c : claims) {
        RuleVerdict v{std::move(c), {}, {}};
        for (const auto& claim : v.rule.layers) {
            std::string why = layer_holds(in, claim.layer, v.rule);
            if (why.empty()) v.enforced_by.push_back(claim.layer);
            else v.not_in_force.emplace_back(claim.layer, std::move(why));
        }
        if (!v.held()) (v.rule.unenforceable_run ? r.gaps : r.refused).push_back(r.rules.size());
        r.rules.push_back(std::move(v));
    }
    return r;
}

std::string describe_gap(const policy::Bundle& bundle, const RuleVerdict& v) {
    const policy::RuleRef* ref = bundle.rule(v.rule.rule_id);
    std::string s = ref ? ref->loc.text() +
                              ": " + ref->text
                        : !v.rule.text.empty() ? v.rule.text
                                               : "rule #" + std::to_string(v.rule.rule_id);
    s += ": no layer in force here holds it";
    if (v.not_in_force.empty()) s += " (no layer can hold a rule of kind " + v.rule.kind + ")";
    for (size_t i = 0; i < v.not_in_force.size(); ++i)
        s += (i ? "; " : ": ") + v.not_in_force[i].first + ": " + v.not_in_force[i].second;
    return s;
}

std::string refusal_message(const policy::Bundle& bundle, const CoverageReport& r) {
    std::string s = std::to_string(r.refused.size()) + " rule(s) of " + bundle.tool +
                    " would go unenforced on this host, so the tool was not started:";
    for (size_t i : r.refused) s += "\n  " + describe_gap(bundle, r.rules[i]);
    s += "\n  (to run anyway with the gap recorded, mark the rule `unenforceable: run`, or the whole file "
         "with a top-level `unenforceable: run`: docs/rule-language.md)";
    return s;
}

nlohmann::json coverage_json(const policy::Bundle& bundle, const CoverageReport& r) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : r.rules) {
        nlohmann::json rule = nullptr;
        if (const policy::RuleRef* ref = bundle.rule(v.rule.rule_id))
            rule = {{"file", ref->loc.file}, {"line", ref->loc.line}, {"col", ref->loc.col}, {"text", ref->text}};
        else if (!v.rule.text.empty())
            rule = {{"text", v.rule.text}};
        nlohmann::json why = nlohmann::json::object();
        for (const auto& [layer, w] : v.not_in_force) why[layer] = w;
        nlohmann::json how = nlohmann::json::object();
        for (const auto& claim : v.rule.layers)
            if (!claim.how.empty()) how[claim.layer] = claim.how;
        nlohmann::json row = {{"rule", std::move(rule)}, {"kind", v.rule.kind}, {"enforced_by", v.enforced_by},
                              {"not_in_force", std::move(why)}, {"held", v.held()}};
        if (!how.empty()) row["how"] = std::move(how);
        if (v.rule.unenforceable_run) row["unenforceable"] = "run";
        out.push_back(std::move(row));
    }
    return out;
}

std::string coverage_summary(const CoverageReport& r) {
    std::map<std::string, size_t> per;
    for (const auto& v : r.rules)
        for (const auto& l : v.enforced_by) ++per[l];
    std::string s = std::to_string(r.rules.size()) + " rules";
    bool first = true;
    for (const auto& l : policy::coverage_layers())
        if (auto it = per.find(l); it != per.end()) {
            s += (first ? ": " : ", ") + l + " " + std::to_string(it->second);
            first = false;
        }
    s += "; " + std::to_string(r.gaps.size() + r.refused.size()) + " held by no layer here";
    if (!r.gaps.empty()) s += " (" + std::to_string(r.gaps.size()) + " marked unenforceable: run)";
    return s;
}

}  // namespace bulwark
