#pragma once
// What a policy allows, in words: the text of `policyc explain` and of the
// daemon's GET /v1/tools/{name}/explain, and the small formatters it uses.
#include <cstdint>
#include <string>
#include <vector>

#include "bulwark/policy/bundle.h"
#include "bulwark/policy/seccomp.h"

namespace bulwark::policy {

// Section by section: what the policy allows, which layers enforce each
// section, and what Landlock cannot express.
std::string explain_text(const Bundle& b);

// Every rule with the layers that can hold it on their own (coverage.h).
// With `in_force` (layer names in force on a host), each rule also says
// which of them hold it there, or that none does. The mount layer's hold on
// a deny is decided at launch (it needs the path); it is counted here.
std::string coverage_text(const Bundle& b, const std::vector<std::string>* in_force = nullptr);

std::string format_size(uint64_t bytes);       // "64MiB"
std::string format_duration(uint64_t ms);      // "30s"
std::string format_net_rule(const NetRule& r); // "allow connect tcp 10.0.0.0/8 port 443"
std::string family_names(uint64_t af_allow);   // "inet, inet6, unix"
std::string action_name(SeccompAction a, uint16_t errno_value);
std::string rule_where(const Bundle& b, uint32_t id);  // "rules/curl.yaml:12" or "-"
// "architectures: native; calls through i386, x32 are refused (...)"
std::string architectures_text(const Bundle& b);

}  // namespace bulwark::policy
