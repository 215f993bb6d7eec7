#pragma once
// `agentd learn`: the rules a command needs on top of a tool's, learned from
// its refused operations and confirmed by a run under them (cmd_learn.cpp).
namespace CLI {
class App;
}

namespace bulwark {

// Adds the `learn` subcommand; like `run`, its callback ends parsing with
// CLI::RuntimeError(status).
void register_learn(CLI::App& app);

}  // namespace bulwark
