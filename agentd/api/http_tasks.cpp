// API v1 routes over the tool catalog and the task manager: tools (list,
// show, explain), tasks (create, list, show, grant update, close), exec
// (synchronous, or streamed as server-sent events), replay and proposals.
#include "api/http_tasks.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "audit/audit_db.h"
#include "audit/audit_record.h"
#include "bulwark/policy/compiler.h"
#include "bulwark/policy/evaluator.h"
#include "bulwark/policy/explain.h"
#include "bulwark/policy/match.h"
#include "bulwark/policy/seccomp.h"
#include "api/task_requests.h"
#include "common/json_input.h"
#include "tasks/record_operation.h"
#include "tasks/containers.h"
#include "tasks/tasks.h"
#include "tasks/tool_catalog.h"

namespace bulwark::http {
namespace {

using nlohmann::json;

ApiResponse from_error(const TaskError& e) { return task_error_response(e); }

ApiResponse reply(const std::expected<json, TaskError>& r, int ok_status = 200) {
    return r ? json_response(ok_status, *r) : from_error(r.error());
}

std::optional<json> parse_body(const ApiRequest& req, ApiResponse& bad) {
    if (req.body.empty()) {
        bad = error_response(400, "bad_request", "a JSON body is required");
        return std::nullopt;
    }
    auto j = parse_peer_json(req.body);
    if (!j) {
        bad = error_response(400, "bad_json", "the body " + j.error());
        return std::nullopt;
    }
    return std::move(*j);
}

std::optional<uint64_t> task_id_param(const ApiRequest& req, ApiResponse& bad) {
    const auto& s = req.params.at("id");
    auto v = positive_integer(s);
    if (!v) bad = error_response(400, "bad_parameter", "task id '" + s + "' is not a positive integer");
    return v;
}

// The exec request's `traceparent` header, when it has one.
std::optional<std::string> traceparent_header(const ApiRequest& req) {
    auto h = req.header("traceparent");
    return h ? std::optional<std::string>(std::string(*h)) : std::nullopt;
}

// A handler of /v1/tasks/{id}/... that takes a JSON body and the request's
// headers: the id and the body are checked before `f` runs.
template <class F>
Router::Handler with_task_request(F f) {
    return [f](const ApiRequest& req) {
        ApiResponse bad;
        auto id = task_id_param(req, bad);
        if (!id) return bad;
        auto body = parse_body(req, bad);
        if (!body) return bad;
        return f(*id, std::move(*body), req);
    };
}

// A handler of /v1/tasks/{id}/... that takes a JSON body: both are checked
// before `f` runs.
template <class F>
Router::Handler with_task_body(F f) {
    return with_task_request([f](uint64_t id, json body, const ApiRequest&) { return f(id, std::move(body)); });
}

// Placeholder task variables for judging a tool's rules outside any task.
policy::TaskVars example_vars() {
    return policy::task_vars("/workdir", "explain", "/home/agent");
}

json vars_json(const policy::TaskVars& v) {
    json j = json::object();
    for (const auto& [k, val] : v) j[k] = val;
    return j;
}

json decision_json(const policy::Bundle& b, const policy::Decision& d) {
    return {{"verdict", policy::to_string(d.verdict)},
            {"layer", audit::layer_name(d.layer)},
            {"rule", d.rule_id == BW_NO_RULE ? json(nullptr) : json(policy::describe_rule(b, d.rule_id))},
            {"explanation", d.explanation}};
}

// Streamed exec: the run happens on its own thread; stdout/stderr chunks
// and the final document are queued as SSE messages.
class ExecStream final : public StreamSource {
public:
    ExecStream(TaskManager* tasks, uint64_t id, json body, std::optional<std::string> traceparent)
        : tasks_(tasks), id_(id), body_(std::move(body)), traceparent_(std::move(traceparent)) {}

    void start(std::function<void()> notify) override {
        {
            std::lock_guard lk(st_->mu);
            st_->notify = std::move(notify);
        }
        // The run outlives a client that goes away (it is audited either
        // way): the thread holds the shared state, not the stream.
        std::thread([st = st_, tasks = tasks_, id = id_, body = body_, tp = traceparent_] {
            TaskManager::ExecHooks hooks;
            hooks.on_start = [st](const json& run) { st->push({"run", run.dump()}); };
            hooks.on_output = [st](int stream, std::string_view data) {
                st->push({stream == 1 ? "stdout" : "stderr",
                          json{{"data", std::string(data)}}.dump(-1, ' ', false, json::error_handler_t::replace)});
            };
            auto req = parse_exec(body, tp);
            auto r = req ? tasks->exec(id, *req, hooks) : std::unexpected(req.error());
            if (r) {
                json doc = *r;
                st->push({"exit", doc.dump(-1, ' ', false, json::error_handler_t::replace)});
            } else {
                st->push({"error", json{{"error", {{"code", code_name(r.error().code)}, {"message", r.error().message}}}}
                                       .dump()});
            }
            st->finish();
        }).detach();
    }

