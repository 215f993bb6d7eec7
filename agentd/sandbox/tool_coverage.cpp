#include "sandbox/tool_coverage.h"

#include "sandbox/spawner.h"

namespace bulwark {

RunReport plan_tool_launch(const policy::Bundle& b, const PlanContext& ctx) {
    RunReport rep;
    rep.tool = b.tool;
    if (b.binaries.empty()) {
        rep.outcome = RunOutcome::Refused;
        rep.error = "the rules list no binary to plan a launch of";
        return rep;
    }
    RunRequest req;
    req.argv = {b.binaries.front().path};
    req.workdir = ctx.workdir;
    req.plan_only = true;
    req.recycle_netns = false;
    req.bpf_layers = ctx.bpf_layers;
    req.bpf_unavailable = ctx.bpf_unavailable;
    req.cgroup_v2_parent = ctx.cgroup_parent;
    req.profile_scoring = ctx.profile_scoring;
    return run_tool(b, req);
}

policy::Resolver planning_resolver() {
    return [](std::string_view) -> std::expected<std::vector<std::string>, std::string> {
        return std::vector<std::string>{"192.0.2.1"};
    };
}

bool plan_refused(const RunReport& plan) {
    return plan.refusal_code == "rule_unenforced" || plan.coverage_summary.empty();
}

nlohmann::json plan_summary_json(const RunReport& plan) {
    return {{"refused", plan_refused(plan)},
            {"summary", plan.coverage_summary},
            {"unenforced", plan.unenforced},
            {"error", plan_refused(plan) ? plan.error : ""}};
}

}  // namespace bulwark
