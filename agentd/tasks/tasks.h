#pragma once
// Tasks: what an agent framework asks agentd for. A task holds a set of
// tools, a work directory and a grant that narrows each tool's rule file
// (grants.h: attenuation only). Its policy moves through epochs: creation,
// each grant update (an atomic switch: the next exec, and through the BPF
// binding the next operation of running tools, sees the new epoch), a
// time-boxed grant, and the automatic return when that grant expires. Every
// epoch and every run is written to the audit store; a run starts only after
// its run_start record is acknowledged (committed), so no tool ever ran
// without a durable trace.
//
// Threads: every public call is thread-safe. exec() blocks for the whole run
// (the API offloads it to the worker pool); a timer thread ends time-boxed
// grants. Tasks live in memory: after a daemon restart they are gone (their
// records stay in the store) and frameworks create new ones.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bulwark/policy/bundle.h"
#include "bulwark/policy/instantiate.h"
#include "tasks/run_binding.h"
#include "tasks/task_error.h"
#include "tasks/workdir_files.h"

namespace bulwark {
namespace profiles {
class ProfileBook;
struct RunVerdict;
}
namespace vm {
struct MicroVmHost;
}
class LeftCgroups;
class ToolCatalog;
class RunRegistry;
struct Metrics;
namespace audit {
class AuditStore;
}

// A task a caller asks for (POST /v1/tasks).
struct CreateTaskRequest {
    std::vector<std::string> tools;      // names of the catalog's tools, no repeats
    std::string label;
    std::optional<std::string> workdir;  // absolute; none: <work_root>/<task id>, made for it
    bool skip_unavailable = false;       // leave out (and say so) tools that do not instantiate here
    // The grant in its own language (tasks/grant_json.h: read against the
    // task's variables once its work directory is known); null: none.
    nlohmann::json grant;
};

// A task's new grant (PUT /v1/tasks/{id}/grant).
struct GrantUpdate {
    nlohmann::json grant;  // as in CreateTaskRequest; null: the tools' rules as they are
    std::optional<std::chrono::milliseconds> expires_in;  // time-boxed: then back to the grant before
};

// One run a caller asks of a task (POST /v1/tasks/{id}/exec).
struct ExecRequest {
    std::string tool;
    std::vector<std::string> argv;
    std::optional<std::string> stdin_data;
    std::optional<uint64_t> timeout_ms;  // lowers the tool's own limit, never raises it
    std::vector<WorkdirFile> files;      // written beneath the workdir before the run
    std::string client_ref;              // the caller's name for the run (cancel())
    // The W3C traceparent of the request that asked for the run (checked by
    // common/trace_context's parse_traceparent): kept in the run's start
    // record, so its records are exported with the caller's trace.
    std::optional<std::string> traceparent;
};

struct TaskOptions {
    std::filesystem::path work_root;  // default workdirs: <work_root>/<task id>
    size_t max_tasks = 1024;          // open tasks
    size_t max_runs_per_task = 4096;  // remembered per task (oldest dropped from the view, not the store)
    std::chrono::milliseconds run_start_ack{5000};
    policy::Resolver resolve;         // default: resolve_host (getaddrinfo)
    // The decision sources every run is bound to (tasks/run_binding.h):
    // the BPF runtime and the kernel audit reader; none: no BPF binding and
    // no kernel audit decisions.
    DecisionSources sources;
    Metrics* metrics = nullptr;
    // Cgroup leaves a run could not remove are handed here (retried until
    // they go; /v1/health lists them). nullptr: only the run's report says so.
    LeftCgroups* left_cgroups = nullptr;
    // What this host offers the microVM tier (vm/microvm_run.h), probed once
    // at start; nullptr: no tier (a `required` tool is refused by coverage,
    // a `preferred` one runs in the host sandbox).
    const vm::MicroVmHost* microvm = nullptr;
    // The tools' behaviour profiles (profiles/profile_book.h): each run of a
    // tool it keeps is observed, scored when it ends and learned; nullptr:
    // no profiles (a rule that asks a profile for a response is refused by
    // coverage).
    profiles::ProfileBook* profiles = nullptr;
};

class TaskManager {
public:
    TaskManager(const ToolCatalog& catalog, audit::AuditStore* store, TaskOptions opts);
    ~TaskManager();  // cancels running runs and waits for them, stops the timer
    TaskManager(const TaskManager&) = delete;
    TaskManager& operator=(const TaskManager&) = delete;

