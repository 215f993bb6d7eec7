// agentd: the Bulwark daemon and its one-shot sandbox runner.
#include <CLI/CLI.hpp>

#include <iostream>

#include "bulwark/version.h"
#include "cli/cmd_coverage.h"
#include "cli/cmd_learn.h"
#include "cli/cmd_mcp.h"
#include "cli/cmd_run.h"
#include "cli/cmd_serve.h"

int main(int argc, char** argv) {
    CLI::App app{"agentd: run AI agents' tools in Bulwark sandboxes"};
    bool show_version = false;
    app.add_flag("--version", show_version, "print the version and exit");
    bulwark::register_run(app);
    bulwark::register_learn(app);
    bulwark::register_serve(app);
    bulwark::register_mcp(app);
    bulwark::register_coverage(app);
    CLI11_PARSE(app, argc, argv);
    if (show_version) {
        std::cout << bulwark::version_string() << "\n";
        return 0;
    }
    if (app.get_subcommands().empty()) std::cout << app.help();
    return 0;
}
