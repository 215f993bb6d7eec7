// Restart reconciliation (see reconcile.h).
#include "tasks/reconcile.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>

#include "audit/audit_record.h"
#include "bpf/bpf_loader.h"

namespace bulwark {
namespace {

using Clock = std::chrono::steady_clock;

int64_t us_since(Clock::time_point t0) {
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
}

nlohmann::json leaf_json(const StaleLeaf& l) {
    nlohmann::json j{{"path", l.path}, {"daemon_pid", l.daemon_pid}, {"processes_killed", l.processes},
                     {"removed", l.removed}};
    if (!l.error.empty()) j["error"] = l.error;
    return j;
}

// A placeholder directory a dead run made for a deny mask: removed while it
// is still empty (rmdir never removes anything else).
nlohmann::json settle_placeholder(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return {{"path", path}, {"state", "already gone"}};
    if (::rmdir(path.c_str()) == 0) return {{"path", path}, {"state", "removed"}};
    return {{"path", path}, {"state", std::string("kept: ") + std::strerror(errno)}};
}

}  // namespace

size_t ReconcileReport::processes_killed() const {
    size_t n = 0;
    for (const auto& l : leaves) n += l.processes;
    return n;
}

bool ReconcileReport::found_anything() const {
    return !leaves.empty() || !runs.empty() || bpf_bindings || bpf_slots || !errors.empty();
}

nlohmann::json ReconcileReport::to_json() const {
    nlohmann::json ls = nlohmann::json::array(), rs = nlohmann::json::array();
    for (const auto& l : leaves) ls.push_back(leaf_json(l));
    for (const auto& r : runs)
        rs.push_back({{"task_id", r.task_id}, {"run_id", r.run_id}, {"tool", r.tool}, {"found", r.found}});
    return {{"leaves", std::move(ls)},
            {"processes_killed", processes_killed()},
            {"bpf", {{"bindings_removed", bpf_bindings}, {"slots_freed", bpf_slots}}},
            {"runs_closed", std::move(rs)},
            {"errors", errors},
            {"took_us", took_us},
            {"summary", summary()}};
}

std::string ReconcileReport::summary() const {
    if (!found_anything()) return "nothing left by a previous agentd";
    size_t removed = 0;
    for (const auto& l : leaves) removed += l.removed;
    std::string s = "a previous agentd left " + std::to_string(leaves.size()) + " run cgroup(s) (" +
                    std::to_string(processes_killed()) + " process(es) killed, " + std::to_string(removed) +
                    " removed), " + std::to_string(bpf_bindings) + " BPF binding(s) and " + std::to_string(bpf_slots) +
                    " policy slot(s) (dropped), " + std::to_string(runs.size()) +
                    " run(s) without an exit record (closed as abandoned)";
    if (!errors.empty()) s += "; " + std::to_string(errors.size()) + " not settled: " + errors.front();
    return s;
}

ReconcileReport reap_previous_sandboxes(const std::string& bpf_cgroup_parent) {
    auto t0 = Clock::now();
    ReconcileReport rep;
    std::string parent;
    if (auto p = bpf::resolve_cgroup_parent(bpf_cgroup_parent)) parent = *p;
    rep.leaves = reap_stale_leaves(parent);
    for (const auto& l : rep.leaves)
        if (!l.removed) rep.errors.push_back("cgroup " + l.path + " not removed: " + l.error);
    rep.took_us = us_since(t0);
    return rep;
}

void close_abandoned_runs(audit::AuditStore& store, ReconcileReport& rep, const std::set<uint64_t>& keep) {
    auto t0 = Clock::now();
    using audit::RecordKind;
    const auto timeout = std::chrono::seconds(30);
    const std::string start = std::to_string(int(RecordKind::RunStart)), exit = std::to_string(int(RecordKind::RunExit));
    // Index-only (records_runs): the runs whose newest record kind is a start.
    auto open = store.read_sql("SELECT run_id FROM records WHERE kind IN (" + start + "," + exit +
                                   ") AND run_id IS NOT NULL GROUP BY run_id HAVING max(kind) = " + start,
                               timeout);
    if (!open) {
        rep.errors.push_back("open runs not read from the store: " + open.error().message);
        rep.took_us += us_since(t0);
        return;
    }
    std::map<std::string, const StaleLeaf*> leaf_of;  // "r<run id>" -> its v2 leaf
    for (const auto& l : rep.leaves)
        if (!l.label.empty() && !leaf_of.contains(l.label)) leaf_of[l.label] = &l;
    std::optional<uint64_t> last;
    for (const auto& row : *open) {
        uint64_t run_id = row[0].get<uint64_t>();
        if (keep.contains(run_id)) continue;
        auto rec = store.read_sql("SELECT task_id, tool, detail FROM records WHERE run_id = " + std::to_string(run_id) +
                                      " AND kind = " + start + " LIMIT 1",
                                  timeout);
        ReconcileReport::ClosedRun cr;
        cr.run_id = run_id;
        nlohmann::json detail = nlohmann::json::object();
        if (rec && !rec->empty()) {
            const auto& r = (*rec)[0];
            if (r[0].is_number()) cr.task_id = r[0].get<uint64_t>();
            if (r[1].is_string()) cr.tool = r[1].get<std::string>();
            if (r[2].is_string()) detail = nlohmann::json::parse(r[2].get<std::string>(), nullptr, false);
        }
        cr.found = nlohmann::json::object();
        if (auto it = leaf_of.find("r" + std::to_string(run_id)); it != leaf_of.end())
            cr.found["cgroup"] = leaf_json(*it->second);
        else
            cr.found["cgroup"] = "none left (the run had ended, or its sandbox was not built yet)";
        if (detail.is_object() && detail.contains("placeholders")) {
            nlohmann::json ps = nlohmann::json::array();
            for (const auto& p : detail["placeholders"])
                if (p.is_string()) ps.push_back(settle_placeholder(p.get<std::string>()));
            cr.found["placeholders"] = std::move(ps);
        }
        auto seq = store.enqueue(audit::run_exit_record(
            cr.task_id, run_id, cr.tool, "abandoned", -1,
            {{"outcome", "abandoned"},
             {"error", "agentd stopped before the run ended (no exit record); settled by agentd pid " +
                           std::to_string(::getpid()) + " at its start"},
             {"found", cr.found}}));
        if (!seq) rep.errors.push_back("exit record of run " + std::to_string(run_id) + " not taken by the store");
        else last = seq;
        rep.runs.push_back(std::move(cr));
    }
    if (last && !store.wait_committed(*last, timeout))
        rep.errors.push_back("the abandoned runs' exit records were not committed in time");
    rep.took_us += us_since(t0);
}

}  // namespace bulwark
