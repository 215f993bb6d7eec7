#pragma once
// policyc subcommands register themselves here: a new subcommand is one new
// file under cli/ with one register_command() line.
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace bulwark::policyc {

// Options every subcommand takes (added by add_common_options).
struct CommonOptions {
    std::vector<std::string> rules_dirs;
    bool json = false;
};

struct Command {
    std::string name;
    std::string description;
    // Adds the subcommand's own options; returns what runs it (exit code).
    std::function<std::function<int()>(CLI::App& sub, CommonOptions& common)> setup;
};

bool register_command(Command cmd);
const std::vector<Command>& commands();

void add_common_options(CLI::App& sub, CommonOptions& common);

}  // namespace bulwark::policyc
