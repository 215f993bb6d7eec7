#pragma once
// `policyc test [--rules-dir DIR] FILES... [--json]`: run policy test files.
#include <CLI/CLI.hpp>

namespace bulwark::cli {
void register_test(CLI::App& app);
}
