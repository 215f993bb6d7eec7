#pragma once
// Helpers shared by policyc subcommands.
#include <expected>
#include <iosfwd>
#include <string>

#include "bulwark/policy/compiler.h"
#include "registry.h"

namespace bulwark::policyc {

policy::CompileOptions compile_options(const CommonOptions& common);

// A rule file (compiled) or a compiled bundle (*.json), as a bundle. On
// failure the diagnostics (or the reason) are written to `err`.
std::expected<policy::Bundle, int> load_policy(const std::string& path, const CommonOptions& common, std::ostream& err);

std::string format_size(uint64_t bytes);
std::string format_duration(uint64_t ms);
std::string format_net_rule(const policy::NetRule& r);
std::string family_names(uint64_t af_allow);
std::string action_name(policy::SeccompAction a, uint16_t errno_value);
std::string rule_where(const policy::Bundle& b, uint32_t id);

}  // namespace bulwark::policyc
