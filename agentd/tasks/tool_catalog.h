#pragma once
// The tools a daemon serves: every <rules_dir>/<tool>.yaml compiled once at
// start-up (extends resolved in rules_dir). A rule file that does not compile
// stops the daemon from starting: a tool is never served with fewer rules
// than its file says.
#include <expected>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "bulwark/policy/bundle.h"
#include "bulwark/policy/instantiate.h"

namespace bulwark {

struct ToolEntry {
    std::string name;                // the file's stem, equal to its `tool:`
    std::filesystem::path source;    // the rule file
    policy::Bundle bundle;           // compiled, not instantiated
};

class ToolCatalog {
public:
    // Every diagnostic of every failing file is in the error.
    static std::expected<ToolCatalog, std::string> load(const std::filesystem::path& rules_dir);

    const ToolEntry* find(std::string_view name) const;
    const std::vector<ToolEntry>& tools() const { return tools_; }
    const std::filesystem::path& rules_dir() const { return rules_dir_; }

    // {"name","description","source","hash","binaries","network"}
    static nlohmann::json summary(const ToolEntry& t);

private:
    std::filesystem::path rules_dir_;
    std::vector<ToolEntry> tools_;  // sorted by name
};

// Resolves a rule's host name with the host's resolver (getaddrinfo); sorted,
// without duplicates.
std::expected<std::vector<std::string>, std::string> resolve_host(std::string_view host);

// instantiate() with the error located at the rule at fault ("file:line:col: ...").
std::expected<policy::Bundle, std::string> instantiate_tool(const policy::Bundle& compiled,
                                                           const policy::TaskVars& vars,
                                                           const policy::Resolver& resolve = resolve_host);

}  // namespace bulwark
