#pragma once
// The profiles of the tools whose rules have a `profile:` block, kept by
// agentd serve: each run observed while it runs (RunObserver: its decision
// records as the store takes them; a first-time binary or destination is a
// finding the moment it happens, and `respond: stop` ends the run there),
// concluded when it ends (scored, then learned or not), and the results
// recorded in the audit store:
//   finding  one record per run with findings: the findings, the baseline
//            they depart from, the response taken, the run's features (so
//            that accepting it teaches the profile without re-reading it);
//   profile  a snapshot of a tool's profile (every kSnapshotEvery runs,
//            when its learning window fills, and at each change:
//            reset, pin, unpin, accept), with the seq of the last run exit
//            it accounts for; and, with the task's id, a task's own profile
//            when its window fills.
// Task profiles (`task_learn`): a task that runs the tool keeps a profile of
// its own runs as well, learned under the same rule; once the task has run
// the tool task_learn times, each further run is scored against both, so
// what is usual for the tool but not for this task (another of its allowed
// destinations, a binary other tasks run) is a finding. A task's profile
// lives as long as the task (tasks do not outlive the daemon).
// Crash-only: nothing lives only in memory. At start (load) a profile is
// its last snapshot and the runs recorded after it, replayed through the
// same extraction, learned as they were live: each concluded run's exit
// record says whether it was learned (mark_concluded); a run no book
// concluded (abandoned by a daemon that died, a container's) is not learned.
// So a daemon killed at any instant comes back with the profile its live
// runs had built.
//
// Threads: every call may come from any thread; the book's mutex guards the
// profiles, learned and scored in place. An observer judges its run's items
// against the profile's LiveView as its run started (immutable, shared):
// RunObserver::on_decision runs on the producer's thread under the store's
// queue lock, so it takes only its own mutex and, for `respond: stop`,
// writes the run's cancel eventfd.
#include <cstdint>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "audit/audit_record.h"
#include "bulwark/policy/bundle.h"
#include "bulwark/policy/instantiate.h"
#include "profiles/profile.h"

namespace bulwark::audit {
class AuditStore;
}

namespace bulwark::profiles {

inline constexpr uint64_t kSnapshotEvery = 200;

struct ProfileError {
    enum class Code { UnknownTool, UnknownTask, UnknownFinding, Pinned, Accepted, Store } code = Code::Store;
    std::string message;
};

class RunObserver {
public:
    // One decision record of the run (RunWatch::Observer).
    void on_decision(const audit::AuditRecord& r);
    // "" unless the run was stopped: which finding stopped it.
    std::string stop_reason() const;

private:
    friend class ProfileBook;
    RunObserver(std::string tool, uint64_t task_id, uint64_t run_id, policy::ProfilePlan plan,
                std::shared_ptr<const LiveView> live, policy::TaskVars vars, std::function<void()> stop)
        : tool_(std::move(tool)), task_id_(task_id), run_id_(run_id), plan_(std::move(plan)), view_(std::move(live)),
          vars_(std::move(vars)), stop_(std::move(stop)) {}
    const std::string tool_;
    const uint64_t task_id_, run_id_;
    const policy::ProfilePlan plan_;
    const std::shared_ptr<const LiveView> view_;  // the profile as the run started
    const policy::TaskVars vars_;
    const std::function<void()> stop_;
    mutable std::mutex mu_;
    RunFeatures features_;
    std::vector<Finding> live_;  // found while the run ran
    std::shared_ptr<const LiveView> task_view_;  // the task's own profile as the run started, or null
    bool stopped_ = false;
};

// What the book concluded of one run: the exec reply's `profile` section.
struct RunVerdict {
    std::vector<Finding> findings;
    std::string response;      // "" (none), "recorded", "stopped", "require-grant", "narrowed"
    uint64_t finding_seq = 0;  // its finding record's, when the store took it
    std::string summary;       // "unusual for curl: first-time destination ... in 412 runs"
    bool learning = false;     // the profile was still in its learning window
    bool learned = false;      // this run was learned
    uint64_t profile_runs = 0; // runs learned, after this one
    // The task's own profile (task_learn), when the tool keeps them.
    struct TaskPart {
        uint64_t task_id = 0;
        bool learning = false;
        uint64_t runs = 0;  // after this one
    };
    std::optional<TaskPart> task;
    // `narrowed`: the epoch the task moved to, or why the tool is held
    // instead (set by the task manager, which carries the response out).
    nlohmann::json narrowed;
    nlohmann::json to_json() const;
};

// Written into the run's exit record's detail before it is enqueued: what
// the replay at the next start learns the run by ({"profile": {"learned"}}).
void mark_concluded(nlohmann::json& exit_detail, const RunVerdict& v);

class ProfileBook {
public:
    explicit ProfileBook(audit::AuditStore* store) : store_(store) {}

    // The tools to keep profiles for, with their plans, each rebuilt from the
    // store (last snapshot + runs after it). A tool whose records cannot be
    // read starts empty, and the error says which.
    std::vector<std::string> load(const std::map<std::string, policy::ProfilePlan>& tools);
    bool keeps(const std::string& tool) const;

