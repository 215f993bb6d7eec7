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
    // One directory per occurrence: as a vector option it would otherwise
    // swallow the rule files that follow it (`--rules-dir R a.yaml b.yaml`
    // checked only b.yaml, and searched a.yaml as a directory).
    sub.add_option("--rules-dir", common.rules_dirs, "directory searched for `extends:` names (repeatable)")
        ->allow_extra_args(false);
    sub.add_flag("--json", common.json, "machine-readable output");
}

}  // namespace bulwark::policyc
