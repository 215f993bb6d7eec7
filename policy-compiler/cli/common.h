#pragma once
// Helpers shared by policyc subcommands.
#include <expected>
#include <iosfwd>
#include <string>
#include <vector>

#include "bulwark/policy/compiler.h"
#include "bulwark/policy/explain.h"
#include "registry.h"

namespace bulwark::policyc {

policy::CompileOptions compile_options(const CommonOptions& common);

// A rule file (compiled) or a compiled bundle (*.json), as a bundle. On
// failure the diagnostics (or the reason) are written to `err`.
std::expected<policy::Bundle, int> load_policy(const std::string& path, const CommonOptions& common, std::ostream& err);

// The files a list of command-line paths names. A directory stands for every
// rule file below it (recursively, sorted by path, hidden entries skipped):
// *.yaml and *.yml except the policy tests (*.test.yaml, *.test.yml), and
// *.json files that are rule files (an object with "tool", not a compiled
// bundle). Anything else is a path of its own: reading it says what it is.
struct RuleFiles {
    struct File {
        std::string path;
        std::string rules_dir;  // the directory it was found below ("" when named directly)
    };
    std::vector<File> files;
    std::vector<std::string> notes;   // one line per directory: what was checked and skipped
    std::vector<std::string> errors;  // a directory with no rule file, or one that cannot be read
};
enum class FileKind { RuleFiles, PolicyTests };
RuleFiles expand_rule_paths(const std::vector<std::string>& paths, FileKind kind);

using policy::action_name;
using policy::family_names;
using policy::format_duration;
using policy::format_net_rule;
using policy::format_size;
using policy::rule_where;

}  // namespace bulwark::policyc
