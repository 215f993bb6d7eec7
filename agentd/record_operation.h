#pragma once
// The concrete operation an audit record describes, in the reference
// evaluator's terms (bulwark/policy/evaluator.h): what replay re-judges under
// a candidate rule file and what exec explains to an agent. Records whose
// object cannot be judged by path or address (inode-only file events,
// signals, mounts, bpf(), run lifecycle) have none.
#include <optional>
#include <string_view>

#include "audit_record.h"
#include "bulwark/policy/evaluator.h"

namespace bulwark {

std::optional<policy::Operation> operation_of(const audit::AuditRecord& r);

// What an explanation of a re-judged syscall adds: its arguments are unknown.
inline constexpr std::string_view kSyscallJudgedByName =
    " (judged by name: the kernel's record of a seccomp denial carries no arguments)";

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
