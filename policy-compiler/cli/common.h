#pragma once
// Helpers shared by policyc subcommands.
#include <expected>
#include <iosfwd>
#include <string>

#include "bulwark/policy/compiler.h"
#include "bulwark/policy/explain.h"
#include "registry.h"

namespace bulwark::policyc {

policy::CompileOptions compile_options(const CommonOptions& common);

// A rule file (compiled) or a compiled bundle (*.json), as a bundle. On
// failure the diagnostics (or the reason) are written to `err`.
std::expected<policy::Bundle, int> load_policy(const std::string& path, const CommonOptions& common, std::ostream& err);

using policy::action_name;
using policy::family_names;
using policy::format_duration;
using policy::format_net_rule;
using policy::format_size;
using policy::rule_where;

}  // namespace bulwark::policyc
