#pragma once
// `agentd run`: the one-shot CLI around run_tool().
#include <expected>
#include <string>

#include "bulwark/policy/bundle.h"

namespace CLI {
class App;
}

namespace bulwark {

// Adds the `run` subcommand. Its callback ends parsing with
// CLI::RuntimeError(status) so main returns the run's exit status.
void register_run(CLI::App& app);

// The rules loading of `agentd run`: the bundle for `tool` from the rule
// files in `rules_dir`. The single place the policy compiler plugs in.
std::expected<policy::Bundle, std::string> load_tool_bundle(const std::string& rules_dir,
                                                           const std::string& tool);

}  // namespace bulwark
