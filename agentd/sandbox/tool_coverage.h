#pragma once
// A tool's launch planned and stopped before anything starts
// (RunRequest::plan_only): which layers in force here hold each of its rules.
// Used by `agentd coverage` and by `agentd serve` at start-up (/v1/health's
// host.tools).
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "bulwark/policy/bundle.h"
#include "bulwark/policy/instantiate.h"
#include "sandbox/run_report.h"

namespace bulwark {

struct PlanContext {
    std::string workdir;                           // an existing directory (masks are planned there)
    std::map<std::string, std::string> bpf_layers;  // BpfRuntime::layer_states(); empty: no BPF
    std::string bpf_unavailable;                    // why there is no BPF layer
    std::string cgroup_parent;
    bool profile_scoring = false;  // agentd serve: runs are scored against their tools' profiles
};

// `instantiated`: the tool's bundle with task variables resolved.
RunReport plan_tool_launch(const policy::Bundle& instantiated, const PlanContext& ctx);

// Host names in rules, for a plan: every name stands for 192.0.2.1 (TEST-NET-1).
// Which layers hold a network rule does not depend on the addresses a name
// resolves to, and a plan must not wait on (or fail for) the resolver.
policy::Resolver planning_resolver();

// True when the plan says the tool would not be started.
bool plan_refused(const RunReport& plan);

// {"refused", "summary", "unenforced": [...], "error"}: the short form for
// /v1/health and logs.
nlohmann::json plan_summary_json(const RunReport& plan);

}  // namespace bulwark
