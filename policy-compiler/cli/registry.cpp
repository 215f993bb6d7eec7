#include "registry.h"

namespace bulwark::policyc {

namespace {
std::vector<Command>& table() {
    static std::vector<Command> t;
    return t;
}
}  // namespace

bool register_command(Command cmd) {
    table().push_back(std::move(cmd));
    return true;
}

const std::vector<Command>& commands() { return table(); }

void add_common_options(CLI::App& sub, CommonOptions& common) {
    sub.add_option("--rules-dir", common.rules_dirs, "directory searched for `extends:` names (repeatable)");
    sub.add_flag("--json", common.json, "machine-readable output");
}

}  // namespace bulwark::policyc
