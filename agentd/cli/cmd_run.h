#pragma once
// `agentd run`: the one-shot CLI around run_tool().
#include <expected>
#include <string>

#include "bulwark/policy/bundle.h"
#include "bulwark/policy/instantiate.h"

namespace CLI {
class App;
}

namespace bulwark {

// Adds the `run` subcommand. Its callback ends parsing with
// CLI::RuntimeError(status) so main returns the run's exit status.
void register_run(CLI::App& app);

// The rules loading of `agentd run`: <rules_dir>/<tool>.yaml compiled
// (extends resolved in rules_dir) and instantiated for a one-shot task whose
// ${workdir} is `workdir` (absolute, canonical); host names are resolved
// with the host's resolver. Errors carry the compiler's diagnostics.
std::expected<policy::Bundle, std::string> load_tool_bundle(const std::string& rules_dir,
                                                           const std::string& tool,
                                                           const std::string& workdir,
                                                           const policy::Resolver& resolve = {});

}  // namespace bulwark
