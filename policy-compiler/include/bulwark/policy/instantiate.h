#pragma once
// instantiate(): a compiled bundle made concrete for one task. Every
// ${workdir} ${home} ${tmp} ${task_id} in paths and environment values is
// replaced, host-name network rules are resolved into /128 rules (IPv4 as
// v4-mapped), and the BPF tables are rebuilt from the result.
#include <expected>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bulwark/policy/bundle.h"

namespace bulwark::policy {

// workdir, home, tmp: absolute normalised paths other than "/" (a variable
// standing for "/" would make its rules cover the whole filesystem).
// task_id: [A-Za-z0-9._-]{1,64}, and neither "." nor "..".
using TaskVars = std::map<std::string, std::string, std::less<>>;

// Host name -> its addresses (IPv4 or IPv6 literals). An error or an empty
// list refuses the instantiation: a rule that cannot be resolved is never
// silently dropped.
using Resolver =
    std::function<std::expected<std::vector<std::string>, std::string>(std::string_view host)>;

struct InstantiateError {
    uint32_t rule_id = BW_NO_RULE;  // the rule at fault, BW_NO_RULE for a bad variable
    std::string message;
};

// The variable names instantiate() knows.
bool is_task_variable(std::string_view name);

// The variables of one task, built in one place for every caller (daemon
// tasks, `agentd run`, coverage planning, explanations): ${workdir},
// ${home} (the workdir unless a home is given), ${tmp} (the sandbox's
// private /tmp) and ${task_id}. instantiate() checks the values.
TaskVars task_vars(std::string workdir, std::string task_id, std::optional<std::string> home = std::nullopt);

// Validates one variable value; the error says why it is refused.
std::expected<void, std::string> check_task_variable(std::string_view name, std::string_view value);

// Replaces the variables in one path and normalises the result. A variable
// that is unknown or missing from `vars` is an error, as is a result that is
// not an absolute path.
std::expected<std::string, std::string> substitute_path(std::string_view path, const TaskVars& vars);

// Same for environment values (no normalisation: the value need not be a path).
std::expected<std::string, std::string> substitute_value(std::string_view value,
                                                         const TaskVars& vars);

std::expected<Bundle, InstantiateError> instantiate(const Bundle& bundle, const TaskVars& vars,
                                                    const Resolver& resolve);

// True when no path, environment value or network rule still needs a task.
bool is_instantiated(const Bundle& bundle);

}  // namespace bulwark::policy
