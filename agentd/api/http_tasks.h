#pragma once
// API v1 routes for tools, tasks, exec and replay (http_tasks.cpp).
#include "api/http_api.h"
#include "tasks/task_error.h"

namespace bulwark {
class ToolCatalog;
class TaskManager;
class ContainerManager;
namespace audit {
class AuditStore;
}
}  // namespace bulwark

namespace bulwark::http {

struct TaskRoutes {
    const ToolCatalog* catalog = nullptr;
    TaskManager* tasks = nullptr;
    audit::AuditStore* store = nullptr;
    ContainerManager* containers = nullptr;  // null: the container routes answer 503
};

// GET /v1/tools, GET /v1/tools/{name}, GET|POST /v1/tools/{name}/explain,
// POST|GET /v1/tasks, GET|DELETE /v1/tasks/{id}, PUT /v1/tasks/{id}/grant,
// POST /v1/tasks/{id}/exec, POST /v1/tasks/{id}/exec/stream, POST /v1/replay, POST /v1/propose,
// POST|GET /v1/containers, GET|DELETE /v1/containers/{id} (root over the unix socket only: the OCI runtime)
void register_task_routes(Router& r, const TaskRoutes& ctx);

// A task error as the API answers it: its HTTP status (one table for every
// code) and {"error": {"code": <code_name>, "message": ..., <extra>...}}.
int http_status(TaskErrc code);
ApiResponse task_error_response(const TaskError& e);

}  // namespace bulwark::http
