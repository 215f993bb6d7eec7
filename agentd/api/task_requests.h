#pragma once
// Request bodies of the task routes, read into the task manager's typed
// requests. Each refusal names the field ("argv[2]: must be a string").
#include <expected>

#include <nlohmann/json.hpp>

#include "tasks/tasks.h"

namespace bulwark::http {

// POST /v1/tasks/{id}/exec: BadRequest, or FileRefused for a working file
// that may not be written (a path outside the workdir, ...).
std::expected<ExecRequest, TaskError> parse_exec(const nlohmann::json& body);

}  // namespace bulwark::http
