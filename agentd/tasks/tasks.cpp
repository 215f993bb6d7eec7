#include "tasks/tasks.h"

#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

#include "audit/audit_db.h"
#include "common/clock.h"
#include "sandbox/cgroup.h"
#include "bulwark/policy/evaluator.h"
#include "bulwark/policy/grants.h"
#include "bulwark/policy/match.h"
#include "common/fd.h"
#include "tasks/grant_json.h"
#include "tasks/learning.h"
#include "audit/metrics.h"
#include "tasks/record_operation.h"
#include "kaudit/run_registry.h"
#include "profiles/profile_book.h"
#include "tasks/run_binding.h"
#include "vm/guest_records.h"
#include "vm/microvm_run.h"
#include "sandbox/run_report.h"
#include "sandbox/spawner.h"
#include "tasks/tool_catalog.h"
#include "tasks/workdir_files.h"

namespace bulwark {

using nlohmann::json;
using SysClock = std::chrono::system_clock;

namespace {

int64_t to_ns(SysClock::time_point t) { return unix_ns(t); }

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

struct DenialBasis;

// A VM a task's run left parked, with its VMM's binding.
struct TaskManager::WarmVm {
    std::shared_ptr<vm::VmSession> session;
    std::shared_ptr<RunBinding> binding;  // the VMM's cgroup
    std::shared_ptr<const policy::Bundle> vmm_bundle;
    uint64_t policy_version = 0;          // of the epoch it was started in
};

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
        // The tools its profile narrowed in this epoch: each one's bundle
        // under the grant alone, and what narrowed it (Narrowing::why).
        struct Narrowed {
            std::shared_ptr<const policy::Bundle> granted;
            json why;
        };
        std::map<std::string, Narrowed> narrowed;
        DenialBasis basis(const Task& t, const std::string& tool) const;
        json narrowed_json() const {
            json j = json::object();
            for (const auto& [tool, n] : narrowed) j[tool] = n.why;
            return j;
        }
    };
    // A tool its profile narrowed (`respond: narrow`): the profile's export
    // instantiated for the task. Every epoch from then on runs the tool
    // under what the epoch's grant and the export both allow
    // (policy::intersection_grant), until the task closes or the narrowing
    // is lifted (lift_narrowing); a grant update does not lift it.
    struct Narrowing {
        std::shared_ptr<const policy::Bundle> bundle;
        json why;  // finding_seq, run_id, summary, profile, profile_runs, hash, kept/narrowed/dropped
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
        // change rebinds it); for a run in its VM, the VMM's, and the VM,
        // whose guest binding a grant change switches too.
        std::shared_ptr<RunBinding> binding;
        std::shared_ptr<vm::VmSession> vm;

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
    // The task's warm VMs (docs/microvm.md, "Warm task VMs"): per tool, the
    // VM its last run left parked, for the tool's next run under the same
    // policy. A run takes it out (so no two runs share one); the task's
    // close tears them down.
    std::map<std::string, WarmVm> warm;
    // Tools whose profile found a run unusual and whose rules answer with
    // `respond: require-grant`: tool -> the finding's summary. Their runs
    // are refused until the task's grant is updated.
    std::map<std::string, std::string> profile_holds;
    std::map<std::string, Narrowing> narrowings;

    const Epoch& current() const { return epochs.back(); }

    // Its parked VMs, for retire() once mu_ is let go.
    std::vector<WarmVm> take_warm() {
        std::vector<WarmVm> out;
        for (auto& [tool, w] : warm) out.push_back(std::move(w));
        warm.clear();
        return out;
    }

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
        if (!profile_holds.empty()) j["profile_holds"] = profile_holds;
        if (!e.narrowed.empty()) j["narrowed"] = e.narrowed_json();
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
                          {"reason", e.reason},
                          {"narrowed", e.narrowed_json()}});
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

std::expected<json, TaskError> TaskManager::cancel(uint64_t id, const std::string& ref) {
    std::lock_guard lk(mu_);
    auto it = tasks_.find(id);
    if (it == tasks_.end()) return task_error(TaskErrc::UnknownTask, "no task " + std::to_string(id));
    json runs = json::array();
    for (const auto& r : it->second->runs)
        if (r.client_ref == ref && r.request_cancel()) runs.push_back(r.run_id);
    return json{{"task_id", id}, {"client_ref", ref}, {"cancelled_runs", runs}};
}

uint64_t TaskManager::reserve_run_id() {
    std::lock_guard lk(mu_);
    return next_run_id_++;
}

