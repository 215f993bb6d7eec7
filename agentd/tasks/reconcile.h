#pragma once
// Restart reconciliation: what an agentd that died (kill -9, crash, power
// loss) left behind, found and settled by the next one before it serves.
//   1. reap_previous_sandboxes: run cgroup leaves of agentd processes that are
//      gone (below this process's cgroups and the BPF cgroup parent): what is
//      still alive in them is killed (nothing runs unsupervised), the leaves
//      are removed. Run before the BPF runtime starts, so that its start-up
//      sweep drops the policy bindings of exactly these cgroups.
//   2. close_abandoned_runs: every run with a start record and no exit record
//      gets an exit record saying it was abandoned, with what was found of it
//      (its leaf, the processes killed there, its deny-mask placeholders,
//      which are removed while still empty).
// The report goes to the log, a host_status record and /v1/health.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "audit/audit_db.h"
#include "sandbox/cgroup.h"

namespace bulwark {

struct ReconcileReport {
    std::vector<StaleLeaf> leaves;
    uint64_t bpf_bindings = 0, bpf_slots = 0;  // the BPF runtime's start-up sweep
    struct ClosedRun {
        uint64_t task_id = 0, run_id = 0;
        std::string tool;
        nlohmann::json found;  // what was left of it
    };
    std::vector<ClosedRun> runs;
    std::vector<std::string> errors;  // what could not be settled, and why
    int64_t took_us = 0;

    size_t processes_killed() const;
    bool found_anything() const;
    nlohmann::json to_json() const;
    std::string summary() const;  // one line for the log
};

// Step 1. bpf_cgroup_parent: as configured ("" = the loader's default).
ReconcileReport reap_previous_sandboxes(const std::string& bpf_cgroup_parent);

// Step 2: closes the store's open runs (none of them can be this process's:
// it has started none yet) but those in `keep` (containers re-adopted: they
// live on), and waits until the exit records are committed.
void close_abandoned_runs(audit::AuditStore& store, ReconcileReport& rep, const std::set<uint64_t>& keep = {});

}  // namespace bulwark
