#include "tasks/tasks.h"

#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

#include "audit/audit_db.h"
#include "sandbox/cgroup.h"
#include "bulwark/policy/evaluator.h"
#include "bulwark/policy/grants.h"
#include "bulwark/policy/match.h"
#include "common/fd.h"
#include "tasks/grant_json.h"
#include "audit/metrics.h"
#include "tasks/record_operation.h"
#include "kaudit/run_registry.h"
#include "tasks/run_binding.h"
#include "sandbox/run_report.h"
#include "sandbox/spawner.h"
#include "tasks/tool_catalog.h"
#include "tasks/workdir_files.h"

namespace bulwark {

using nlohmann::json;
using SysClock = std::chrono::system_clock;

namespace {

int64_t to_ns(SysClock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::unexpected<ApiError> err(int status, std::string code, std::string message, json extra = json::object()) {
    return std::unexpected(ApiError{status, std::move(code), std::move(message), std::move(extra)});
}

// Run ids and task ids continue after the largest the store holds, so a
// restarted daemon never reuses one.
std::pair<uint64_t, uint64_t> max_ids(audit::AuditStore* store) {
    if (!store) return {0, 0};
    auto r = store->read_sql("SELECT coalesce(max(task_id),0), coalesce(max(run_id),0) FROM records",
                             std::chrono::milliseconds(10000));
    if (!r || !r->is_array() || r->empty()) return {0, 0};
    const auto& row = (*r)[0];
    return {row[0].get<uint64_t>(), row[1].get<uint64_t>()};
}

const char* outcome_name(RunOutcome o) {
    switch (o) {
    case RunOutcome::Exited: return "exited";
    case RunOutcome::Signaled: return "signaled";
    case RunOutcome::Refused: return "refused";
    case RunOutcome::SetupFailed: return "setup_failed";
    case RunOutcome::ExecFailed: return "exec_failed";
    }
    return "?";
}

}  // namespace

struct TaskManager::Task {
    struct Epoch {
        uint64_t n = 0;
        uint64_t policy_version = 0;
        json grant;  // null: the tools' rules as they are
        int64_t started_ns = 0;
        std::optional<int64_t> ended_ns;
        std::optional<SysClock::time_point> expires_at;
        std::string reason;
        std::map<std::string, std::shared_ptr<const policy::Bundle>> bundles;  // narrowed, per tool
        size_t revert_to = 0;  // time-boxed: index of the epoch to return to
    };
    struct Run {
        uint64_t run_id = 0;
        std::string tool;
        std::vector<std::string> argv;
        uint64_t epoch = 0;
        int64_t started_ns = 0;
        std::optional<int64_t> ended_ns;
        std::optional<int> exit_status;
        std::string outcome = "running";
        int cancel_fd = -1;  // eventfd, owned by exec() while running
        std::string client_ref;  // the exec's client_ref: what cancel() finds it by
        // The run's binding to the decision sources while it runs (a grant
        // change rebinds it).
        std::shared_ptr<RunBinding> binding;

        // Tells a running run's exec to kill it; false if it is not running.
        bool request_cancel() const {
            uint64_t one = 1;
            return !ended_ns && cancel_fd >= 0 && ::write(cancel_fd, &one, sizeof one) == sizeof one;
        }
    };

    uint64_t id = 0;
    std::string label;
    std::string workdir;
    bool owns_workdir = false;
    std::vector<std::string> tools;
    policy::TaskVars vars;
    std::map<std::string, std::shared_ptr<const policy::Bundle>> instantiated;  // per tool, no grant
    // Tools asked for that could not be instantiated (create with
    // skip_unavailable): name -> why. They are not among `tools`.
    std::vector<std::pair<std::string, std::string>> unavailable;
    std::vector<Epoch> epochs;
    std::vector<Run> runs;
    bool closed = false;
    int64_t created_ns = 0;

    const Epoch& current() const { return epochs.back(); }

    json summary() const {
        const auto& e = current();
        json j{{"id", id},
               {"label", label},
               {"workdir", workdir},
               {"tools", tools},
               {"state", closed ? "closed" : "open"},
               {"epoch", e.n},
               {"policy_version", e.policy_version},
               {"grant", e.grant},
               {"created_ns", created_ns}};
        j["expires_ns"] = e.expires_at ? json(to_ns(*e.expires_at)) : json(nullptr);
        json un = json::array();
        for (const auto& [tool, why] : unavailable) un.push_back({{"tool", tool}, {"error", why}});
        j["unavailable"] = std::move(un);
        size_t running = std::count_if(runs.begin(), runs.end(), [](const Run& r) { return !r.ended_ns; });
        j["running"] = running;
        j["runs"] = runs.size();
        return j;
    }