    std::vector<StreamMessage> poll(size_t max) override {
        std::lock_guard lk(st_->mu);
        std::vector<StreamMessage> out;
        while (!st_->q.empty() && out.size() < max) {
            out.push_back(std::move(st_->q.front()));
            st_->q.pop_front();
        }
        return out;
    }

    bool finished() override {
        std::lock_guard lk(st_->mu);
        return st_->done && st_->q.empty();
    }

    ~ExecStream() override {
        std::lock_guard lk(st_->mu);
        st_->notify = nullptr;
    }

private:
    struct State {
        std::mutex mu;
        std::deque<StreamMessage> q;
        bool done = false;
        std::function<void()> notify;
        void push(StreamMessage m) {
            std::function<void()> n;
            {
                std::lock_guard lk(mu);
                q.push_back(std::move(m));
                n = notify;
            }
            if (n) n();
        }
        void finish() {
            std::function<void()> n;
            {
                std::lock_guard lk(mu);
                done = true;
                n = notify;
            }
            if (n) n();
        }
    };
    TaskManager* tasks_;
    uint64_t id_;
    json body_;
    std::optional<std::string> traceparent_;
    std::shared_ptr<State> st_ = std::make_shared<State>();
};

// Replay and proposals (tasks/learning): the body read here, the work there.
ApiResponse replay(const TaskRoutes& ctx, const ApiRequest& req) {
    ApiResponse bad;
    auto body = parse_body(req, bad);
    if (!body) return bad;
    auto range = parse_record_range(*body, {"rules"});
    if (!range) return from_error(range.error());
    if (!body->contains("rules") || !(*body)["rules"].is_string())
        return error_response(400, "bad_request", "rules: the candidate rule file's text is required");
    return reply(bulwark::replay({*ctx.catalog, ctx.tasks, *ctx.store}, *range, (*body)["rules"].get<std::string>()));
}

ApiResponse propose(const TaskRoutes& ctx, const ApiRequest& req) {
    ApiResponse bad;
    auto body = parse_body(req, bad);
    if (!body) return bad;
    auto range = parse_record_range(*body, {});
    if (!range) return from_error(range.error());
    return reply(bulwark::propose({*ctx.catalog, ctx.tasks, *ctx.store}, *range));
}

// The container routes bind cgroups to policies: only root on the unix
// socket (the OCI runtime on this node) may call them.
template <class F>
Router::Handler container_route(const TaskRoutes& ctx, F f) {
    return [ctx, f](const ApiRequest& req) {
        if (req.peer.transport != Peer::Transport::Unix || req.peer.uid != 0)
            return error_response(403, "forbidden", "the container routes are for root over agentd's unix socket");
        if (!ctx.containers) return error_response(503, "unavailable", "this agentd does not bind containers");
        return f(*ctx.containers, req);
    };
}

void register_container_routes(Router& r, const TaskRoutes& ctx) {
    r.add("POST", "/v1/containers", container_route(ctx, [](ContainerManager& m, const ApiRequest& req) {
              ApiResponse bad;
              auto body = parse_body(req, bad);
              if (!body) return bad;
              auto cr = container_request_from_json(*body);
              if (!cr) return from_error(cr.error());
              return reply(m.bind(std::move(*cr)), 201);
          }),
          {.offload = true});
    r.add("GET", "/v1/containers",
          container_route(ctx, [](ContainerManager& m, const ApiRequest&) { return json_response(200, m.list()); }));
    r.add("GET", "/v1/containers/{id}", container_route(ctx, [](ContainerManager& m, const ApiRequest& req) {
              return reply(m.get(req.params.at("id")));
          }));
    r.add("DELETE", "/v1/containers/{id}", container_route(ctx, [](ContainerManager& m, const ApiRequest& req) {
              json exit = json::object();
              if (!req.body.empty()) {
                  auto j = parse_peer_json(req.body);
                  if (!j) return error_response(400, "bad_json", "the body " + j.error());
                  if (!j->is_object()) return error_response(400, "bad_json", "the body is not a JSON object");
                  exit = std::move(*j);
              }
              return reply(m.release(req.params.at("id"), exit));
          }),
          {.offload = true});
}

}  // namespace

void register_task_routes(Router& r, const TaskRoutes& ctx) {
    register_container_routes(r, ctx);
    r.add("GET", "/v1/tools", [ctx](const ApiRequest&) {
        json tools = json::array();
        for (const auto& t : ctx.catalog->tools()) tools.push_back(ToolCatalog::summary(t));
        return json_response(200, {{"tools", tools}, {"rules_dir", ctx.catalog->rules_dir().string()}});
    });
    r.add("GET", "/v1/tools/{name}", [ctx](const ApiRequest& req) {
        const ToolEntry* t = ctx.catalog->find(req.params.at("name"));
        if (!t) return error_response(404, "unknown_tool", "no tool named '" + req.params.at("name") + "'");
        json j = ToolCatalog::summary(*t);
        j["bundle"] = policy::bundle_to_json(t->bundle);
        // the rule file's text as served (the starting point of a replay candidate)
        std::ifstream in(t->source, std::ios::binary);
        std::ostringstream text;
        if (in) text << in.rdbuf();
        j["rules_text"] = in ? json(text.str()) : json(nullptr);
        return json_response(200, j);
    });
    r.add("GET", "/v1/tools/{name}/explain", [ctx](const ApiRequest& req) {
        const ToolEntry* t = ctx.catalog->find(req.params.at("name"));
        if (!t) return error_response(404, "unknown_tool", "no tool named '" + req.params.at("name") + "'");
        return json_response(200, {{"name", t->name}, {"source", t->source.string()}, {"text", policy::explain_text(t->bundle)}});
    });
    r.add(
        "POST", "/v1/tools/{name}/explain",
        [ctx](const ApiRequest& req) {
            const ToolEntry* t = ctx.catalog->find(req.params.at("name"));
            if (!t) return error_response(404, "unknown_tool", "no tool named '" + req.params.at("name") + "'");
            ApiResponse bad;
            auto body = parse_body(req, bad);
            if (!body) return bad;
            if (!body->is_object() || !body->contains("operation"))
                return error_response(400, "bad_request", "operation: required");
            for (auto it = body->begin(); it != body->end(); ++it)
                if (it.key() != "operation" && it.key() != "task")
                    return error_response(400, "bad_request", "unknown key '" + it.key() + "'");
            auto op = operation_from_json((*body)["operation"]);
            if (!op) return error_response(400, "bad_operation", op.error());
            if (body->contains("task")) {
                if (!(*body)["task"].is_number_unsigned()) return error_response(400, "bad_request", "task: must be a task id");
                uint64_t id = (*body)["task"];
                auto b = ctx.tasks->tool_bundle(id, t->name, true);
                if (!b) return error_response(404, "unknown_task", "task " + std::to_string(id) + " has no tool '" + t->name + "'");
                json j = decision_json(*b, policy::evaluate(*b, *op));
                j["task"] = id;
                return json_response(200, j);
            }
            auto vars = example_vars();
            auto b = instantiate_tool(t->bundle, vars);
            if (!b) return error_response(422, "instantiate_failed", b.error());
            json j = decision_json(*b, policy::evaluate(*b, *op));
            j["vars"] = vars_json(vars);
            return json_response(200, j);
        },
        {.offload = true});

    r.add("POST", "/v1/tasks",
          [ctx](const ApiRequest& req) {
              ApiResponse bad;
              auto body = parse_body(req, bad);
              if (!body) return bad;
              auto create = parse_create_task(*body);
              return create ? reply(ctx.tasks->create(*create), 201) : from_error(create.error());
          },
          {.offload = true});
    r.add("GET", "/v1/tasks", [ctx](const ApiRequest&) { return json_response(200, ctx.tasks->list()); });
    r.add("GET", "/v1/tasks/{id}", [ctx](const ApiRequest& req) {
        ApiResponse bad;
        auto id = task_id_param(req, bad);
        return id ? reply(ctx.tasks->get(*id)) : bad;
    });
    r.add(
        "GET", "/v1/tasks/{id}/denials",
        [ctx](const ApiRequest& req) {
            ApiResponse bad;
            auto id = task_id_param(req, bad);
            if (!id) return bad;
            uint64_t after = 0;
            uint32_t limit = 100;
            for (const auto& [k, v] : req.query) {
                uint64_t n = 0;
                auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
                bool num = !v.empty() && ec == std::errc() && p == v.data() + v.size();
                if (k == "after_seq" && num)
                    after = n;
                else if (k == "limit" && num && n >= 1 && n <= 1000)
                    limit = uint32_t(n);
                else if (k == "after_seq" || k == "limit")
                    return error_response(400, "bad_parameter",
                                          "'" + k + "' must be " + (k == "limit" ? "1..1000" : "a non-negative integer"));
                else
                    return error_response(400, "bad_parameter", "unknown query parameter '" + k + "'");
            }
            return reply(ctx.tasks->denials(*id, after, limit));
        },
        {.offload = true});
    r.add("DELETE", "/v1/tasks/{id}", [ctx](const ApiRequest& req) {
        ApiResponse bad;
        auto id = task_id_param(req, bad);
        return id ? reply(ctx.tasks->close(*id)) : bad;
    });
    // What a tool's profile narrowed (respond: narrow), lifted: a new epoch.
    r.add("DELETE", "/v1/tasks/{id}/narrowings/{tool}", [ctx](const ApiRequest& req) {
        ApiResponse bad;
        auto id = task_id_param(req, bad);
        return id ? reply(ctx.tasks->lift_narrowing(*id, req.params.at("tool"))) : bad;
    });
    r.add("PUT", "/v1/tasks/{id}/grant",
          with_task_body([ctx](uint64_t id, json body) {
              auto update = parse_grant_update(body);
              return update ? reply(ctx.tasks->update_grant(id, *update)) : from_error(update.error());
          }),
          {.offload = true});
    r.add("POST", "/v1/tasks/{id}/exec",
          with_task_request([ctx](uint64_t id, json body, const ApiRequest& http) {
              auto req = parse_exec(body, traceparent_header(http));
              return req ? reply(ctx.tasks->exec(id, *req)) : from_error(req.error());
          }),
          {.offload = true, .long_running = true});
    r.add("POST", "/v1/tasks/{id}/cancel",
          with_task_body([ctx](uint64_t id, json body) {
              auto ref = parse_cancel(body);
              return ref ? reply(ctx.tasks->cancel(id, *ref)) : from_error(ref.error());
          }),
          {.offload = true});
    // Streamed exec: not offloaded, the handler only starts the run thread.
    r.add("POST", "/v1/tasks/{id}/exec/stream", with_task_request([ctx](uint64_t id, json body, const ApiRequest& http) {
              // Fail fast on what can be checked before the stream starts.
              if (auto t = ctx.tasks->get(id); !t) return from_error(t.error());
              ApiResponse resp;
              resp.content_type = "text/event-stream";
              resp.stream = std::make_shared<ExecStream>(ctx.tasks, id, std::move(body), traceparent_header(http));
              return resp;
          }));
    r.add("POST", "/v1/replay", [ctx](const ApiRequest& req) { return replay(ctx, req); }, {.offload = true});
    r.add("POST", "/v1/propose", [ctx](const ApiRequest& req) { return propose(ctx, req); }, {.offload = true});
}

int http_status(TaskErrc code) {
    switch (code) {
    case TaskErrc::BadRequest:
    case TaskErrc::BadGrant:
    case TaskErrc::BadWorkdir: return 400;
    case TaskErrc::GrantWidens: return 403;
    case TaskErrc::UnknownTask:
    case TaskErrc::UnknownTool:
    case TaskErrc::UnknownContainer:
    case TaskErrc::UnknownProfile:
    case TaskErrc::UnknownFinding:
    case TaskErrc::NotNarrowed: return 404;
    case TaskErrc::ContainerExists:
    case TaskErrc::TaskClosed:
    case TaskErrc::WorkdirGone:
    case TaskErrc::ProfileHold: return 409;
    case TaskErrc::FileRefused:
    case TaskErrc::InstantiateFailed:
    case TaskErrc::CandidateInvalid:
    case TaskErrc::RuleUnenforced: return 422;
    case TaskErrc::TooManyTasks: return 429;
    case TaskErrc::WorkdirFailed:
    case TaskErrc::QueryFailed:
    case TaskErrc::Internal: return 500;
    case TaskErrc::BpfUnavailable:
    case TaskErrc::StoreRefusing:
    case TaskErrc::StoreUnacknowledged:
    case TaskErrc::NoStore:
    case TaskErrc::ShuttingDown: return 503;
    }
    return 500;
}

namespace {

json error_body(const TaskError& e) {
    json body{{"error", {{"code", code_name(e.code)}, {"message", e.message}}}};
    for (auto it = e.extra.begin(); it != e.extra.end(); ++it) body["error"][it.key()] = it.value();
    return body;
}

}  // namespace

ApiResponse task_error_response(const TaskError& e) { return json_response(http_status(e.code), error_body(e)); }

}  // namespace bulwark::http
