// policyc: check, compile, explain and diff Bulwark rule files. Subcommands
// live in cli/cmd_*.cpp and register themselves (registry.h).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>

#include "bulwark/version.h"
#include "cmd_test.h"
#include "registry.h"

void register_import_seccomp(CLI::App& app);  // cmd_import.cpp

int main(int argc, char** argv) {
    using namespace bulwark::policyc;
    CLI::App app{"policyc: the Bulwark policy compiler"};
    app.require_subcommand(0, 1);
    bool show_version = false;
    app.add_flag("--version", show_version, "print the version and exit");
    std::vector<Command> cmds = commands();
    std::sort(cmds.begin(), cmds.end(), [](const Command& a, const Command& b) { return a.name < b.name; });
    std::vector<CommonOptions> common(cmds.size());
    std::vector<std::function<int()>> runners(cmds.size());
    std::vector<CLI::App*> subs;
    for (size_t i = 0; i < cmds.size(); ++i) {
        CLI::App* sub = app.add_subcommand(cmds[i].name, cmds[i].description);
        add_common_options(*sub, common[i]);
        runners[i] = cmds[i].setup(*sub, common[i]);
        subs.push_back(sub);
    }
    // Subcommands that run from their CLI11 callback during parse.
    bulwark::cli::register_test(app);
    register_import_seccomp(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::RuntimeError& e) {
        return e.get_exit_code();
    } catch (const CLI::ParseError& e) {
        int rc = app.exit(e);
        return rc == 0 ? 0 : 2;
    }
    if (show_version) {
        std::cout << bulwark::version_string() << "\n";
        return 0;
    }
    for (size_t i = 0; i < subs.size(); ++i) {
        if (!subs[i]->parsed()) continue;
        try {
            return runners[i]();
        } catch (const std::exception& e) {
            std::cerr << "policyc " << cmds[i].name << ": " << e.what() << "\n";
            return 2;
        }
    }
    if (!app.get_subcommands().empty()) return 0;  // ran from its callback
    std::cout << app.help();
    return 0;
}