    json detail() const {
        json j = summary();
        json ep = json::array();
        for (const auto& e : epochs)
            ep.push_back({{"epoch", e.n},
                          {"policy_version", e.policy_version},
                          {"grant", e.grant},
                          {"started_ns", e.started_ns},
                          {"ended_ns", e.ended_ns ? json(*e.ended_ns) : json(nullptr)},
                          {"expires_ns", e.expires_at ? json(to_ns(*e.expires_at)) : json(nullptr)},
                          {"reason", e.reason}});
        json rs = json::array();
        for (const auto& r : runs)
            rs.push_back({{"run_id", r.run_id},
                          {"tool", r.tool},
                          {"argv", r.argv},
                          {"epoch", r.epoch},
                          {"started_ns", r.started_ns},
                          {"ended_ns", r.ended_ns ? json(*r.ended_ns) : json(nullptr)},
                          {"exit_status", r.exit_status ? json(*r.exit_status) : json(nullptr)},
                          {"outcome", r.outcome}});
        j["epochs"] = std::move(ep);
        j["runs"] = std::move(rs);
        return j;
    }
};

TaskManager::TaskManager(const ToolCatalog& catalog, audit::AuditStore* store, TaskOptions opts)
    : catalog_(catalog), store_(store), opts_(std::move(opts)) {
    if (!opts_.resolve) opts_.resolve = resolve_host;
    auto [t, r] = max_ids(store_);
    next_task_id_ = t + 1;
    next_run_id_ = r + 1;
    // Policy versions are unique per daemon lifetime and above any the
    // store holds, so a record's version always names one epoch.
    if (store_) {
        auto v = store_->read_sql("SELECT coalesce(max(policy_version),0) FROM records", std::chrono::milliseconds(10000));
        if (v && v->is_array() && !v->empty()) next_policy_version_ = (*v)[0][0].get<uint64_t>() + 1;
    }
    timer_ = std::jthread([this](std::stop_token st) { timer_loop(st); });
}

std::expected<json, ApiError> TaskManager::cancel(uint64_t id, const json& body) {
    if (!body.is_object() || body.size() != 1 || !body.contains("client_ref") || !body["client_ref"].is_string())
        return err(400, "bad_request", "the body must be {\"client_ref\": \"<the exec's client_ref>\"}");
    const std::string ref = body["client_ref"];
    std::lock_guard lk(mu_);
    auto it = tasks_.find(id);
    if (it == tasks_.end()) return err(404, "unknown_task", "no task " + std::to_string(id));
    json runs = json::array();
    for (const auto& r : it->second->runs)
        if (r.client_ref == ref && r.request_cancel()) runs.push_back(r.run_id);
    return json{{"task_id", id}, {"client_ref", ref}, {"cancelled_runs", runs}};
}

size_t TaskManager::cancel_all() {
    std::lock_guard lk(mu_);
    shutting_down_ = true;
    size_t n = 0;
    for (auto& [id, t] : tasks_)
        for (const auto& r : t->runs) n += r.request_cancel();
    return n;
}

TaskManager::~TaskManager() {
    cancel_all();
    {
        std::unique_lock lk(mu_);
        execs_done_.wait(lk, [&] { return active_execs_ == 0; });
    }
    timer_.request_stop();
    timer_cv_.notify_all();
}

std::expected<json, ApiError> TaskManager::create(const json& body) {
    if (!body.is_object()) return err(400, "bad_request", "the body must be a JSON object");
    for (auto it = body.begin(); it != body.end(); ++it)
        if (it.key() != "tools" && it.key() != "workdir" && it.key() != "label" && it.key() != "grant" &&
            it.key() != "skip_unavailable")
            return err(400, "bad_request", "unknown key '" + it.key() + "'");
    if (body.contains("skip_unavailable") && !body["skip_unavailable"].is_boolean())
        return err(400, "bad_request", "skip_unavailable: must be a boolean");
    const bool skip_unavailable = body.value("skip_unavailable", false);
    if (!body.contains("tools") || !body["tools"].is_array() || body["tools"].empty())
        return err(400, "bad_request", "tools: a non-empty array of tool names is required");
    auto t = std::make_shared<Task>();
    for (size_t i = 0; i < body["tools"].size(); ++i) {
        const auto& n = body["tools"][i];
        std::string field = "tools[" + std::to_string(i) + "]";
        if (!n.is_string()) return err(400, "bad_request", field + ": must be a string");
        const auto& name = n.get_ref<const std::string&>();
        if (!catalog_.find(name)) return err(404, "unknown_tool", field + ": no tool named '" + name + "'");
        if (std::find(t->tools.begin(), t->tools.end(), name) != t->tools.end())
            return err(400, "bad_request", field + ": '" + name + "' is listed twice");
        t->tools.push_back(name);
    }
    if (body.contains("label")) {
        if (!body["label"].is_string() || body["label"].get_ref<const std::string&>().size() > 256)
            return err(400, "bad_request", "label: must be a string of at most 256 bytes");
        t->label = body["label"].get<std::string>();
    }

    std::unique_lock lk(mu_);
    size_t open = std::count_if(tasks_.begin(), tasks_.end(), [](auto& kv) { return !kv.second->closed; });
    if (open >= opts_.max_tasks)
        return err(429, "too_many_tasks", "at most " + std::to_string(opts_.max_tasks) + " open tasks");
    t->id = next_task_id_++;
    lk.unlock();

    namespace fs = std::filesystem;
    std::error_code ec;
    if (body.contains("workdir")) {
        if (!body["workdir"].is_string()) return err(400, "bad_request", "workdir: must be a string");
        const auto& w = body["workdir"].get_ref<const std::string&>();
        if (w.empty() || w.front() != '/') return err(400, "bad_request", "workdir: must be an absolute path");
        auto canon = fs::canonical(w, ec);
        if (ec || !fs::is_directory(canon)) return err(400, "bad_workdir", "workdir: " + w + ": not a directory");
        t->workdir = canon.string();
    } else {
        if (opts_.work_root.empty()) return err(400, "bad_request", "workdir: required (no default work root)");
        fs::path dir = opts_.work_root / std::to_string(t->id);
        fs::create_directories(dir, ec);
        if (ec) return err(500, "workdir_failed", "cannot create " + dir.string() + ": " + ec.message());
        // The tool runs as an unprivileged id (spawner.h): the work directory is its own.
        if (::chown(dir.c_str(), 65534, 65534) != 0 || ::chmod(dir.c_str(), 0700) != 0)
            return err(500, "workdir_failed", "cannot hand " + dir.string() + " to uid 65534: " + std::strerror(errno));
        t->workdir = dir.string();
        t->owns_workdir = true;
    }
    if (t->workdir == "/") return err(400, "bad_workdir", "workdir: must not be /");

    t->vars["workdir"] = t->workdir;
    t->vars["home"] = t->workdir;
    t->vars["tmp"] = "/tmp";
    t->vars["task_id"] = "task-" + std::to_string(t->id);
    for (const auto& name : t->tools) {
        auto b = instantiate_tool(catalog_.find(name)->bundle, t->vars, opts_.resolve);
        if (!b && !skip_unavailable) return err(422, "instantiate_failed", name + ": " + b.error());
        if (!b) {
            // Left out of the task and said so (in the task, and to the caller).
            t->unavailable.emplace_back(name, b.error());
            continue;
        }
        t->instantiated[name] = std::make_shared<const policy::Bundle>(std::move(*b));
    }
    if (!t->unavailable.empty()) {
        std::erase_if(t->tools, [&](const std::string& n) { return !t->instantiated.contains(n); });
        if (t->tools.empty()) {
            std::string why;
            for (const auto& [tool, e] : t->unavailable) why += (why.empty() ? "" : "; ") + tool + ": " + e;
            return err(422, "instantiate_failed", "no tool of the task can be instantiated: " + why);
        }
        for (const auto& [tool, e] : t->unavailable)
            spdlog::warn("task {}: tool {} is unavailable and left out: {}", t->id, tool, e);
    }
    t->created_ns = to_ns(SysClock::now());
    lk.lock();
    auto r = switch_epoch(*t, body.value("grant", json(nullptr)), std::nullopt, "create");
    if (!r) return std::unexpected(r.error());
    tasks_[t->id] = t;
    if (opts_.metrics) opts_.metrics->tasks_open.fetch_add(1, std::memory_order_relaxed);
    json summary = t->summary();
    // The task's epoch record carries its id: once it is durable, a daemon
    // restarted after a crash numbers its tasks above it, so a client of the
    // dead daemon holding this id never reaches another client's task.
    uint64_t seq = store_ ? store_->last_seq() : 0;
    lk.unlock();
    if (store_ && !store_->wait_committed(seq, std::chrono::milliseconds(5000)))
        spdlog::warn("task {}: its epoch record was not acknowledged within 5 s", t->id);
    return summary;
}

// Builds the epoch's bundles (narrowing every tool), then appends it. Called
// with mu_ held.
std::expected<json, ApiError> TaskManager::switch_epoch(Task& t, const json& grant_json,
                                                        std::optional<std::chrono::milliseconds> timebox,
                                                        std::string reason) {
    auto now = SysClock::now();
    Task::Epoch e;
    e.grant = grant_json;
    e.reason = std::move(reason);
    e.started_ns = to_ns(now);
    if (timebox) e.expires_at = now + *timebox;
    if (grant_json.is_null()) {
        e.bundles = t.instantiated;
    } else {
        auto g = grant_from_json(grant_json, t.vars);
        if (!g) return err(400, "bad_grant", g.error());
        g->name = "task " + std::to_string(t.id);
        if (e.expires_at) g->expires_at = e.expires_at;
        std::vector<std::string> reasons;
        for (const auto& name : t.tools) {
            auto nb = policy::apply_grant(*t.instantiated.at(name), *g, now, opts_.resolve);
            if (!nb) {
                for (auto& r : nb.error().reasons) reasons.push_back(name + ": " + r);
                continue;
            }
            e.bundles[name] = std::make_shared<const policy::Bundle>(std::move(nb->bundle));
        }
        if (!reasons.empty()) {
            std::string msg = "the grant would widen what the rules allow";
            return err(403, "grant_widens", msg, {{"reasons", reasons}});
        }
    }
    e.n = t.epochs.empty() ? 1 : t.epochs.back().n + 1;
    e.policy_version = next_policy_version_++;
    if (!t.epochs.empty()) t.epochs.back().ended_ns = e.started_ns;

    // Running tools follow the switch on their next operation (BPF binding);
    // seccomp and Landlock are fixed at their launch.
    for (auto& r : t.runs) {
        if (r.ended_ns || !r.binding) continue;
        if (auto rb = r.binding->rebind(*e.bundles.at(r.tool), e.policy_version); !rb)
            spdlog::warn("task {} run {}: epoch {} not applied to the running tool: {}", t.id, r.run_id, e.n, rb.error());
    }
    if (store_) {
        for (const auto& name : t.tools) {
            auto rec = audit::policy_epoch_record(
                name, e.policy_version, e.reason,
                {{"epoch", e.n}, {"grant", e.grant}, {"hash", e.bundles.at(name)->hash},
                 {"expires_ns", e.expires_at ? json(to_ns(*e.expires_at)) : json(nullptr)}});
            rec.task_id = t.id;
            store_->enqueue(std::move(rec));
        }
    }
    t.epochs.push_back(std::move(e));
    if (opts_.metrics) opts_.metrics->epochs.fetch_add(1, std::memory_order_relaxed);
    ++timer_gen_;
    timer_cv_.notify_all();
    return json::object();
}

json TaskManager::list() const {
    std::lock_guard lk(mu_);
    json out = json::array();
    for (const auto& [id, t] : tasks_) out.push_back(t->summary());
    return {{"tasks", std::move(out)}};
}

std::expected<json, ApiError> TaskManager::get(uint64_t id) const {
    std::lock_guard lk(mu_);
    auto it = tasks_.find(id);
    if (it == tasks_.end()) return err(404, "unknown_task", "no task " + std::to_string(id));
    return it->second->detail();
}

std::expected<json, ApiError> TaskManager::update_grant(uint64_t id, const json& body) {
    if (!body.is_object()) return err(400, "bad_request", "the body must be a JSON object");
    for (auto it = body.begin(); it != body.end(); ++it)
        if (it.key() != "grant" && it.key() != "expires_in_ms")
            return err(400, "bad_request", "unknown key '" + it.key() + "'");
    if (!body.contains("grant")) return err(400, "bad_request", "grant: required (null for the tools' rules as they are)");
    std::optional<std::chrono::milliseconds> box;
    if (body.contains("expires_in_ms")) {
        const auto& v = body["expires_in_ms"];
        if (!v.is_number_unsigned() || v.get<uint64_t>() == 0 || v.get<uint64_t>() > 7ull * 24 * 3600 * 1000)
            return err(400, "bad_request", "expires_in_ms: must be 1..604800000");
        box = std::chrono::milliseconds(v.get<uint64_t>());
    }
    std::lock_guard lk(mu_);
    auto it = tasks_.find(id);
    if (it == tasks_.end()) return err(404, "unknown_task", "no task " + std::to_string(id));
    Task& t = *it->second;
    if (t.closed) return err(409, "task_closed", "task " + std::to_string(id) + " is closed");
    // A time-boxed grant returns to the epoch in force before it; a plain
    // update replaces the base.
    size_t base = t.epochs.size() - 1;
    if (t.current().expires_at) base = t.current().revert_to;
    auto r = switch_epoch(t, body["grant"], box, box ? "timebox" : "update");
    if (!r) return std::unexpected(r.error());
    if (box) t.epochs.back().revert_to = base;
    return t.summary();
}

size_t TaskManager::expire_due(SysClock::time_point now) {
    std::lock_guard lk(mu_);
    size_t n = 0;
    for (auto& [id, t] : tasks_) {
        if (t->closed || !t->current().expires_at || *t->current().expires_at > now) continue;
        const auto& back = t->epochs.at(t->current().revert_to);
        json grant = back.grant;
        auto r = switch_epoch(*t, grant, std::nullopt, "expiry");
        if (!r) {
            // The earlier grant was valid against the same rules: this cannot
            // widen. Should it fail anyway, close the task rather than keep
            // the expired grant.
            spdlog::error("task {}: returning from a time-boxed grant failed ({}); closing the task", id,
                          r.error().message);
            t->closed = true;
            if (opts_.metrics) opts_.metrics->tasks_open.fetch_sub(1, std::memory_order_relaxed);
            continue;
        }
        ++n;
    }
    return n;
}

void TaskManager::timer_loop(std::stop_token st) {
    std::unique_lock lk(mu_);
    while (!st.stop_requested()) {
        std::optional<SysClock::time_point> next;
        for (auto& [id, t] : tasks_)
            if (!t->closed && t->current().expires_at && (!next || *t->current().expires_at < *next))
                next = t->current().expires_at;
        uint64_t gen = timer_gen_;
        auto changed = [&] { return timer_gen_ != gen; };
        if (!next) {
            timer_cv_.wait(lk, st, changed);
            continue;
        }
        if (timer_cv_.wait_until(lk, st, *next, changed)) continue;
        if (st.stop_requested()) break;
        if (SysClock::now() >= *next) {
            lk.unlock();
            expire_due(SysClock::now());
            lk.lock();
        }
    }
}

std::expected<json, ApiError> TaskManager::close(uint64_t id) {
    std::lock_guard lk(mu_);
    auto it = tasks_.find(id);
    if (it == tasks_.end()) return err(404, "unknown_task", "no task " + std::to_string(id));
    Task& t = *it->second;
    size_t cancelled = 0;
    if (!t.closed) {
        t.closed = true;
        if (opts_.metrics) opts_.metrics->tasks_open.fetch_sub(1, std::memory_order_relaxed);
        t.epochs.back().ended_ns = to_ns(SysClock::now());
        for (const auto& r : t.runs) cancelled += r.request_cancel();
        if (store_)
            for (const auto& name : t.tools) {
                auto rec = audit::policy_epoch_record(name, t.current().policy_version, "close",
                                                      {{"epoch", t.current().n}, {"cancelled_runs", cancelled}});
                rec.task_id = t.id;
                store_->enqueue(std::move(rec));
            }
    }
    json j = t.summary();
    j["cancelled_runs"] = cancelled;
    return j;
}

std::shared_ptr<const policy::Bundle> TaskManager::tool_bundle(uint64_t id, const std::string& tool,
                                                               bool narrowed) const {
    std::lock_guard lk(mu_);
    auto it = tasks_.find(id);
    if (it == tasks_.end()) return nullptr;
    const auto& map = narrowed ? it->second->current().bundles : it->second->instantiated;
    auto b = map.find(tool);
    return b == map.end() ? nullptr : b->second;
}

std::optional<policy::TaskVars> TaskManager::task_vars(uint64_t id) const {
    std::lock_guard lk(mu_);
    auto it = tasks_.find(id);
    if (it == tasks_.end()) return std::nullopt;
    return it->second->vars;
}

namespace {

struct ExecRequest {
    std::string tool;
    std::vector<std::string> argv;
    std::optional<std::string> stdin_data;
    std::optional<uint64_t> timeout_ms;
    std::vector<WorkdirFile> files;
    std::string client_ref;  // the caller's name for the run (POST .../cancel)
};

// A request the server understood but refuses to carry out (422): a working
// file that may not be written.
struct ExecParseError {
    int status = 400;
    std::string message;
};

std::expected<ExecRequest, ExecParseError> parse_exec(const json& body) {
    auto bad = [](std::string m) { return std::unexpected(ExecParseError{400, std::move(m)}); };
    if (!body.is_object()) return bad("the body must be a JSON object");
    ExecRequest r;
    for (auto it = body.begin(); it != body.end(); ++it)
        if (it.key() != "tool" && it.key() != "argv" && it.key() != "stdin" && it.key() != "timeout_ms" &&
            it.key() != "files" && it.key() != "client_ref")
            return bad("unknown key '" + it.key() + "'");
    if (!body.contains("tool") || !body["tool"].is_string()) return bad("tool: a tool name is required");
    r.tool = body["tool"].get<std::string>();
    if (!body.contains("argv") || !body["argv"].is_array() || body["argv"].empty())
        return bad("argv: a non-empty array of strings is required");
    if (body["argv"].size() > 4096) return bad("argv: at most 4096 arguments");
    size_t total = 0;
    for (size_t i = 0; i < body["argv"].size(); ++i) {
        const auto& a = body["argv"][i];
        if (!a.is_string()) return bad("argv[" + std::to_string(i) + "]: must be a string");
        const auto& s = a.get_ref<const std::string&>();
        if (s.find('\0') != std::string::npos) return bad("argv[" + std::to_string(i) + "]: contains NUL");
        total += s.size() + 1;
        r.argv.push_back(s);
    }
    if (total > 256 * 1024) return bad("argv: more than 256 KiB in all");
    if (body.contains("stdin")) {
        if (!body["stdin"].is_string()) return bad("stdin: must be a string");
        r.stdin_data = body["stdin"].get<std::string>();
    }
    if (body.contains("timeout_ms")) {
        const auto& v = body["timeout_ms"];
        if (!v.is_number_unsigned() || v.get<uint64_t>() == 0) return bad("timeout_ms: must be a positive integer");
        r.timeout_ms = v.get<uint64_t>();
    }
    if (body.contains("client_ref")) {
        const auto& v = body["client_ref"];
        if (!v.is_string() || v.get_ref<const std::string&>().empty() || v.get_ref<const std::string&>().size() > 128)
            return bad("client_ref: must be a string of 1 to 128 bytes");
        r.client_ref = v.get<std::string>();
    }
    if (body.contains("files")) {
        auto f = parse_workdir_files(body["files"]);
        if (!f) return std::unexpected(ExecParseError{422, f.error()});
        r.files = std::move(*f);
    }
    return r;
}

// What an agent can act on for one denial: the rule that decided, and
// whether the tool's own rules would allow it (then the task's grant is what
// stands in the way, and a grant update naming it would allow it).
json explain_denial(const json& row, const audit::AuditRecord& rec, const policy::Bundle& narrowed,
                    const policy::Bundle& tool, bool has_grant) {
    json d{{"seq", rec.seq},
           {"layer", row.value("layer", "")},
           {"op", row.value("op", "")},
           {"object", rec.object},
           {"decision", row.value("decision", "")},
           {"errno", rec.err}};
    d["rule"] = rec.rule_file.empty() ? json(policy::describe_rule(narrowed, rec.rule_id))
                                      : json(rec.rule_file + ":" + std::to_string(rec.rule_line) + " " + rec.rule_text);
    d["grant_would_allow"] = nullptr;
    auto op = operation_of(rec);
    if (!op) {
        d["explanation"] = "denied by the " + d["layer"].get<std::string>() + " layer";
        return d;
    }
    auto now = policy::evaluate(narrowed, *op);
    d["explanation"] = explanation_of(*op, now);
    // A layer that cannot name its rule (a Landlock or seccomp denial from
    // the kernel's audit log): the rule the policy decides it with.
    if (rec.rule_file.empty() && rec.rule_id == BW_NO_RULE && now.rule_id != BW_NO_RULE)
        d["rule"] = policy::describe_rule(narrowed, now.right_rule_id);
    if (has_grant && op->kind != policy::OpKind::Syscall) {  // grants name files and network, not syscalls
        auto base = policy::evaluate(tool, *op);
        if (base.verdict == policy::Verdict::Allow) {
            json suggestion;
            if (!op->path.empty())
                suggestion = {{"files", {{{"path", op->path}, {"rights", rights_json(policy::required_right(*op))}}}}};
            else
                suggestion = {{"network",
                               {{{"cidr", policy::format_addr(op->addr)},
                                 {"ports", std::to_string(op->port)},
                                 {"proto", {op->proto == BW_PROTO_TCP ? "tcp" : "udp"}},
                                 {"ops", {std::string(policy::to_string(op->kind))}}}}}};
            d["grant_would_allow"] = {
                {"message", "the tool's rules allow this (" + policy::describe_rule(tool, base.right_rule_id) +
                                "); the task's grant does not. A grant that also names it would allow it."},
                {"tool_rule", policy::describe_rule(tool, base.right_rule_id)},
                {"grant", suggestion}};
        }
    }
    return d;
}

}  // namespace

std::expected<json, ApiError> TaskManager::exec(uint64_t id, const json& body, ExecHooks hooks) {
    {
        std::lock_guard lk(mu_);
        ++active_execs_;
    }
    struct Done {
        TaskManager* m;
        ~Done() {
            std::lock_guard lk(m->mu_);
            if (--m->active_execs_ == 0) m->execs_done_.notify_all();
        }
    } done{this};
    auto req = parse_exec(body);
    if (!req)
        return req.error().status == 422 ? err(422, "file_refused", req.error().message)
                                         : err(400, "bad_request", req.error().message);
    if (store_ && !store_->accepting_runs())
        return err(503, "store_refusing", "the audit store refuses new runs: " + store_->status().reason);
    std::shared_ptr<Task> task;
    std::shared_ptr<const policy::Bundle> bundle, tool_bundle;
    uint64_t run_id = 0, epoch = 0, version = 0, task_id = id;
    std::optional<SysClock::time_point> expires_at;
    bool has_grant = false;
    // Admission: the task and its tool, and its work directory still there
    // (someone may have removed it from the host): no run in a directory
    // that is gone.
    std::string workdir;
    {
        std::lock_guard lk(mu_);
        auto it = tasks_.find(id);
        if (it == tasks_.end()) return err(404, "unknown_task", "no task " + std::to_string(id));
        if (it->second->closed) return err(409, "task_closed", "task " + std::to_string(id) + " is closed");
        if (!it->second->current().bundles.contains(req->tool))
            return err(404, "unknown_tool", "tool: '" + req->tool + "' is not a tool of task " + std::to_string(id));
        workdir = it->second->workdir;
    }
    struct stat st{};
    bool missing = ::lstat(workdir.c_str(), &st) != 0;
    if (missing || !S_ISDIR(st.st_mode))
        return err(409, "workdir_gone",
                   "task " + std::to_string(id) + ": its work directory " + workdir + " is " +
                       (missing ? "gone (removed from the host)" : "no longer a directory") +
                       "; make it again (owned by the tool's uid) or create another task");
    // Working files land before the run is registered: a refused file means
    // no run at all.
    json files_written = json::array();
    if (!req->files.empty()) {
        auto w = write_workdir_files(workdir, req->files);
        if (!w) return err(422, "file_refused", w.error());
        files_written = std::move(*w);
    }
    Fd cancel(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!cancel) return err(500, "internal", std::string("eventfd: ") + std::strerror(errno));
    {
        std::lock_guard lk(mu_);
        auto it = tasks_.find(id);
        if (it == tasks_.end()) return err(404, "unknown_task", "no task " + std::to_string(id));
        task = it->second;
        if (shutting_down_) return err(503, "shutting_down", "agentd is shutting down; no new runs");
        if (task->closed) return err(409, "task_closed", "task " + std::to_string(id) + " is closed");
        auto b = task->current().bundles.find(req->tool);
        if (b == task->current().bundles.end())
            return err(404, "unknown_tool", "tool: '" + req->tool + "' is not a tool of task " + std::to_string(id));
        bundle = b->second;
        tool_bundle = task->instantiated.at(req->tool);
        epoch = task->current().n;
        version = task->current().policy_version;
        expires_at = task->current().expires_at;
        has_grant = !task->current().grant.is_null();
        run_id = next_run_id_++;
        Task::Run r;
        r.run_id = run_id;
        r.tool = req->tool;
        r.argv = req->argv;
        r.epoch = epoch;
        r.started_ns = to_ns(SysClock::now());
        r.cancel_fd = cancel.get();
        r.client_ref = req->client_ref;
        task->runs.push_back(std::move(r));
        if (task->runs.size() > opts_.max_runs_per_task) {
            auto done = std::find_if(task->runs.begin(), task->runs.end(), [](const Task::Run& x) { return x.ended_ns.has_value(); });
            if (done != task->runs.end()) task->runs.erase(done);
        }
    }
    auto finish_run = [&](std::string outcome, std::optional<int> status) {
        std::lock_guard lk(mu_);
        for (auto& r : task->runs)
            if (r.run_id == run_id) {
                r.ended_ns = to_ns(SysClock::now());
                r.outcome = std::move(outcome);
                r.exit_status = status;
                r.cancel_fd = -1;
                r.binding.reset();
            }
    };

    // The run's own limits: the epoch's, lowered by the request and by the
    // end of a time-boxed grant.
    // (A copy of the epoch's bundle only when a limit is lowered: copying
    // one costs more than the rest of the request's bookkeeping.)
    std::optional<policy::Bundle> lowered;
    auto lower = [&](uint64_t ms) {
        if (!lowered) lowered = *bundle;
        lowered->limits.timeout_ms = std::min(lowered->limits.timeout_ms.value_or(ms), ms);
    };
    if (req->timeout_ms) lower(*req->timeout_ms);
    if (expires_at) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*expires_at - SysClock::now()).count();
        lower(static_cast<uint64_t>(std::max<int64_t>(1, left)));
    }
    const policy::Bundle& run_bundle = lowered ? *lowered : *bundle;

