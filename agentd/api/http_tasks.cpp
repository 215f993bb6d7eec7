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
#include "tasks/record_operation.h"
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
    auto j = json::parse(req.body, nullptr, false);
    if (j.is_discarded()) {
        bad = error_response(400, "bad_json", "the body is not valid JSON");
        return std::nullopt;
    }
    return j;
}

std::optional<uint64_t> task_id_param(const ApiRequest& req, ApiResponse& bad) {
    const auto& s = req.params.at("id");
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || v == 0) {
        bad = error_response(400, "bad_parameter", "task id '" + s + "' is not a positive integer");
        return std::nullopt;
    }
    return v;
}

// A handler of /v1/tasks/{id}/... that takes a JSON body: both are checked
// before `f` runs.
template <class F>
Router::Handler with_task_body(F f) {
    return [f](const ApiRequest& req) {
        ApiResponse bad;
        auto id = task_id_param(req, bad);
        if (!id) return bad;
        auto body = parse_body(req, bad);
        if (!body) return bad;
        return f(*id, std::move(*body));
    };
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
    ExecStream(TaskManager* tasks, uint64_t id, json body) : tasks_(tasks), id_(id), body_(std::move(body)) {}

    void start(std::function<void()> notify) override {
        {
            std::lock_guard lk(st_->mu);
            st_->notify = std::move(notify);
        }
        // The run outlives a client that goes away (it is audited either
        // way): the thread holds the shared state, not the stream.
        std::thread([st = st_, tasks = tasks_, id = id_, body = body_] {
            TaskManager::ExecHooks hooks;
            hooks.on_start = [st](const json& run) { st->push({"run", run.dump()}); };
            hooks.on_output = [st](int stream, std::string_view data) {
                st->push({stream == 1 ? "stdout" : "stderr",
                          json{{"data", std::string(data)}}.dump(-1, ' ', false, json::error_handler_t::replace)});
            };
            auto req = parse_exec(body);
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
    std::shared_ptr<State> st_ = std::make_shared<State>();
};

// The records a replay or a proposal reads: a tool's decisions, optionally
// of one task and a time range, at most max_records of them.
struct RecordRange {
    audit::Query q;
    uint64_t max_records = 100000;
};

// Reads tool/since_ns/until_ns/task/max_records of a replay or proposal body
// (other keys: `extra`); the error response when a field is wrong.
std::expected<RecordRange, ApiResponse> parse_record_range(const json& body, std::initializer_list<const char*> extra) {
    for (auto it = body.begin(); it != body.end(); ++it) {
        bool known = it.key() == "tool" || it.key() == "since_ns" || it.key() == "until_ns" || it.key() == "task" ||
                     it.key() == "max_records";
        for (const char* k : extra) known = known || it.key() == k;
        if (!known) return std::unexpected(error_response(400, "bad_request", "unknown key '" + it.key() + "'"));
    }
    if (!body.contains("tool") || !body["tool"].is_string())
        return std::unexpected(error_response(400, "bad_request", "tool: required"));
    RecordRange r;
    r.q.tool = body["tool"];
    r.q.kind = audit::RecordKind::Decision;
    r.q.limit = audit::Query::kMaxLimit;
    for (const char* k : {"since_ns", "until_ns", "task", "max_records"})
        if (body.contains(k) && !body[k].is_number_unsigned())
            return std::unexpected(error_response(400, "bad_request", std::string(k) + ": must be a non-negative integer"));
    if (body.contains("since_ns")) r.q.since_ns = body["since_ns"].get<int64_t>();
    if (body.contains("until_ns")) r.q.until_ns = body["until_ns"].get<int64_t>();
    if (body.contains("task")) r.q.task_id = body["task"].get<uint64_t>();
    r.max_records = body.value("max_records", uint64_t(100000));
    return r;
}

// Compiles a rule file's text for `tool` against the served rules directory;
// the 422 response (every diagnostic) when it does not compile.
std::expected<policy::CompileResult, ApiResponse> compile_for_tool(const TaskRoutes& ctx, const std::string& text,
                                                                   const std::string& name, const std::string& tool) {
    policy::CompileOptions opts;
    opts.rules_dirs = {ctx.catalog->rules_dir().string()};
    auto cand = policy::compile_string(text, name, opts);
    if (!cand.ok()) {
        json diags = json::array();
        for (const auto& d : cand.diagnostics)
            diags.push_back({{"file", d.loc.file}, {"line", d.loc.line}, {"col", d.loc.col}, {"message", d.message}});
        return std::unexpected(json_response(422, {{"error", {{"code", "candidate_invalid"},
                                                              {"message", policy::render_diagnostics(cand)},
                                                              {"diagnostics", diags}}}}));
    }
    if (cand.bundle->tool != tool)
        return std::unexpected(error_response(
            422, "candidate_invalid", "the candidate declares tool '" + cand.bundle->tool + "', not '" + tool + "'"));
    return cand;
}

// A task's variables: its own while it is live, else the work directory its
// runs recorded.
std::optional<policy::TaskVars> recorded_task_vars(const TaskRoutes& ctx, uint64_t task_id) {
    std::optional<policy::TaskVars> vars = ctx.tasks ? ctx.tasks->task_vars(task_id) : std::nullopt;
    if (vars || !task_id) return vars;
    audit::Query rq;
    rq.task_id = task_id;
    rq.kind = audit::RecordKind::RunStart;
    rq.limit = 1;
    if (auto r = ctx.store->query(rq); r && !r->rows.empty()) {
        auto d = json::parse(r->rows[0].detail, nullptr, false);
        if (d.is_object() && d.contains("workdir") && d["workdir"].is_string())
            vars = TaskManager::vars_of(task_id, d["workdir"].get<std::string>());
    }
    return vars;
}

// Each task's variables, read once (recorded_task_vars).
struct TaskVarsCache {
    const TaskRoutes& ctx;
    std::map<uint64_t, std::optional<policy::TaskVars>> known;
    const std::optional<policy::TaskVars>& of(uint64_t task_id) {
        auto it = known.find(task_id);
        if (it == known.end()) it = known.emplace(task_id, recorded_task_vars(ctx, task_id)).first;
        return it->second;
    }
};

// The tool's rules and a candidate's, instantiated per task (cached).
struct TaskBundles {
    TaskVarsCache& vars;
    const policy::Bundle& current;
    const policy::Bundle& candidate;
    struct Pair {
        std::optional<policy::Bundle> current, candidate;
        std::string why_not;
    };
    std::map<uint64_t, Pair> per_task;
    Pair& of(uint64_t task_id) {
        auto it = per_task.find(task_id);
        if (it != per_task.end()) return it->second;
        Pair& p = per_task[task_id];
        const auto& v = vars.of(task_id);
        if (!v) {
            p.why_not = "no task context (work directory) is known for task " + std::to_string(task_id);
            return p;
        }
        auto c = instantiate_tool(current, *v);
        auto n = instantiate_tool(candidate, *v);
        if (!c || !n) {
            p.why_not = !c ? c.error() : n.error();
            return p;
        }
        p.current = std::move(*c);
        p.candidate = std::move(*n);
        return p;
    }
};

// Calls fn for each record of the range, page by page, until it returns
// false or max_records were read; the error response of a failed query.
std::optional<ApiResponse> each_record(const TaskRoutes& ctx, RecordRange range,
                                       const std::function<bool(const audit::AuditRecord&)>& fn) {
    uint64_t seen = 0;
    bool more = true;
    while (more && seen < range.max_records) {
        auto res = ctx.store->query(range.q);
        if (!res) return error_response(500, "query_failed", res.error().message);
        for (const auto& rec : res->rows) {
            if (++seen > range.max_records || !fn(rec)) return std::nullopt;
        }
        more = res->next_after_seq.has_value();
        if (more) range.q.after_seq = *res->next_after_seq;
    }
    return std::nullopt;
}

// Replay: the recorded operations of a time range judged again under a
// candidate rule file.
ApiResponse replay(const TaskRoutes& ctx, const ApiRequest& req) {
    ApiResponse bad;
    auto body = parse_body(req, bad);
    if (!body) return bad;
    if (!body->is_object()) return error_response(400, "bad_request", "the body must be a JSON object");
    auto range = parse_record_range(*body, {"rules"});
    if (!range) return range.error();
    if (!body->contains("rules") || !(*body)["rules"].is_string())
        return error_response(400, "bad_request", "rules: the candidate rule file's text is required");
    const std::string tool = *range->q.tool;
    const ToolEntry* current = ctx.catalog->find(tool);
    if (!current) return error_response(404, "unknown_tool", "tool: no tool named '" + tool + "'");
    auto cand = compile_for_tool(ctx, (*body)["rules"].get<std::string>(), "candidate:" + tool + ".yaml", tool);
    if (!cand) return cand.error();
    TaskVarsCache vars{ctx, {}};
    TaskBundles bundles{vars, current->bundle, *cand->bundle, {}};

    uint64_t evaluated = 0, unchanged = 0, skipped = 0;
    json changed = json::array();
    std::map<std::string, uint64_t> skip_reasons;
    auto failed = each_record(ctx, *range, [&](const audit::AuditRecord& rec) {
        auto op = operation_of(rec);
        if (!op) {
            ++skipped;
            ++skip_reasons["operation not re-judgeable (" + std::string(audit::op_name(rec.op)) + ")"];
            return true;
        }
        auto& p = bundles.of(rec.task_id);
        if (!p.candidate) {
            ++skipped;
            ++skip_reasons[p.why_not];
            return true;
        }
        ++evaluated;
        auto now = policy::evaluate(*p.candidate, *op);
        // What was decided: the kernel's verdict for enforcing layers; for
        // observed operations (monitor) the rules in force today.
        std::string recorded(audit::decision_name(rec.decision));
        std::string before = recorded;
        if (rec.decision == BW_DECISION_OBSERVE)
            before = std::string(policy::to_string(policy::evaluate(*p.current, *op).verdict));
        std::string after(policy::to_string(now.verdict));
        if (before == after) {
            ++unchanged;
            return true;
        }
        changed.push_back({{"seq", rec.seq},
                           {"ts_ns", rec.ts_ns},
                           {"task_id", rec.task_id},
                           {"run_id", rec.run_id},
                           {"op", audit::op_name(rec.op)},
                           {"object", rec.object},
                           {"recorded", recorded},
                           {"before", before},
                           {"candidate", after},
                           {"candidate_rule", now.rule_id == BW_NO_RULE
                                                  ? json(nullptr)
                                                  : json(policy::describe_rule(*p.candidate, now.rule_id))},
                           {"explanation", explanation_of(*op, now)}});
        return changed.size() < 1000;
    });
    if (failed) return *failed;
    json reasons = json::object();
    for (const auto& [k, v] : skip_reasons) reasons[k] = v;
    return json_response(200, {{"tool", tool},
                               {"evaluated", evaluated},
                               {"unchanged", unchanged},
                               {"skipped", skipped},
                               {"skip_reasons", reasons},
                               {"changed", changed},
                               {"changed_truncated", changed.size() >= 1000},
                               {"candidate_hash", cand->bundle->hash}});
}

// Learning: the narrowest additions to a tool's rules that would have allowed
// what its recorded runs were denied (or, in audit mode, would have been),
// written as a rule file that extends the tool's own, compiled, and checked
// by judging every one of those operations again under it.
ApiResponse propose(const TaskRoutes& ctx, const ApiRequest& req) {
    ApiResponse bad;
    auto body = parse_body(req, bad);
    if (!body) return bad;
    if (!body->is_object()) return error_response(400, "bad_request", "the body must be a JSON object");
    auto range = parse_record_range(*body, {});
    if (!range) return range.error();
    const std::string tool = *range->q.tool;
    const ToolEntry* current = ctx.catalog->find(tool);
    if (!current) return error_response(404, "unknown_tool", "tool: no tool named '" + tool + "'");

    struct Seen {
        audit::AuditRecord rec;
        policy::Operation op;
    };
    std::vector<Seen> ops;
    std::map<std::string, uint64_t> skip_reasons;
    TaskVarsCache task_vars{ctx, {}};
    uint64_t refused = 0;
    // section -> entries (YAML flow text), in first-seen order, no repeats
    std::vector<std::pair<std::string, std::vector<std::string>>> sections;
    auto add = [&](const std::string& section, const std::string& entry) {
        auto it = std::find_if(sections.begin(), sections.end(), [&](const auto& s) { return s.first == section; });
        if (it == sections.end()) it = sections.insert(sections.end(), {section, {}});
        if (std::find(it->second.begin(), it->second.end(), entry) == it->second.end()) it->second.push_back(entry);
    };
    auto failed = each_record(ctx, *range, [&](const audit::AuditRecord& rec) {
        if (rec.decision != BW_DECISION_DENY && rec.decision != BW_DECISION_AUDIT) return true;
        ++refused;
        auto op = operation_of(rec);
        if (!op) {
            ++skip_reasons["operation not re-judgeable (" + std::string(audit::op_name(rec.op)) + ")"];
            return true;
        }
        // paths below the task's work directory are proposed as ${workdir}/...
        const auto& vars = task_vars.of(rec.task_id);
        auto path = [&](std::string p) {
            if (vars)
                if (auto w = vars->find("workdir"); w != vars->end() && (p == w->second || p.starts_with(w->second + "/")))
                    p = "${workdir}" + p.substr(w->second.size());
            return json(p).dump();
        };
        auto net = [&](const char* section) {
            std::string a = policy::format_addr(op->addr);  // IPv4 as a.b.c.d
            add(section, "{ cidr: \"" + a + (a.find(':') == std::string::npos ? "/32" : "/128") + "\", ports: [" +
                             std::to_string(op->port) + "], proto: " + (op->proto == BW_PROTO_TCP ? "tcp" : "udp") + " }");
        };
        switch (op->kind) {
        case policy::OpKind::Open:
            add(op->access == policy::FileAccess::Write ? "files.write" : "files.read", path(op->path));
            break;
        case policy::OpKind::Create: {
            auto slash = op->path.find_last_of('/');
            add("files.create", path(slash == 0 ? "/" : op->path.substr(0, slash)));
            break;
        }
        case policy::OpKind::Remove: add("files.remove", path(op->path)); break;
        case policy::OpKind::Exec: add("exec.allow", path(op->path)); break;
        case policy::OpKind::Connect: net("network.connect"); break;
        case policy::OpKind::Bind: net("network.bind"); break;
        case policy::OpKind::Send: net("network.send"); break;
        case policy::OpKind::Syscall:
            // A call refused because its ABI is not accepted (i386 through
            // int $0x80) needs the ABI, not the name.
            if (auto abi = policy::arch_name(op->arch); !abi.empty() && abi != "native" &&
                std::ranges::find(current->bundle.seccomp.arches, op->arch) == current->bundle.seccomp.arches.end()) {
                add("syscalls.architectures", "native");
                add("syscalls.architectures", std::string(abi));
            } else {
                add("syscalls.allow", op->syscall);
            }
            break;
        case policy::OpKind::Socket: return true;  // not produced by operation_of
        }
        ops.push_back({rec, *op});
        return true;
    });
    if (failed) return *failed;

    std::string text = "# Proposed by agentd: rules for " + std::to_string(ops.size()) + " recorded operation(s) of " +
                       tool + " that its rules refused.\ntool: " + tool + "\nextends: " + tool + "\n";
    std::string open_section;
    for (const auto& [section, entries] : sections) {
        auto dot = section.find('.');
        std::string top = section.substr(0, dot), key = section.substr(dot + 1);
        if (top != open_section) text += top + ":\n";
        open_section = top;
        text += "  " + key + ":\n";
        for (const auto& e : entries) text += "    - " + e + "\n";
    }
    json reasons = json::object();
    for (const auto& [k, v] : skip_reasons) reasons[k] = v;
    json out{{"tool", tool}, {"refused", refused}, {"operations", ops.size()}, {"skip_reasons", reasons}, {"rules", text}};
    if (ops.empty()) {
        out["allowed_by_proposal"] = 0;
        out["still_refused"] = json::array();
        return json_response(200, out);
    }
    auto cand = compile_for_tool(ctx, text, "proposal:" + tool + ".yaml", tool);
    if (!cand) return cand.error();
    json warnings = json::array();
    for (const auto& d : cand->diagnostics) warnings.push_back(d.loc.file + ":" + std::to_string(d.loc.line) + ": " + d.message);
    TaskBundles bundles{task_vars, current->bundle, *cand->bundle, {}};
    uint64_t allowed = 0;
    json still = json::array();
    for (const auto& s : ops) {
        auto refused_because = [&](const std::string& why) {
            still.push_back({{"seq", s.rec.seq}, {"op", audit::op_name(s.rec.op)}, {"object", s.rec.object},
                             {"explanation", why}});
        };
        auto& p = bundles.of(s.rec.task_id);
        if (!p.candidate) {
            refused_because(p.why_not);
            continue;
        }
        auto d = policy::evaluate(*p.candidate, s.op);
        if (d.verdict == policy::Verdict::Allow)
            ++allowed;
        else
            refused_because(explanation_of(s.op, d));
    }
    out["allowed_by_proposal"] = allowed;
    out["still_refused"] = still;
    out["warnings"] = warnings;
    out["proposal_hash"] = cand->bundle->hash;
    return json_response(200, out);
}

}  // namespace

void register_task_routes(Router& r, const TaskRoutes& ctx) {
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
              return reply(ctx.tasks->create(*body), 201);
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
    r.add("PUT", "/v1/tasks/{id}/grant",
          with_task_body([ctx](uint64_t id, json body) { return reply(ctx.tasks->update_grant(id, body)); }),
          {.offload = true});
    r.add("POST", "/v1/tasks/{id}/exec",
          with_task_body([ctx](uint64_t id, json body) {
              auto req = parse_exec(body);
              return req ? reply(ctx.tasks->exec(id, *req)) : from_error(req.error());
          }),
          {.offload = true, .long_running = true});
    r.add("POST", "/v1/tasks/{id}/cancel",
          with_task_body([ctx](uint64_t id, json body) { return reply(ctx.tasks->cancel(id, body)); }),
          {.offload = true});
    // Streamed exec: not offloaded, the handler only starts the run thread.
    r.add("POST", "/v1/tasks/{id}/exec/stream", with_task_body([ctx](uint64_t id, json body) {
              // Fail fast on what can be checked before the stream starts.
              if (auto t = ctx.tasks->get(id); !t) return from_error(t.error());
              ApiResponse resp;
              resp.content_type = "text/event-stream";
              resp.stream = std::make_shared<ExecStream>(ctx.tasks, id, std::move(body));
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
    case TaskErrc::UnknownTool: return 404;
    case TaskErrc::TaskClosed:
    case TaskErrc::WorkdirGone: return 409;
    case TaskErrc::FileRefused:
    case TaskErrc::InstantiateFailed:
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
