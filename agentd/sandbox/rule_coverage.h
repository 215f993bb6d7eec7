#pragma once
// Per-rule enforcement at one launch: the compiler's claims (which layers
// can hold each rule, policy/coverage.h) intersected with the layers proven
// in force here. A rule no layer in force holds refuses the launch unless it
// is marked `unenforceable: run`; then the gap is recorded with the run.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "bulwark/policy/bundle.h"
#include "bulwark/policy/coverage.h"
#include "sandbox/mounts.h"

namespace bulwark {

// The layers of one launch: name -> "" when in force, else why not
// (policy::coverage_layers() names them). A layer missing from the map is
// not in force ("not in force in this run").
struct LayersInForce {
    std::map<std::string, std::string> state;
    // Landlock access rights (LANDLOCK_ACCESS_FS_*) handled in force: a files
    // rule whose rights map to more is not held by Landlock.
    uint64_t landlock_fs = 0;
    // The mount layer's word on one rule (deny masks): "" held, else why not.
    // Unset: the mount layer holds no rule.
    std::function<std::string(const policy::RuleCoverage&)> mount;
    // The supervisor's word on one rule, where it holds some of its rules and
    // not others (a container's launcher with a terminal cannot count output).
    // Unset: an in-force supervisor holds every rule claimed for it.
    std::function<std::string(const policy::RuleCoverage&)> supervisor;

    std::string why_not(const std::string& layer) const;
};

struct RuleVerdict {
    policy::RuleCoverage rule;
    std::vector<std::string> enforced_by;                          // layers in force holding it
    std::vector<std::pair<std::string, std::string>> not_in_force;  // layer -> why not
    bool held() const { return !enforced_by.empty(); }
};

struct CoverageReport {
    std::vector<RuleVerdict> rules;
    std::vector<size_t> refused;   // indexes of rules nothing holds (not opted out)
    std::vector<size_t> gaps;      // indexes of rules nothing holds, opted out (`unenforceable: run`)
    bool launch_refused() const { return !refused.empty(); }
};

// claims: policy::rule_coverage(bundle), computed once per launch.
CoverageReport judge_coverage(std::vector<policy::RuleCoverage> claims, const LayersInForce& layers);
// The mount layer's requests: every deny below an allowed subtree.
std::vector<DenyMaskRequest> deny_mask_requests(const std::vector<policy::RuleCoverage>& claims);

// "files.deny ${workdir}/secret (rules/x.yaml:9:7): no layer in force here holds it: bpf_lsm: <why>; mount: <why>"
std::string describe_gap(const policy::Bundle& bundle, const RuleVerdict& v);
// The launch refusal: every rule nothing holds, one per line, and how to opt out.
std::string refusal_message(const policy::Bundle& bundle, const CoverageReport& r);

// [{"rule": {file,line,col,text}, "kind", "enforced_by": [...], "not_in_force": {layer: why}, "held",
//   "unenforceable": "run"?}, ...]
nlohmann::json coverage_json(const policy::Bundle& bundle, const CoverageReport& r);
// Counts per layer: "67 rules: landlock 40, seccomp 12, ...; 0 unenforced"
std::string coverage_summary(const CoverageReport& r);

}  // namespace bulwark