size_t TaskManager::cancel_all() {
    std::vector<WarmVm> parked;
    size_t n = 0;
    {
        std::lock_guard lk(mu_);
        shutting_down_ = true;
        for (auto& [id, t] : tasks_) {
            for (const auto& r : t->runs) n += r.request_cancel();
            for (auto& w : t->take_warm()) parked.push_back(std::move(w));
        }
    }
    for (auto& w : parked) retire(std::move(w));
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

std::expected<json, TaskError> TaskManager::create(const CreateTaskRequest& req) {
    const bool skip_unavailable = req.skip_unavailable;
    if (req.tools.empty()) return task_error(TaskErrc::BadRequest, "tools: a non-empty array of tool names is required");
    auto t = std::make_shared<Task>();
    for (size_t i = 0; i < req.tools.size(); ++i) {
        const std::string& name = req.tools[i];
        std::string field = "tools[" + std::to_string(i) + "]";
        if (!catalog_.find(name)) return task_error(TaskErrc::UnknownTool, field + ": no tool named '" + name + "'");
        if (std::find(t->tools.begin(), t->tools.end(), name) != t->tools.end())
            return task_error(TaskErrc::BadRequest, field + ": '" + name + "' is listed twice");
        t->tools.push_back(name);
    }
    if (req.label.size() > 256) return task_error(TaskErrc::BadRequest, "label: must be a string of at most 256 bytes");
    t->label = req.label;

    std::unique_lock lk(mu_);
    size_t open = std::count_if(tasks_.begin(), tasks_.end(), [](auto& kv) { return !kv.second->closed; });
    if (open >= opts_.max_tasks)
        return task_error(TaskErrc::TooManyTasks, "at most " + std::to_string(opts_.max_tasks) + " open tasks");
    t->id = next_task_id_++;
    lk.unlock();

    namespace fs = std::filesystem;
    std::error_code ec;
    if (req.workdir) {
        const std::string& w = *req.workdir;
        if (w.empty() || w.front() != '/') return task_error(TaskErrc::BadRequest, "workdir: must be an absolute path");
        auto canon = fs::canonical(w, ec);
        if (ec || !fs::is_directory(canon)) return task_error(TaskErrc::BadWorkdir, "workdir: " + w + ": not a directory");
        t->workdir = canon.string();
    } else {
        if (opts_.work_root.empty()) return task_error(TaskErrc::BadRequest, "workdir: required (no default work root)");
        fs::path dir = opts_.work_root / std::to_string(t->id);
        fs::create_directories(dir, ec);
        if (ec) return task_error(TaskErrc::WorkdirFailed, "cannot create " + dir.string() + ": " + ec.message());
        // The tool runs as an unprivileged id (spawner.h): the work directory is its own.
        if (::chown(dir.c_str(), 65534, 65534) != 0 || ::chmod(dir.c_str(), 0700) != 0)
            return task_error(TaskErrc::WorkdirFailed, "cannot hand " + dir.string() + " to uid 65534: " + std::strerror(errno));
        t->workdir = dir.string();
        t->owns_workdir = true;
    }
    if (t->workdir == "/") return task_error(TaskErrc::BadWorkdir, "workdir: must not be /");

    t->vars = audit::task_vars_of(t->id, t->workdir);
    for (const auto& name : t->tools) {
        auto b = instantiate_tool(catalog_.find(name)->bundle, t->vars, opts_.resolve);
        if (!b && !skip_unavailable) return task_error(TaskErrc::InstantiateFailed, name + ": " + b.error());
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
            return task_error(TaskErrc::InstantiateFailed, "no tool of the task can be instantiated: " + why);
        }
        for (const auto& [tool, e] : t->unavailable)
            spdlog::warn("task {}: tool {} is unavailable and left out: {}", t->id, tool, e);
    }
    t->created_ns = to_ns(SysClock::now());
    lk.lock();
    auto r = switch_epoch(*t, req.grant, std::nullopt, "create");
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
std::expected<json, TaskError> TaskManager::switch_epoch(Task& t, const json& grant_json,
                                                        std::optional<SysClock::time_point> expires_at,
                                                        std::string reason) {
    auto now = SysClock::now();
    Task::Epoch e;
    e.grant = grant_json;
    e.reason = std::move(reason);
    e.started_ns = to_ns(now);
    e.expires_at = expires_at;
    if (grant_json.is_null()) {
        e.bundles = t.instantiated;
    } else {
        auto g = grant_from_json(grant_json, t.vars);
        if (!g) return task_error(TaskErrc::BadGrant, g.error());
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
            return task_error(TaskErrc::GrantWidens, msg, {{"reasons", reasons}});
        }
    }
    // A tool its profile narrowed: what the grant and the profile both allow.
    for (const auto& [name, nar] : t.narrowings) {
        auto& bundle = e.bundles.at(name);
        auto g = policy::intersection_grant(*bundle, *nar.bundle, "profile of " + name);
        auto nb = policy::apply_grant(*bundle, g, now, opts_.resolve);
        if (!nb) {
            std::string why;
            for (const auto& r : nb.error().reasons) why += (why.empty() ? "" : "; ") + r;
            return task_error(TaskErrc::Internal, name + ": its profile's narrowing does not apply: " + why);
        }
        e.narrowed[name] = {bundle, nar.why};
        bundle = std::make_shared<const policy::Bundle>(std::move(nb->bundle));
    }
    e.n = t.epochs.empty() ? 1 : t.epochs.back().n + 1;
    e.policy_version = next_policy_version_++;
    if (!t.epochs.empty()) t.epochs.back().ended_ns = e.started_ns;

    // Running tools follow the switch on their next operation (BPF binding);
    // seccomp and Landlock are fixed at their launch. A tool in its VM: the
    // guest's binding follows (a Policy frame), and the VMM's on the host
    // takes the VMM policy composed from the new rules.
    for (auto& r : t.runs) {
        if (r.ended_ns || !r.binding) continue;
        const policy::Bundle& tool = *e.bundles.at(r.tool);
        if (r.vm) r.vm->switch_policy(tool, e.policy_version);
        auto rb = r.vm ? r.binding->rebind(r.vm->vmm_bundle_for(tool), e.policy_version)
                       : r.binding->rebind(tool, e.policy_version);
        if (!rb)
            spdlog::warn("task {} run {}: epoch {} not applied to the running tool{}: {}", t.id, r.run_id, e.n,
                         r.vm ? "'s VMM" : "", rb.error().message);
    }
    if (store_) {
        for (const auto& name : t.tools) {
            json detail = {{"epoch", e.n}, {"grant", e.grant}, {"hash", e.bundles.at(name)->hash},
                           {"expires_ns", e.expires_at ? json(to_ns(*e.expires_at)) : json(nullptr)}};
            if (auto n = e.narrowed.find(name); n != e.narrowed.end()) detail["narrowed"] = n->second.why;
            auto rec = audit::policy_epoch_record(name, e.policy_version, e.reason, std::move(detail));
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

std::expected<json, TaskError> TaskManager::get(uint64_t id) const {
    std::lock_guard lk(mu_);
    auto it = tasks_.find(id);
    if (it == tasks_.end()) return task_error(TaskErrc::UnknownTask, "no task " + std::to_string(id));
    return it->second->detail();
}

std::expected<json, TaskError> TaskManager::update_grant(uint64_t id, const GrantUpdate& update) {
    const std::optional<std::chrono::milliseconds> box = update.expires_in;
    std::lock_guard lk(mu_);
    auto it = tasks_.find(id);
    if (it == tasks_.end()) return task_error(TaskErrc::UnknownTask, "no task " + std::to_string(id));
    Task& t = *it->second;
    if (t.closed) return task_error(TaskErrc::TaskClosed, "task " + std::to_string(id) + " is closed");
    // A time-boxed grant returns to the epoch in force before it; a plain
    // update replaces the base.
    size_t base = t.epochs.size() - 1;
    if (t.current().expires_at) base = t.current().revert_to;
    std::optional<SysClock::time_point> expires_at;
    if (box) expires_at = SysClock::now() + *box;
    auto r = switch_epoch(t, update.grant, expires_at, box ? "timebox" : "update");
    if (!r) return std::unexpected(r.error());
    if (box) t.epochs.back().revert_to = base;
    t.profile_holds.clear();  // someone decided what the task may do next
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

namespace {

// The narrowing a finding of `tool` asks for (`respond: narrow`): the export
// of its profile, the task's own once that has learned (what the tool
// usually does here), else the tool's; cut from the rules in force and
// instantiated for the task. (t.id and t.vars never change: no lock.)
std::expected<TaskManager::Task::Narrowing, std::string> profile_narrowing(
    const ToolCatalog& catalog, const profiles::ProfileBook& book, const policy::Resolver& resolve,
    const TaskManager::Task& t, const std::string& tool, uint64_t run_id, const profiles::RunVerdict& v) {
    const bool own = v.task && !v.task->learning;
    auto copy = book.copy(tool, own ? std::optional<uint64_t>(t.id) : std::nullopt);
    if (!copy) return std::unexpected(copy.error().message);
    auto exported = export_profile(catalog, tool, copy->profile);
    if (!exported) return std::unexpected("its profile's export does not compile: " + exported.error().message);
    if (exported->source_changed)
        return std::unexpected("its rule file changed since agentd loaded it (the export would not be cut from "
                               "the rules in force)");
    auto inst = instantiate_tool(*exported->bundle, t.vars, resolve);
    if (!inst) return std::unexpected("its profile's export does not instantiate: " + inst.error());
    json why = exported->rules.counts();
    why.update({{"finding_seq", v.finding_seq},
                {"run_id", run_id},
                {"summary", v.summary},
                {"profile", own ? "task" : "tool"},
                {"profile_runs", copy->profile.runs()},
                {"hash", exported->bundle->hash}});
    return TaskManager::Task::Narrowing{std::make_shared<const policy::Bundle>(std::move(*inst)), std::move(why)};
}

}  // namespace

std::expected<json, TaskError> TaskManager::renew_epoch(Task& t, std::string reason) {
    const auto expires_at = t.current().expires_at;
    const size_t revert_to = t.current().revert_to;
    json grant = t.current().grant;
    auto r = switch_epoch(t, grant, expires_at, std::move(reason));
    if (r && expires_at) t.epochs.back().revert_to = revert_to;  // still returns where the time box began
    return r;
}

// `respond: narrow`: a new epoch in which the tool runs under what the
// grant in force and its profile both allow; running runs of the tool
// follow through their binding like at any switch. Should no narrowing be
// made, the tool is held as under `require-grant` (it never runs on
// unnarrowed), and that is recorded instead.
json TaskManager::narrow_to_profile(Task& t, const std::string& tool, uint64_t run_id, const profiles::RunVerdict& v) {
    auto made = profile_narrowing(catalog_, *opts_.profiles, opts_.resolve, t, tool, run_id, v);
    std::lock_guard lk(mu_);
    if (t.closed) return {{"held", "the task is closed"}};
    std::string failed;
    if (auto it = t.narrowings.find(tool); made && it != t.narrowings.end() && it->second.why["hash"] == made->why["hash"]) {
        // Narrowed to this same export already (a run refused under it is
        // unusual too): the epoch in force stays.
        json out = it->second.why;
        out.update({{"epoch", t.current().n}, {"policy_version", t.current().policy_version}, {"in_force", true}});
        return out;
    }
    if (made) {
        std::optional<Task::Narrowing> before;
        if (auto it = t.narrowings.find(tool); it != t.narrowings.end()) before = it->second;
        t.narrowings[tool] = *made;
        auto r = renew_epoch(t, "narrow");
        if (r) {
            json out = made->why;
            out["epoch"] = t.current().n;
            out["policy_version"] = t.current().policy_version;
            return out;
        }
        if (before)
            t.narrowings[tool] = std::move(*before);
        else
            t.narrowings.erase(tool);
        failed = r.error().message;
    } else {
        failed = made.error();
    }
    spdlog::warn("task {}: {} not narrowed to its profile, held instead: {}", t.id, tool, failed);
    std::string hold = v.summary + " (not narrowed: " + failed + ")";
    t.profile_holds[tool] = hold;
    if (store_) {
        auto rec = audit::policy_epoch_record(tool, t.current().policy_version, "hold",
                                              {{"epoch", t.current().n}, {"held", hold}, {"finding_seq", v.finding_seq}});
        rec.task_id = t.id;
        store_->enqueue(std::move(rec));
    }
    return {{"held", failed}};
}

std::expected<json, TaskError> TaskManager::lift_narrowing(uint64_t id, const std::string& tool) {
    std::lock_guard lk(mu_);
    auto it = tasks_.find(id);
    if (it == tasks_.end()) return task_error(TaskErrc::UnknownTask, "no task " + std::to_string(id));
    Task& t = *it->second;
    if (t.closed) return task_error(TaskErrc::TaskClosed, "task " + std::to_string(id) + " is closed");
    auto n = t.narrowings.find(tool);
    if (n == t.narrowings.end())
        return task_error(TaskErrc::NotNarrowed, "no profile narrowed " + tool + " in task " + std::to_string(id));
    Task::Narrowing kept = std::move(n->second);
    t.narrowings.erase(n);
    auto r = renew_epoch(t, "lift");
    if (!r) {
        t.narrowings[tool] = std::move(kept);
        return std::unexpected(r.error());
    }
    return t.summary();
}

std::expected<json, TaskError> TaskManager::close(uint64_t id) {
    std::vector<WarmVm> parked;
    struct Retire {
        TaskManager* m;
        std::vector<WarmVm>& vms;
        ~Retire() {
            for (auto& w : vms) m->retire(std::move(w));
        }
    } retire_after_unlock{this, parked};
    std::lock_guard lk(mu_);
    auto it = tasks_.find(id);
    if (it == tasks_.end()) return task_error(TaskErrc::UnknownTask, "no task " + std::to_string(id));
    Task& t = *it->second;
    size_t cancelled = 0;
    parked = t.take_warm();
    if (!t.closed) {
        t.closed = true;
        if (opts_.metrics) opts_.metrics->tasks_open.fetch_sub(1, std::memory_order_relaxed);
        t.epochs.back().ended_ns = to_ns(SysClock::now());
        for (const auto& r : t.runs) cancelled += r.request_cancel();
        if (opts_.profiles) opts_.profiles->end_task(t.id);  // its own profiles go with it
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

// What an agent can act on for one denial: the rule that decided, and
// whether the tool's own rules would allow it (then the task's grant is what
// stands in the way, and a grant update naming it would allow it).
}  // namespace

// What a denial is explained with: the bundle it was decided under, the
// tool's own, whether a grant narrowed it, and for a tool its profile
// narrowed, the bundle of the grant alone and what narrowed it.
struct DenialBasis {
    std::shared_ptr<const policy::Bundle> decided, tool, granted;
    bool has_grant = false;
    json narrowing;  // Narrowing::why, or null
};

DenialBasis TaskManager::Task::Epoch::basis(const Task& t, const std::string& tool) const {
    DenialBasis b{bundles.at(tool), t.instantiated.at(tool), nullptr, !grant.is_null(), nullptr};
    if (auto n = narrowed.find(tool); n != narrowed.end()) {
        b.granted = n->second.granted;
        b.narrowing = n->second.why;
    }
    return b;
}

namespace {

json explain_denial(const json& row, const audit::AuditRecord& rec, const DenialBasis& basis) {
    const policy::Bundle& narrowed = *basis.decided;
    const policy::Bundle& tool = *basis.tool;
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
    // The profile's narrowing took away what the tool's rules and the grant allow.
    if (basis.granted && policy::evaluate(*basis.granted, *op).verdict == policy::Verdict::Allow) {
        const auto& why = basis.narrowing;
        auto base = policy::evaluate(tool, *op);
        d["narrowing"] = why;
        d["explanation"] = "denied: the narrowing of " + rec.tool + " to its profile (after finding " +
                           std::to_string(why.value("finding_seq", uint64_t(0))) + ": " +
                           why.value("summary", std::string()) + ") takes " + std::string(policy::to_string(op->kind)) + " " +
                           rec.object + " away; the tool's rules (" + policy::describe_rule(tool, base.right_rule_id) +
                           ")" + (basis.has_grant ? " and the task's grant" : "") +
                           " allow it; lifting the narrowing (DELETE /v1/tasks/" + std::to_string(rec.task_id) +
                           "/narrowings/" + rec.tool + ") would allow it";
        return d;
    }
    // grants name files and IP network rules: not syscalls, not unix sockets (a grant keeps the tool's unix rules)
    if (basis.has_grant && op->kind != policy::OpKind::Syscall && op->unix_addr.empty()) {
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

// One exec, phase by phase: what each phase learns, the next one uses.
struct TaskManager::ExecRun {
    ExecRun(TaskManager& m, uint64_t id, const ExecRequest& req, ExecHooks hooks)
        : m(m), task_id(id), req(req), hooks(std::move(hooks)) {}

    std::expected<void, TaskError> admit();
    void plan();
    std::expected<void, TaskError> settle_start(RunReport& rep);
    void collect(RunReport& rep);
    std::expected<json, TaskError> answer(const RunReport& rep);

    // The bundle the run is launched with: the epoch's, its limits lowered.
    const policy::Bundle& bundle() const { return lowered ? *lowered : *epoch_bundle; }

    TaskManager& m;
    const uint64_t task_id;
    const ExecRequest& req;
    const ExecHooks hooks;
    // admit()
    std::shared_ptr<Task> task;
    std::shared_ptr<const policy::Bundle> epoch_bundle, tool_bundle;
    DenialBasis basis;  // the epoch's bundles, for explaining its denials
    uint64_t run_id = 0, epoch = 0, version = 0;
    std::optional<SysClock::time_point> expires_at;
    json files_written = json::array();
    Fd cancel;
    // plan()
    std::optional<policy::Bundle> lowered;
    json start_detail;  // the run_start record's detail
    json start;         // the reply's head (the detail and the ids)
    std::optional<uint64_t> start_seq;
    bool start_enqueued = false, start_not_taken = false, start_unacknowledged = false, announced = false;
    std::unique_ptr<audit::RunWatch> watch;  // the run's records as the store accepts them
    std::shared_ptr<profiles::RunObserver> observer;  // the tool's profile watching the run
    RunRequest rr;
    // route(): the tool's VM, when its rules ask for one and this host can
    // run it; then the binding is the VMM's (its policy, its cgroup).
    std::optional<vm::MicroVmLaunch> vm_launch;
    RunRequest vmm_rr;
    std::vector<std::string> route_warnings;
    std::shared_ptr<RunBinding> binding;
    // The task's VM: a parked one of this tool and policy taken for this
    // run (warm), or the one this run starts (vm_session), left parked
    // after it for the next (keep_vm: the binding then lives on with it).
    std::optional<WarmVm> warm;
    std::shared_ptr<vm::VmSession> vm_session;
    std::shared_ptr<const policy::Bundle> vmm_bundle;  // the VM's VMM policy, as its binding names it
    bool keep_vm = false;
    std::chrono::steady_clock::time_point t_run;
    // collect()
    json report;  // the run's report as the reply and the exit record show it
    json decisions = json::array(), denials = json::array();
    std::optional<uint64_t> exit_seq;
    std::optional<profiles::RunVerdict> verdict;  // the run scored against its tool's profile

    RunReport launch();
    RunReport launch_in_task_vm();
    void enqueue_start(const RunReport* plan);
    void announce_start();
    void finish_run(std::string outcome, std::optional<int> status);
    void conclude_profile(json& exit_detail);
};

std::expected<json, TaskError> TaskManager::exec(uint64_t id, const ExecRequest& req, ExecHooks hooks) {
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
    ExecRun run(*this, id, req, std::move(hooks));
    if (auto r = run.admit(); !r) return std::unexpected(std::move(r.error()));  // task, tool, workdir, files
    run.plan();  // limits, start record, where it runs, decision sources
    RunReport rep = run.launch();
    if (auto r = run.settle_start(rep); !r) return std::unexpected(std::move(r.error()));
    run.collect(rep);       // sources drained, exit record, decisions explained
    return run.answer(rep);  // the reply, or why the run could not be carried out
}

// The store takes runs; the task, its tool and its work directory are there
// (someone may have removed the directory from the host: no run in a
// directory that is gone); the working files are written (a refused file
// means no run at all); then the run is registered in the task's current
// epoch, with the eventfd that cancels it.
std::expected<void, TaskError> TaskManager::ExecRun::admit() {
    const std::string id_s = std::to_string(task_id);
    if (m.store_ && !m.store_->accepting_runs())
        return task_error(TaskErrc::StoreRefusing, "the audit store refuses new runs: " + m.store_->status().reason);
    std::string workdir;
    {
        std::lock_guard lk(m.mu_);
        auto it = m.tasks_.find(task_id);
        if (it == m.tasks_.end()) return task_error(TaskErrc::UnknownTask, "no task " + id_s);
        if (it->second->closed) return task_error(TaskErrc::TaskClosed, "task " + id_s + " is closed");
        if (!it->second->current().bundles.contains(req.tool))
            return task_error(TaskErrc::UnknownTool, "tool: '" + req.tool + "' is not a tool of task " + id_s);
        workdir = it->second->workdir;
    }
    struct stat st{};
    bool missing = ::lstat(workdir.c_str(), &st) != 0;
    if (missing || !S_ISDIR(st.st_mode))
        return task_error(TaskErrc::WorkdirGone, "task " + id_s + ": its work directory " + workdir + " is " +
                                              (missing ? "gone (removed from the host)" : "no longer a directory") +
                                              "; make it again (owned by the tool's uid) or create another task");
    if (!req.files.empty()) {
        auto w = write_workdir_files(workdir, req.files);
        if (!w) return task_error(TaskErrc::FileRefused, w.error());
        files_written = std::move(*w);
    }
    cancel = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!cancel) return task_error(TaskErrc::Internal, std::string("eventfd: ") + std::strerror(errno));
    std::lock_guard lk(m.mu_);
    auto it = m.tasks_.find(task_id);
    if (it == m.tasks_.end()) return task_error(TaskErrc::UnknownTask, "no task " + id_s);
    task = it->second;
    if (m.shutting_down_) return task_error(TaskErrc::ShuttingDown, "agentd is shutting down; no new runs");
    if (task->closed) return task_error(TaskErrc::TaskClosed, "task " + id_s + " is closed");
    auto b = task->current().bundles.find(req.tool);
    if (b == task->current().bundles.end())
        return task_error(TaskErrc::UnknownTool, "tool: '" + req.tool + "' is not a tool of task " + id_s);
    if (auto h = task->profile_holds.find(req.tool); h != task->profile_holds.end())
        return task_error(TaskErrc::ProfileHold,
                          "runs of " + req.tool + " in task " + id_s + " wait for a grant update: " + h->second,
                          {{"tool", req.tool}, {"finding", h->second}});
    epoch_bundle = b->second;
    tool_bundle = task->instantiated.at(req.tool);
    epoch = task->current().n;
    version = task->current().policy_version;
    expires_at = task->current().expires_at;
    basis = task->current().basis(*task, req.tool);
    run_id = m.next_run_id_++;
    Task::Run r;
    r.run_id = run_id;
    r.tool = req.tool;
    r.argv = req.argv;
    r.epoch = epoch;
    r.started_ns = to_ns(SysClock::now());
    r.cancel_fd = cancel.get();
    r.client_ref = req.client_ref;
    task->runs.push_back(std::move(r));
    if (task->runs.size() > m.opts_.max_runs_per_task) {
        auto ended = std::find_if(task->runs.begin(), task->runs.end(),
                                  [](const Task::Run& x) { return x.ended_ns.has_value(); });
        if (ended != task->runs.end()) task->runs.erase(ended);
    }
    return {};
}

// The run's own limits (the epoch's, lowered by the request and by the end
// of a time-boxed grant), its start record, its launch request, and its
// binding to the decision sources.
void TaskManager::ExecRun::plan() {
    // A copy of the epoch's bundle only when a limit is lowered: copying one
    // costs more than the rest of the request's bookkeeping.
    auto lower = [&](uint64_t ms) {
        if (!lowered) lowered = *epoch_bundle;
        lowered->limits.timeout_ms = std::min(lowered->limits.timeout_ms.value_or(ms), ms);
    };
    if (req.timeout_ms) lower(*req.timeout_ms);
    if (expires_at) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*expires_at - SysClock::now()).count();
        lower(static_cast<uint64_t>(std::max<int64_t>(1, left)));
    }

    start_detail = {{"argv", req.argv}, {"epoch", epoch}, {"workdir", task->workdir}, {"files", files_written}};
    if (!req.client_ref.empty()) start_detail["client_ref"] = req.client_ref;
    if (req.traceparent) start_detail["traceparent"] = *req.traceparent;
    start = start_detail;
    start.update({{"run_id", run_id}, {"task_id", task_id}, {"tool", req.tool}, {"policy_version", version}});
    // The tool's profile sees every decision as the store takes it; a
    // first-time binary or destination under `respond: stop` ends the run.
    if (m.store_ && m.opts_.profiles && bundle().profile.enabled)
        observer = m.opts_.profiles->observe(req.tool, task_id, run_id, task->vars, [fd = cancel.get()] {
            uint64_t one = 1;
            (void)!::write(fd, &one, sizeof one);
        });
    rr.profile_scoring = observer != nullptr;
    if (observer) rr.cancel_reason = [o = observer] { return o->stop_reason(); };
    audit::RunWatch::Observer on_decision;
    if (observer) on_decision = [o = observer](const audit::AuditRecord& r) { o->on_decision(r); };
    watch = m.store_ ? m.store_->watch_run(task_id, run_id, audit::Query::kMaxLimit, std::move(on_decision)) : nullptr;

    // The run's start record must be durable before the tool's first
    // instruction. It is enqueued once the launch is planned (on_plan: it
    // names the rules run with no layer holding them) and waited for at the
    // last step before exec (before_exec), so its commit overlaps the
    // sandbox setup. A launch refused before it was planned gets its start
    // record after run_tool, before its exit record (settle_start).
    rr.on_plan = [this](const RunReport& plan) -> std::string {
        enqueue_start(&plan);
        return start_not_taken ? "the audit store did not take the run's start record; the tool was not started" : "";
    };
    rr.before_exec = [this]() -> std::string {
        if (start_seq && !m.store_->wait_committed(*start_seq, m.opts_.run_start_ack)) {
            start_unacknowledged = true;
            return "the audit store did not acknowledge the run's start; the tool was not started";
        }
        announce_start();
        return "";
    };
    rr.argv = req.argv;
    rr.workdir = task->workdir;
    rr.cgroup_label = "r" + std::to_string(run_id);
    rr.stdin_data = req.stdin_data;
    rr.on_output = hooks.on_output;
    rr.cancel_fd = cancel.get();
    rr.caller_env = std::vector<std::pair<std::string, std::string>>{};  // never the daemon's environment
    // Where it runs: in a VM of its own when the tool asks and this host
    // can (its VMM is then what the decision sources bind, and the start
    // record is durable before the VMM starts); else the host sandbox, with
    // the microvm layer saying why not.
    std::string vm_error;
    if (bundle().microvm.mode != policy::MicroVmMode::Off) {
        vm::MicroVmHost none;
        none.unavailable = "agentd serve runs without the microVM tier";
        const vm::MicroVmHost& host = m.opts_.microvm ? *m.opts_.microvm : none;
        if (vm::route(bundle(), host, rr, route_warnings)) {
            auto l = vm::plan_microvm(bundle(), host, task->vars);
            if (l) vm_launch = std::move(*l);
            else rr.vm_layers["microvm"] = "the VM could not be planned: " + l.error();
        }
    }
    if (vm_launch) {
        std::lock_guard lk(m.mu_);
        if (auto w = task->warm.find(req.tool); w != task->warm.end()) {
            warm = std::move(w->second);
            task->warm.erase(w);
        }
    }
    if (warm && (warm->policy_version != version || !warm->session->parked())) {
        m.retire(std::move(*warm));  // another policy since, or the VM went: a VM of its own
        warm.reset();
    }
    if (warm) {
        // The VM is up: its VMM's binding now names this run.
        binding = warm->binding;
        vmm_bundle = warm->vmm_bundle;
        if (auto r = binding->retarget(RunContext{task_id, run_id, req.tool, version, vmm_bundle}); !r) {
            m.retire(std::move(*warm));
            warm.reset();
        }
    }
    if (warm) {
        // rr's start-record hooks are called by launch_in_task_vm itself.
    } else if (vm_launch) {
        vmm_rr.on_plan = std::move(rr.on_plan);
        vmm_rr.before_exec = std::move(rr.before_exec);
        vmm_rr.cgroup_label = rr.cgroup_label;
        rr.on_plan = nullptr;
        rr.before_exec = nullptr;
    }
    if (!warm) {
        if (vm_launch) vmm_bundle = std::make_shared<const policy::Bundle>(vm_launch->vmm_bundle);
        binding = std::make_shared<RunBinding>(m.opts_.sources, vm_launch ? *vmm_bundle : bundle(),
                                               RunContext{task_id, run_id, req.tool, version,
                                                          vm_launch ? vmm_bundle : epoch_bundle});
        binding->prepare(vm_launch ? vmm_rr : rr);
    }
    if (warm) vm_session = warm->session;
    else if (vm_launch) vm_session = std::make_shared<vm::VmSession>(*vm_launch, bundle(), std::move(vmm_rr));
    {
        std::lock_guard lk(m.mu_);
        for (auto& r : task->runs)
            if (r.run_id == run_id) r.binding = binding, r.vm = vm_session;
    }
    t_run = std::chrono::steady_clock::now();
    if (m.opts_.metrics) m.opts_.metrics->runs_running.fetch_add(1, std::memory_order_relaxed);
}

RunReport TaskManager::ExecRun::launch() {
    RunReport rep = vm_launch ? launch_in_task_vm() : run_tool(bundle(), rr);
    for (auto& w : route_warnings) rep.warnings.push_back(std::move(w));
    return rep;
}

// In the task's VM of this tool: the parked one (its start record made
// durable here, before the run's Start frame, as a launch does before the
// tool's exec), or a new one; parked for the tool's next run (collect) when
// the run ended cleanly.
RunReport TaskManager::ExecRun::launch_in_task_vm() {
    RunReport rep;
    if (warm) {
        RunReport planned;
        std::string refused = rr.on_plan ? rr.on_plan(planned) : "";
        if (refused.empty() && rr.before_exec) refused = rr.before_exec();
        if (!refused.empty()) {
            rep.tool = req.tool;
            rep.argv = req.argv;
            rep.outcome = RunOutcome::Refused;
            rep.error = refused;
            m.retire(std::move(*warm));
            warm.reset();
            return rep;
        }
    }
    rep = vm_session->run(bundle(), rr, version);
    keep_vm = vm_session->parked();
    return rep;
}

// A warm VM no run will take: torn down, then its VMM's binding released.
void TaskManager::retire(WarmVm w) {
    if (w.session) w.session->close();
    if (w.binding) {
        RunReport none;
        w.binding->finish(none);
    }
}

void TaskManager::ExecRun::enqueue_start(const RunReport* plan) {
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
    if (!m.store_) return;
    start_seq = m.store_->enqueue(audit::run_start_record(task_id, run_id, req.tool, version, start_detail));
    if (!start_seq) start_not_taken = true;
}

void TaskManager::ExecRun::announce_start() {
    if (!announced && hooks.on_start) hooks.on_start(start);
    announced = true;
}

void TaskManager::ExecRun::finish_run(std::string outcome, std::optional<int> status) {
    std::lock_guard lk(m.mu_);
    for (auto& r : task->runs)
        if (r.run_id == run_id) {
            r.ended_ns = to_ns(SysClock::now());
            r.outcome = std::move(outcome);
            r.exit_status = status;
            r.cancel_fd = -1;
            r.binding.reset();
        }
}

// Every run has its start record, refused ones too; a run whose start
// record the store did not take or commit never started, and says so.
std::expected<void, TaskError> TaskManager::ExecRun::settle_start(RunReport& rep) {
    enqueue_start(&rep);  // refused before (or at) its launch's planning
    if (start_not_taken || start_unacknowledged) {
        binding->finish(rep);
        if (m.opts_.metrics) m.opts_.metrics->runs_running.fetch_sub(1, std::memory_order_relaxed);
        finish_run("refused", std::nullopt);
        return task_error(TaskErrc::StoreUnacknowledged,
                   start_not_taken ? "the audit store did not take the run's start record; the tool was not started"
                                   : "the audit store did not acknowledge the run's start; the tool was not started");
    }
    announce_start();  // a run refused or failed before exec is announced too
    return {};
}

// The run scored against its tool's profile; `respond: require-grant` holds
// the tool's further runs in this task until the grant is updated, `narrow`
// narrows the tool to its profile for the rest of the task.
void TaskManager::ExecRun::conclude_profile(json& exit_detail) {
    verdict = m.opts_.profiles->conclude(*observer, exit_detail);
    profiles::mark_concluded(exit_detail, *verdict);
    if (verdict->response == "narrowed") verdict->narrowed = m.narrow_to_profile(*task, req.tool, run_id, *verdict);
    if (verdict->response != "require-grant") return;
    std::lock_guard lk(m.mu_);
    task->profile_holds[req.tool] = verdict->summary;
}

// Before its exit record (and so before its decisions are read back): the
// run's kernel audit records consumed, its BPF events delivered. Then the
// exit record, and the run's decisions as the store took them, each denial
// explained; the reply is built while the exit record commits.
void TaskManager::ExecRun::collect(RunReport& rep) {
    const bool settled = keep_vm;
    if (keep_vm) {
        // The VM's binding lives on with it: this run's sources settled
        // first, then the VM parked for the task's next run of the tool
        // (unless the task closed meanwhile, or another run parked one).
        binding->settle(rep);
        std::lock_guard lk(m.mu_);
        keep_vm = !task->closed && !m.shutting_down_ && !task->warm.contains(req.tool);
        if (keep_vm)
            task->warm[req.tool] = WarmVm{vm_session, binding, vmm_bundle, version};
    }
    if (!keep_vm) {
        RunReport already_said;  // what settle() put in the report is there once
        binding->finish(settled ? already_said : rep);
        if (vm_session) vm_session->close();
    }
    if (auto* mt = m.opts_.metrics) {
        mt->runs_running.fetch_sub(1, std::memory_order_relaxed);
        mt->runs[size_t(rep.outcome)].fetch_add(1, std::memory_order_relaxed);
        if (rep.timed_out) mt->runs_timed_out.fetch_add(1, std::memory_order_relaxed);
        if (rep.oom_killed) mt->runs_oom_killed.fetch_add(1, std::memory_order_relaxed);
    }
    rep.tool = req.tool;
    if (m.opts_.left_cgroups && !rep.cgroups_left.empty()) {
        std::vector<CgroupLeft> left;
        for (const auto& [path, why] : rep.cgroups_left) left.push_back({path, why});
        m.opts_.left_cgroups->add(left, run_id);
    }
    if (m.store_ && !rep.microvm.is_null()) {
        // The guest's decisions, as records of this run marked in_guest,
        // before its exit record (so the reply's decisions include them).
        const RunContext ctx{task_id, run_id, req.tool, version, epoch_bundle};
        uint64_t unreadable = rep.microvm.value("decisions_dropped", uint64_t(0));
        for (const auto& d : rep.microvm.value("decisions", json::array())) {
            if (auto r = vm::guest_record(d, ctx)) (void)m.store_->enqueue(std::move(*r));
            else ++unreadable;
        }
        if (unreadable) rep.warnings.push_back("microVM: " + std::to_string(unreadable) +
                                               " guest decision record(s) lost or unreadable");
        rep.microvm.erase("decisions");
    }
    report = to_json(rep);
    if (m.store_) {
        std::string reason = rep.timed_out                            ? "timeout"
                             : rep.oom_killed                         ? "oom"
                             : rep.outcome == RunOutcome::Signaled ? "signal"
                             : rep.outcome == RunOutcome::Exited   ? "exit"
                                                                   : outcome_name(rep.outcome);
        int code = rep.outcome == RunOutcome::Signaled ? rep.signal : rep.exit_status();
        json exit_detail = {{"exit_status", rep.exit_status()}, {"outcome", outcome_name(rep.outcome)},
                            {"cpu_user_us", rep.usage.cpu_user_us}, {"cpu_system_us", rep.usage.cpu_system_us},
                            {"peak_memory_bytes", rep.usage.peak_memory_bytes}, {"wall_us", rep.usage.wall_us},
                            {"output_bytes", rep.stdout_data.size() + rep.stderr_data.size()},
                            {"error", rep.error}, {"denials", rep.denials}, {"hardening", rep.hardening},
                            {"layers", report["layers"]}, {"rules", rep.coverage_summary},
                            {"rules_unenforced", rep.unenforced}, {"workdir_vanished", rep.workdir_vanished},
                            {"cgroups_left", report.value("cgroups_left", json::array())}};
        if (!rep.counted.is_null()) exit_detail["counted"] = rep.counted;
        // Scored before the exit record: the finding record comes first in
        // the store, and the exit record says whether the run was learned
        // (what a restart's replay learns it by).
        if (observer) conclude_profile(exit_detail);
        exit_seq = m.store_->enqueue(audit::run_exit_record(task_id, run_id, req.tool, reason, code, exit_detail));
        if (observer && exit_seq) m.opts_.profiles->exit_recorded(req.tool, *exit_seq);
        auto taken = watch->decisions_before(exit_seq ? *exit_seq : UINT64_MAX);
        if (taken.truncated) start["decisions_truncated"] = true;
        const DenialBasis vmm_basis{vmm_bundle, vmm_bundle, nullptr, false, nullptr};
        for (const auto& rec : taken.records) {
            json row = audit::to_json(rec);
            // A VM run's host-side records are its VMM's, judged under the
            // VMM's policy (the guest's are marked in_guest): each is
            // explained with the bundle it was decided under.
            const auto detail = row.find("detail");  // not row["detail"]: that would add a null one
            const bool by_vmm = vm_launch && !(detail != row.end() && detail->is_object() && detail->value("in_guest", false));
            if (rec.decision == BW_DECISION_DENY || rec.decision == BW_DECISION_AUDIT)
                denials.push_back(explain_denial(row, rec, by_vmm ? vmm_basis : basis));
            decisions.push_back(std::move(row));
        }
    }
    finish_run(outcome_name(rep.outcome), rep.exit_status());
}

// The reply, once the exit record (and so every record of the run before
// it: the watermark is in seq order) is acknowledged; or, for a run that
// could not be carried out as written, its error.
std::expected<json, TaskError> TaskManager::ExecRun::answer(const RunReport& rep) {
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
    if (verdict) out["profile"] = verdict->to_json();
    // Supervisor-level denials (limits, posture, refusals) have no kernel
    // record; they are listed with the layer that took them.
    for (const auto& s : rep.denials)
        denials.push_back({{"layer", "supervisor"}, {"explanation", s}, {"rule", nullptr}, {"grant_would_allow", nullptr}});
    if (!rep.error.empty() && rep.outcome == RunOutcome::Refused)
        denials.push_back({{"layer", "supervisor"}, {"explanation", rep.error}, {"rule", nullptr},
                           {"grant_would_allow", nullptr}});
    out["denials"] = std::move(denials);
    if (m.store_ && (!exit_seq || !m.store_->wait_committed(*exit_seq, std::chrono::milliseconds(5000))))
        out["report"]["warnings"].push_back("audit: the run's exit record was not acknowledged by the store within "
                                            "5 s; the decisions below may not be durable yet");
    if (m.opts_.metrics)
        m.opts_.metrics->run_latency.observe(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t_run).count());
    // A rule no layer in force holds: the request cannot be carried out on
    // this host as written (the run's records stay in the store).
    if (rep.refusal_code == "rule_unenforced") {
        json unheld = json::array();
        for (const auto& row : out["report"]["rules"]["coverage"])
            if (!row.value("held", true) && !row.contains("unenforceable")) unheld.push_back(row);
        return task_error(TaskErrc::RuleUnenforced, rep.error,
                   {{"run_id", run_id}, {"task_id", task_id}, {"tool", req.tool}, {"rules", std::move(unheld)}});
    }
    // The BPF layer could not take the run now (a peer holds the maps): the
    // same request may succeed later.
    if (rep.refusal_code == "bpf_binding")
        return task_error(TaskErrc::BpfUnavailable, rep.error, {{"run_id", run_id}, {"task_id", task_id}, {"tool", req.tool}});
    return out;
}

std::expected<json, TaskError> TaskManager::denials(uint64_t id, uint64_t after_seq, uint32_t limit) const {
    if (!store_) return task_error(TaskErrc::NoStore, "the audit store is not open");
    std::map<std::pair<uint64_t, std::string>, DenialBasis> by_epoch;  // (version, tool)
    std::map<std::string, DenialBasis> current;
    {
        std::lock_guard lk(mu_);
        auto it = tasks_.find(id);
        if (it == tasks_.end()) return task_error(TaskErrc::UnknownTask, "no task " + std::to_string(id));
        const Task& t = *it->second;
        for (const auto& e : t.epochs)
            for (const auto& [tool, b] : e.bundles) by_epoch[{e.policy_version, tool}] = e.basis(t, tool);
        for (const auto& [tool, b] : t.current().bundles) current[tool] = t.current().basis(t, tool);
    }
    audit::Query q;
    q.task_id = id;
    q.kind = audit::RecordKind::Decision;
    q.decision = BW_DECISION_DENY;
    q.after_seq = after_seq;
    q.limit = limit;
    auto res = store_->query(q);
    if (!res) return task_error(TaskErrc::QueryFailed, res.error().message);
    json out = json::array();
    for (const auto& rec : res->rows) {
        json row = audit::to_json(rec);
        // explained under the epoch that decided it, else the current one
        const DenialBasis* e = nullptr;
        if (auto f = by_epoch.find({rec.policy_version, rec.tool}); f != by_epoch.end()) e = &f->second;
        else if (auto c = current.find(rec.tool); c != current.end()) e = &c->second;
        json d = e ? explain_denial(row, rec, *e) : json(nullptr);
        out.push_back({{"record", std::move(row)}, {"denial", std::move(d)}});
    }
    return json{{"task_id", id},
                {"denials", std::move(out)},
                {"next_after_seq", res->next_after_seq ? json(*res->next_after_seq) : json(nullptr)}};
}

}  // namespace bulwark