    // A run of `tool` starting; `stop` ends it (respond: stop). nullptr for a
    // tool the book keeps no profile for.
    std::shared_ptr<RunObserver> observe(const std::string& tool, uint64_t task_id, uint64_t run_id,
                                         policy::TaskVars vars, std::function<void()> stop);
    // The task is closed: its own profiles are dropped.
    void end_task(uint64_t task_id);
    // The run ended: its exit figures (the exit record's detail) added, scored
    // (live findings and those of its end), learned or not, and the finding
    // record enqueued before the caller enqueues the exit record.
    RunVerdict conclude(RunObserver& run, const nlohmann::json& exit_detail);
    // The seq of the run's exit record once enqueued: what the next snapshot
    // accounts for.
    void exit_recorded(const std::string& tool, uint64_t exit_seq);

    // A copy of the tool's profile, with its version; with `task`, of that
    // task's own profile of the tool (its version: the tool's).
    struct Copy {
        Profile profile;
        uint64_t version = 0;
    };
    std::expected<Copy, ProfileError> copy(const std::string& tool,
                                           std::optional<uint64_t> task = std::nullopt) const;

    nlohmann::json list() const;
    // The tool's profile and its tasks' (summaries); with `task`, that task's
    // own profile of the tool.
    std::expected<nlohmann::json, ProfileError> get(const std::string& tool,
                                                    std::optional<uint64_t> task = std::nullopt) const;
    // Each on the tool's profile, or with `task` on that task's own (its
    // change recorded as a profile record with the task's id).
    std::expected<nlohmann::json, ProfileError> reset(const std::string& tool,
                                                      std::optional<uint64_t> task = std::nullopt);
    std::expected<nlohmann::json, ProfileError> pin(const std::string& tool, bool pinned,
                                                    std::optional<uint64_t> task = std::nullopt);
    // The run of finding record `seq` learned as usual (with `task`: by the
    // task's own profile; the finding must be of a run of that task).
    std::expected<nlohmann::json, ProfileError> accept(const std::string& tool, uint64_t finding_seq,
                                                       std::optional<uint64_t> task = std::nullopt);

private:
    struct Entry {
        policy::ProfilePlan plan;
        Profile profile;
        std::shared_ptr<const LiveView> live;  // profile.live_view(), renewed at each change
        uint64_t version = 1;       // changes: learning window filled, reset, pin, unpin, accept
        uint64_t through_seq = 0;   // the last run exit accounted for
        uint64_t since_snapshot = 0;
        // Runs concluded whose exit record is not enqueued yet: a snapshot
        // waits for them, so that it never accounts for a run whose exit
        // record comes after its through_seq (a replay would learn it twice).
        uint64_t pending = 0;
        std::string due;  // the change a snapshot is due for, "" when none
        std::set<uint64_t> accepted;  // seqs of the findings accepted since the last reset
        struct TaskScope {
            Profile profile;
            std::shared_ptr<const LiveView> live;
            std::set<uint64_t> accepted;  // as Entry::accepted
        };
        std::map<uint64_t, TaskScope> tasks;  // task id -> its own profile (plan.task_learn_runs)
    };
    Entry* find(const std::string& tool);
    // The profile changed: runs starting from now judge against it.
    static void renew_live(Entry& e) { e.live = e.profile.live_view(); }
    // Enqueues a profile record of a task's own profile (mu_ held).
    void snapshot_task(const std::string& tool, const Entry::TaskScope& t, std::string change,
                       nlohmann::json extra = {});
    nlohmann::json task_summary(const std::string& tool, const Entry& e, const Entry::TaskScope& t) const;
    // The profile an edit names: the tool's, or a task's own (mu_ held).
    struct Edited {
        Entry* entry;
        Entry::TaskScope* task;  // null: the tool's profile
        Profile& profile() const { return task ? task->profile : entry->profile; }
        std::set<uint64_t>& accepted() const { return task ? task->accepted : entry->accepted; }
    };
    std::expected<Edited, ProfileError> edited(const std::string& tool, std::optional<uint64_t> task);
    // An edited profile changed: runs starting now judge against it, and it is
    // recorded (the tool's with a new version).
    void changed(const std::string& tool, const Edited& p, std::string change, nlohmann::json extra = {});
    nlohmann::json summary(const std::string& tool, const Edited& p) const;
    const Entry* find(const std::string& tool) const;
    nlohmann::json summary(const std::string& tool, const Entry& e) const;
    // Enqueues a profile record of `e` (mu_ held).
    void snapshot(const std::string& tool, Entry& e, std::string change, nlohmann::json extra = {});
    std::expected<void, std::string> rebuild(const std::string& tool, Entry& e);

    audit::AuditStore* store_;
    mutable std::mutex mu_;
    std::map<std::string, Entry> entries_;
};

// The features of one recorded run, read back from the store: its decision
// records, its start record's work directory and its exit record's figures.
std::expected<RunFeatures, std::string> recorded_run_features(const audit::AuditStore& store, uint64_t task_id,
                                                              uint64_t run_id, const nlohmann::json& exit_detail);

}  // namespace bulwark::profiles