    // What the run_start record holds; the reply adds the ids.
    json start_detail{{"argv", req->argv}, {"epoch", epoch}, {"workdir", task->workdir}, {"files", files_written}};
    if (!req->client_ref.empty()) start_detail["client_ref"] = req->client_ref;
    json start = start_detail;
    start.update({{"run_id", run_id}, {"task_id", task_id}, {"tool", req->tool}, {"policy_version", version}});
    // The run's start record must be durable before the tool's first
    // instruction. It is enqueued once the launch is planned (RunRequest::
    // on_plan: it names the rules run with no layer holding them) and waited
    // for at the last step before exec (RunRequest::before_exec), so its
    // commit overlaps the sandbox setup. A launch refused before it was
    // planned gets its start record after run_tool, before its exit record.
    std::optional<uint64_t> start_seq;
    bool start_enqueued = false, start_not_taken = false, start_unacknowledged = false;
    // The run's records as the store accepts them: the reply's decisions.
    std::unique_ptr<audit::RunWatch> watch =
        store_ ? store_->watch_run(task_id, run_id, audit::Query::kMaxLimit) : nullptr;
    auto enqueue_start = [&](const RunReport* plan) {
        if (start_enqueued) return;
        start_enqueued = true;
        if (plan && !plan->coverage_summary.empty()) {
            start_detail["rules"] = plan->coverage_summary;
            if (!plan->unenforced.empty()) start_detail["rules_unenforced"] = plan->unenforced;
            start["rules"] = start_detail["rules"];
            if (!plan->unenforced.empty()) start["rules_unenforced"] = plan->unenforced;
        }
        // What a restarted daemon removes if this one dies during the run.
        if (plan && !plan->placeholders.empty()) start_detail["placeholders"] = plan->placeholders;
        if (!store_) return;
        start_seq = store_->enqueue(audit::run_start_record(task_id, run_id, req->tool, version, start_detail));
        if (!start_seq) start_not_taken = true;
    };

