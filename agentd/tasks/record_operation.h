#pragma once
// The concrete operation an audit record describes, in the reference
// evaluator's terms (bulwark/policy/evaluator.h): what replay re-judges under
// a candidate rule file and what exec explains to an agent. Records whose
// object cannot be judged by path or address (inode-only file events,
// signals, mounts, bpf(), run lifecycle) have none.
#include <optional>
#include <string>

#include "audit/audit_record.h"
#include "bulwark/policy/evaluator.h"

namespace bulwark {

std::optional<policy::Operation> operation_of(const audit::AuditRecord& r);

// The evaluator's explanation of a decision on op, saying so when op was
// re-judged from a record that lacks part of it (a syscall's arguments).
std::string explanation_of(const policy::Operation& op, const policy::Decision& d);

}  // namespace bulwark

#include <expected>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace bulwark {

// An operation as the API takes it (POST /v1/tools/{name}/explain):
//   {"op":"open","path":"/etc/shadow","access":"read"}      open: read | write
//   {"op":"create"|"remove"|"exec","path":"..."}
//   {"op":"connect"|"bind"|"send","addr":"140.82.112.5","port":443,"proto":"tcp"}
//   {"op":"socket","family":"packet","type":"raw"}
//   {"op":"syscall","name":"ptrace"}
// Errors name the field.
std::expected<policy::Operation, std::string> operation_from_json(const nlohmann::json& j);

}  // namespace bulwark
