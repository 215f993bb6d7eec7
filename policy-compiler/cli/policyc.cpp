// policyc: check, compile and explain Bulwark rule files.
#include <CLI/CLI.hpp>

#include <iostream>

#include "bulwark/version.h"
#include "cmd_test.h"

void register_import_seccomp(CLI::App& app);  // cmd_import.cpp

int main(int argc, char** argv) {
    CLI::App app{"policyc: the Bulwark policy compiler"};
    bool show_version = false;
    app.add_flag("--version", show_version, "print the version and exit");
    bulwark::cli::register_test(app);
    register_import_seccomp(app);
    CLI11_PARSE(app, argc, argv);
    if (!app.get_subcommands().empty()) return 0;
    if (show_version) {
        std::cout << bulwark::version_string() << "\n";
        return 0;
    }
    std::cout << app.help();
    return 0;
}