    bool announced = false;
    auto announce_start = [&] {
        if (!announced && hooks.on_start) hooks.on_start(start);
        announced = true;
    };
    RunRequest rr;
    rr.on_plan = [&](const RunReport& plan) -> std::string {
        enqueue_start(&plan);
        return start_not_taken ? "the audit store did not take the run's start record; the tool was not started" : "";
    };
    rr.before_exec = [&]() -> std::string {
        if (start_seq && !store_->wait_committed(*start_seq, opts_.run_start_ack)) {
            start_unacknowledged = true;
            return "the audit store did not acknowledge the run's start; the tool was not started";
        }
        announce_start();
        return "";
    };
    rr.argv = req->argv;
    rr.workdir = task->workdir;
    rr.cgroup_label = "r" + std::to_string(run_id);
    rr.stdin_data = req->stdin_data;
    rr.on_output = hooks.on_output;
    rr.cancel_fd = cancel.get();
    rr.caller_env = std::vector<std::pair<std::string, std::string>>{};  // never the daemon's environment
    auto binding = std::make_shared<RunBinding>(opts_.sources, run_bundle,
                                                RunContext{task_id, run_id, req->tool, version, bundle});
    binding->prepare(rr);
    {
        std::lock_guard lk(mu_);
        for (auto& r : task->runs)
            if (r.run_id == run_id) r.binding = binding;
    }
    auto t_run = std::chrono::steady_clock::now();
    if (opts_.metrics) opts_.metrics->runs_running.fetch_add(1, std::memory_order_relaxed);
    RunReport rep = run_tool(run_bundle, rr);
    enqueue_start(&rep);  // refused before (or at) its launch's planning
    if (start_not_taken || start_unacknowledged) {
        binding->finish(rep);
        if (opts_.metrics) opts_.metrics->runs_running.fetch_sub(1, std::memory_order_relaxed);
        finish_run("refused", std::nullopt);
        return err(503, "store_unacknowledged",
                   start_not_taken ? "the audit store did not take the run's start record; the tool was not started"
                                   : "the audit store did not acknowledge the run's start; the tool was not started");
    }
    announce_start();  // a run refused or failed before exec is announced too
    // Before its exit record (and so before its decisions are read back):
    // the run's kernel audit records consumed, its BPF events delivered.
    binding->finish(rep);
    if (auto* m = opts_.metrics) {
        m->runs_running.fetch_sub(1, std::memory_order_relaxed);
        m->runs[size_t(rep.outcome)].fetch_add(1, std::memory_order_relaxed);
        if (rep.timed_out) m->runs_timed_out.fetch_add(1, std::memory_order_relaxed);
        if (rep.oom_killed) m->runs_oom_killed.fetch_add(1, std::memory_order_relaxed);
    }
    rep.tool = req->tool;
    if (opts_.left_cgroups && !rep.cgroups_left.empty()) {
        std::vector<CgroupLeft> left;
        for (const auto& [path, why] : rep.cgroups_left) left.push_back({path, why});
        opts_.left_cgroups->add(left, run_id);
    }

