#pragma once
// Request bodies of the task routes, read into the task manager's typed
// requests. Each refusal names the field ("argv[2]: must be a string").
#include <expected>
#include <initializer_list>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tasks/learning.h"
#include "tasks/tasks.h"

namespace bulwark::http {

// POST /v1/tasks: BadRequest naming the field (the tools' names are checked
// against the catalog by the task manager).
std::expected<CreateTaskRequest, TaskError> parse_create_task(const nlohmann::json& body);
// PUT /v1/tasks/{id}/grant.
std::expected<GrantUpdate, TaskError> parse_grant_update(const nlohmann::json& body);
// POST /v1/tasks/{id}/cancel: the exec's client_ref.
std::expected<std::string, TaskError> parse_cancel(const nlohmann::json& body);

// POST /v1/tasks/{id}/exec: BadRequest, or FileRefused for a working file
// that may not be written (a path outside the workdir, ...). The W3C trace
// context comes as the body's `traceparent` or the request's `traceparent`
// header (both: they must be the same).
std::expected<ExecRequest, TaskError> parse_exec(const nlohmann::json& body,
                                                 std::optional<std::string_view> traceparent_header = std::nullopt);

// The record range of POST /v1/replay and /v1/propose: tool, since_ns,
// until_ns, task, max_records; `extra` names the other keys the body may
// have. BadRequest naming the field.
std::expected<RecordRange, TaskError> parse_record_range(const nlohmann::json& body,
                                                         std::initializer_list<const char*> extra);

}  // namespace bulwark::http
