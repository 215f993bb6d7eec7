#pragma once
// Per-rule coverage: for every rule of a bundle, the enforcement layers that
// can hold it on their own. agentd intersects these claims with the layers
// proven in force on the host at each launch (agentd/sandbox/rule_coverage.h): a
// rule that no layer in force holds refuses the launch, unless the rule
// (or its file) says `unenforceable: run`.
//
// Layer names: bpf_lsm, landlock, mount (the sandbox's mount namespace),
// seccomp, sock_addr (cgroup socket programs), sock_unix (cgroup unix
// socket programs), netns, cgroup, rlimit,
// supervisor (agentd's own checks at launch and while the tool runs),
// microvm (the tool in a VM of its own), tee (that VM a confidential guest),
// profile (agentd serve's scoring of each run against the tool's profile,
// and its response to a finding).
#include <cstdint>
#include <string>
#include <vector>

#include "bulwark/policy/bundle.h"

namespace bulwark::policy {

struct LayerClaim {
    std::string layer;
    std::string how;  // what the layer does for this rule, "" when plain
};

struct RuleCoverage {
    uint32_t rule_id = 0;
    std::string kind;                 // "files.deny", "network.connect", "limits.memory", ...
    std::vector<LayerClaim> layers;   // each one holds the rule on its own
    // files rules: the rights the rule grants or takes away (BW_FS_*), and
    // for a deny, the part of them an allow above it grants (what Landlock
    // cannot take away again).
    uint32_t rights = 0;
    uint32_t deny_below_allow = 0;
    std::string path;                 // files rules
    std::string text;                 // what a row no rule names (a default) holds
    bool unenforceable_run = false;   // the rule may run where nothing holds it
};

// Every rule of the bundle, in rule-id order. Metadata that needs no
// enforcement (tool, description, extends) is left out.
std::vector<RuleCoverage> rule_coverage(const Bundle& bundle);

// Every layer name a claim may use, in the order reports list them.
const std::vector<std::string>& coverage_layers();

}  // namespace bulwark::policy