    std::string reason = rep.timed_out ? "timeout"
                         : rep.oom_killed ? "oom"
                         : rep.outcome == RunOutcome::Signaled ? "signal"
                         : rep.outcome == RunOutcome::Exited ? "exit"
                                                             : outcome_name(rep.outcome);
    int code = rep.outcome == RunOutcome::Signaled ? rep.signal : rep.exit_status();
    json decisions = json::array(), denials = json::array();
    json report = to_json(rep);
    std::optional<uint64_t> exit_seq;
    if (store_) {
        auto seq = store_->enqueue(audit::run_exit_record(
            task_id, run_id, req->tool, reason, code,
            {{"exit_status", rep.exit_status()}, {"outcome", outcome_name(rep.outcome)},
             {"cpu_user_us", rep.usage.cpu_user_us}, {"cpu_system_us", rep.usage.cpu_system_us},
             {"peak_memory_bytes", rep.usage.peak_memory_bytes}, {"wall_us", rep.usage.wall_us},
             {"error", rep.error}, {"denials", rep.denials}, {"hardening", rep.hardening},
             {"layers", report["layers"]}, {"rules", rep.coverage_summary},
             {"rules_unenforced", rep.unenforced}, {"workdir_vanished", rep.workdir_vanished},
             {"cgroups_left", report.value("cgroups_left", json::array())}}));
        exit_seq = seq;
        // The reply is built while the exit record commits (below).
        auto taken = watch->decisions_before(seq ? *seq : UINT64_MAX);
        if (taken.truncated) start["decisions_truncated"] = true;
        for (const auto& rec : taken.records) {
            json row = audit::to_json(rec);
            if (rec.decision == BW_DECISION_DENY || rec.decision == BW_DECISION_AUDIT)
                denials.push_back(explain_denial(row, rec, *bundle, *tool_bundle, has_grant));
            decisions.push_back(std::move(row));
        }
    }
    finish_run(outcome_name(rep.outcome), rep.exit_status());