    std::expected<nlohmann::json, TaskError> create(const CreateTaskRequest& req);
    nlohmann::json list() const;
    std::expected<nlohmann::json, TaskError> get(uint64_t id) const;
    std::expected<nlohmann::json, TaskError> update_grant(uint64_t id, const GrantUpdate& update);
    std::expected<nlohmann::json, TaskError> close(uint64_t id);
    // Lifts what a tool's profile narrowed (`respond: narrow`): a new epoch
    // with the tool under the task's grant alone. UnknownTask, TaskClosed,
    // NotNarrowed.
    std::expected<nlohmann::json, TaskError> lift_narrowing(uint64_t id, const std::string& tool);

    struct ExecHooks {
        std::function<void(const nlohmann::json& run)> on_start;            // after the run_start ack
        std::function<void(int stream, std::string_view data)> on_output;  // 1 stdout, 2 stderr
    };
    // Runs a tool of the task under the task's current epoch; blocks until
    // it ends. The result: exit, outputs, report, this run's decisions and
    // an explanation of each denial.
    std::expected<nlohmann::json, TaskError> exec(uint64_t id, const ExecRequest& req, ExecHooks hooks = {});

    // The task's denial records (oldest first, keyset paging like
    // /v1/audit), each explained like exec explains its own: the rule's
    // file:line and text, and the grant that would allow it.
    std::expected<nlohmann::json, TaskError> denials(uint64_t id, uint64_t after_seq, uint32_t limit) const;

    // The instantiated (un-narrowed) bundle of a task's tool, and the bundle
    // of its current epoch: explain and replay judge operations with them.
    std::shared_ptr<const policy::Bundle> tool_bundle(uint64_t id, const std::string& tool, bool narrowed) const;
    // (audit::task_vars_of the task's id and work directory: what its run
    // start records give once it is gone.)
    std::optional<policy::TaskVars> task_vars(uint64_t id) const;

    // Daemon shutdown: kills every running run (their exec calls return) and
    // refuses new ones.
    size_t cancel_all();
    // A run id for a run this manager does not launch (a container's, bound
    // by tasks/containers): unique with the task runs' ids.
    uint64_t reserve_run_id();
    // Ends the task's running runs whose exec named this client_ref: their
    // processes are killed, as at the task's close.
    std::expected<nlohmann::json, TaskError> cancel(uint64_t id, const std::string& client_ref);

    // Ends time-boxed grants whose time has come (the timer thread calls it;
    // tests may too). Returns the number of tasks switched back.
    size_t expire_due(std::chrono::system_clock::time_point now);

    struct Task;     // tasks.cpp
    struct ExecRun;  // one exec, phase by phase (tasks.cpp)
    struct WarmVm;   // a task's parked VM (tasks.cpp)

private:
    std::expected<nlohmann::json, TaskError> switch_epoch(Task& t, const nlohmann::json& grant_json,
                                                         std::optional<std::chrono::system_clock::time_point> expires_at,
                                                         std::string reason);
    // The same grant and expiry as the epoch in force, in a new epoch (a
    // narrowing made or lifted); mu_ held.
    std::expected<nlohmann::json, TaskError> renew_epoch(Task& t, std::string reason);
    // `respond: narrow` carried out for a run of `tool` that had findings;
    // the exec reply's `profile.narrowed`.
    nlohmann::json narrow_to_profile(Task& t, const std::string& tool, uint64_t run_id, const profiles::RunVerdict& v);
    void timer_loop(std::stop_token st);
    // Tears a task's warm VM down and releases its binding (outside mu_).
    void retire(WarmVm w);

    const ToolCatalog& catalog_;
    audit::AuditStore* store_;
    TaskOptions opts_;
    mutable std::mutex mu_;
    std::condition_variable_any timer_cv_;
    std::map<uint64_t, std::shared_ptr<Task>> tasks_;
    uint64_t next_task_id_ = 1;
    uint64_t next_run_id_ = 1;
    uint64_t next_policy_version_ = 1;
    uint64_t timer_gen_ = 0;  // bumped whenever an expiry may have changed
    bool shutting_down_ = false;
    size_t active_execs_ = 0;  // the destructor waits for them (after cancelling)
    std::condition_variable execs_done_;
    std::jthread timer_;
};

}  // namespace bulwark