    json out = start;
    out["outcome"] = outcome_name(rep.outcome);
    out["exit_status"] = rep.exit_status();
    out["stdout"] = rep.stdout_data;
    out["stderr"] = rep.stderr_data;
    out["stdout_truncated"] = rep.stdout_truncated;
    out["stderr_truncated"] = rep.stderr_truncated;
    report.erase("stdout");
    report.erase("stderr");
    out["report"] = std::move(report);
    out["decisions"] = std::move(decisions);
    // Supervisor-level denials (limits, posture, refusals) have no kernel
    // record; they are listed with the layer that took them.
    for (const auto& s : rep.denials) denials.push_back({{"layer", "supervisor"}, {"explanation", s}, {"rule", nullptr},
                                                         {"grant_would_allow", nullptr}});
    if (!rep.error.empty() && rep.outcome == RunOutcome::Refused)
        denials.push_back({{"layer", "supervisor"}, {"explanation", rep.error}, {"rule", nullptr},
                           {"grant_would_allow", nullptr}});
    out["denials"] = std::move(denials);
    // Once the exit record is acknowledged, so is every record of the run
    // before it (the watermark is in seq order); only then is the run answered.
    if (store_ && (!exit_seq || !store_->wait_committed(*exit_seq, std::chrono::milliseconds(5000))))
        out["report"]["warnings"].push_back("audit: the run's exit record was not acknowledged by the store within "
                                            "5 s; the decisions below may not be durable yet");
    if (opts_.metrics)
        opts_.metrics->run_latency.observe(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t_run).count());
    // A rule no layer in force holds: the request cannot be carried out on
    // this host as written (the run's records stay in the store).
    if (rep.refusal_code == "rule_unenforced") {
        json unheld = json::array();
        for (const auto& row : out["report"]["rules"]["coverage"])
            if (!row.value("held", true) && !row.contains("unenforceable")) unheld.push_back(row);
        return err(422, "rule_unenforced", rep.error,
                   {{"run_id", run_id}, {"task_id", task_id}, {"tool", req->tool}, {"rules", std::move(unheld)}});
    }
    // The BPF layer could not take the run now (a peer holds the maps): the
    // same request may succeed later.
    if (rep.refusal_code == "bpf_binding")
        return err(503, "bpf_unavailable", rep.error, {{"run_id", run_id}, {"task_id", task_id}, {"tool", req->tool}});
    return out;
}

std::expected<json, ApiError> TaskManager::denials(uint64_t id, uint64_t after_seq, uint32_t limit) const {
    if (!store_) return err(503, "no_store", "the audit store is not open");
    using Pair = std::pair<std::shared_ptr<const policy::Bundle>, std::shared_ptr<const policy::Bundle>>;
    std::map<std::pair<uint64_t, std::string>, std::pair<Pair, bool>> by_epoch;  // (version, tool)
    std::map<std::string, std::pair<Pair, bool>> current;
    {
        std::lock_guard lk(mu_);
        auto it = tasks_.find(id);
        if (it == tasks_.end()) return err(404, "unknown_task", "no task " + std::to_string(id));
        const Task& t = *it->second;
        for (const auto& e : t.epochs)
            for (const auto& [tool, b] : e.bundles)
                by_epoch[{e.policy_version, tool}] = {{b, t.instantiated.at(tool)}, !e.grant.is_null()};
        for (const auto& [tool, b] : t.current().bundles)
            current[tool] = {{b, t.instantiated.at(tool)}, !t.current().grant.is_null()};
    }
    audit::Query q;
    q.task_id = id;
    q.kind = audit::RecordKind::Decision;
    q.decision = BW_DECISION_DENY;
    q.after_seq = after_seq;
    q.limit = limit;
    auto res = store_->query(q);
    if (!res) return err(500, "query_failed", res.error().message);
    json out = json::array();
    for (const auto& rec : res->rows) {
        json row = audit::to_json(rec);
        // explained under the epoch that decided it, else the current one
        const std::pair<Pair, bool>* e = nullptr;
        if (auto f = by_epoch.find({rec.policy_version, rec.tool}); f != by_epoch.end()) e = &f->second;
        else if (auto c = current.find(rec.tool); c != current.end()) e = &c->second;
        json d = e ? explain_denial(row, rec, *e->first.first, *e->first.second, e->second) : json(nullptr);
        out.push_back({{"record", std::move(row)}, {"denial", std::move(d)}});
    }
    return json{{"task_id", id},
                {"denials", std::move(out)},
                {"next_after_seq", res->next_after_seq ? json(*res->next_after_seq) : json(nullptr)}};
}

}  // namespace bulwark
