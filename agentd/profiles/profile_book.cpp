#include "profiles/profile_book.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "audit/audit_db.h"

namespace bulwark::profiles {

namespace {

using nlohmann::json;

std::string sql_text(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
}

audit::AuditRecord profile_record(const std::string& tool, json detail) {
    audit::AuditRecord r;
    r.kind = audit::RecordKind::Profile;
    r.ts_ns = audit::realtime_now_ns();
    r.tool = tool;
    r.layer = BW_LAYER_SUPERVISOR;
    r.detail = detail.dump();
    return r;
}

// Every record of one run of one kind, page by page.
std::expected<std::vector<audit::AuditRecord>, std::string> run_records(const audit::AuditStore& store,
                                                                         uint64_t task_id, uint64_t run_id,
                                                                         audit::RecordKind kind, size_t at_most) {
    std::vector<audit::AuditRecord> out;
    audit::Query q;
    q.task_id = task_id;
    q.run_id = run_id;
    q.kind = kind;
    q.limit = audit::Query::kMaxLimit;
    while (out.size() < at_most) {
        auto res = store.query(q);
        if (!res) return std::unexpected(res.error().message);
        for (auto& r : res->rows) out.push_back(std::move(r));
        if (!res->next_after_seq) break;
        q.after_seq = *res->next_after_seq;
    }
    return out;
}

// Whether a recorded run was learned when it ended (see rebuild).
bool learned_live(const audit::AuditRecord& exit, const json& detail, bool finding_recorded) {
    if (detail.is_object()) {
        if (auto p = detail.find("profile"); p != detail.end() && p->is_object())
            return p->value("learned", false);
        if (detail.value("reason", std::string()) == "abandoned") return false;
    }
    return exit.task_id != 0 && !finding_recorded;
}

std::unexpected<ProfileError> no_profile(const std::string& tool) {
    return std::unexpected(ProfileError{ProfileError::Code::UnknownTool, "no profile is kept for " + tool});
}

std::unexpected<ProfileError> no_task_profile(const std::string& tool, uint64_t task) {
    return std::unexpected(ProfileError{ProfileError::Code::UnknownTask,
                                        "no profile of " + tool + " is kept for task " + std::to_string(task)});
}

}  // namespace

void mark_concluded(json& exit_detail, const RunVerdict& v) {
    exit_detail["profile"] = {{"learned", v.learned}};
}

json RunVerdict::to_json() const {
    json f = json::array();
    for (const auto& x : findings) f.push_back(x.to_json());
    json j = {{"findings", std::move(f)}, {"learning", learning}, {"learned", learned}, {"profile_runs", profile_runs}};
    if (!response.empty()) j["response"] = response;
    if (!summary.empty()) j["summary"] = summary;
    if (task) j["task"] = {{"task_id", task->task_id}, {"learning", task->learning}, {"runs", task->runs}};
    if (!narrowed.is_null()) j["narrowed"] = narrowed;
    return j;
}

void RunObserver::on_decision(const audit::AuditRecord& r) {
    std::lock_guard lk(mu_);
    auto added = features_.add(r, vars_);
    // A first-time binary or destination is judged the moment it happens:
    // the one response that can still prevent what follows is to stop.
    for (auto& [feature, item] : added) {
        if (feature != kExec && feature != kDestination) continue;
        auto f = view_->score_item(feature, item);
        if (!f && task_view_) f = task_view_->score_item(feature, item);
        if (!f) continue;
        live_.push_back(std::move(*f));
        if (plan_.respond == policy::ProfileResponse::Stop && !stopped_ && stop_) {
            stopped_ = true;
            stop_();
        }
    }
}

std::string RunObserver::stop_reason() const {
    std::lock_guard lk(mu_);
    if (!stopped_ || live_.empty()) return {};
    return "run stopped by the profile of " + tool_ + " (respond: stop): " + live_.front().message;
}

ProfileBook::Entry* ProfileBook::find(const std::string& tool) {
    auto it = entries_.find(tool);
    return it == entries_.end() ? nullptr : &it->second;
}
const ProfileBook::Entry* ProfileBook::find(const std::string& tool) const {
    auto it = entries_.find(tool);
    return it == entries_.end() ? nullptr : &it->second;
}

bool ProfileBook::keeps(const std::string& tool) const {
    std::lock_guard lk(mu_);
    return find(tool) != nullptr;
}

std::vector<std::string> ProfileBook::load(const std::map<std::string, policy::ProfilePlan>& tools) {
    std::vector<std::string> errors;
    std::lock_guard lk(mu_);
    for (const auto& [tool, plan] : tools) {
        Entry e;
        e.plan = plan;
        e.profile = Profile(tool, plan.learn_runs);
        if (store_) {
            if (auto r = rebuild(tool, e); !r) errors.push_back(tool + ": " + r.error());
        }
        renew_live(e);
        entries_[tool] = std::move(e);
    }
    return errors;
}

std::expected<void, std::string> ProfileBook::rebuild(const std::string& tool, Entry& e) {
    // The last snapshot ...
    auto snap = store_->read_sql("SELECT seq, detail FROM records WHERE kind = " +
                                     std::to_string(int(audit::RecordKind::Profile)) + " AND tool = " + sql_text(tool) +
                                     " AND task_id IS NULL ORDER BY seq DESC LIMIT 1",
                                 std::chrono::milliseconds(10000));
    if (!snap) return std::unexpected("reading its last profile record: " + snap.error().message);
    Profile p(tool, e.plan.learn_runs);
    if (!snap->empty()) {
        try {
            json d = json::parse((*snap)[0][1].get<std::string>());
            p = Profile::from_json(d.at("profile"));
            e.version = d.at("version").get<uint64_t>();
            e.through_seq = d.at("through_seq").get<uint64_t>();
            e.accepted = d.value("accepted", std::set<uint64_t>{});
        } catch (const json::exception& ex) {
            return std::unexpected("its last profile record (seq " + (*snap)[0][0].dump() + ") is unreadable: " + ex.what());
        }
    }
    // ... and the runs that ended after it, learned as their exit records say
    // they were (mark_concluded). An exit record without the mark (written
    // before exit records had it) is learned unless a finding was recorded
    // for the run (a run's finding record comes before its exit record, and
    // after the snapshot: a snapshot waits for every concluded run's exit
    // record), and never when no book could have concluded it: a run
    // abandoned by a daemon that died, or no task's (a container's). One
    // pass over the tool's records after the snapshot; a run that started
    // before it (its first records are not in the pass) is read back on its
    // own at its exit.
    struct Replaying {
        RunFeatures features;
        policy::TaskVars vars;
        bool started = false;  // its start record is in the pass
        bool found = false;    // a finding was recorded for it
    };
    std::map<std::pair<uint64_t, uint64_t>, Replaying> runs;
    const bool was_learning = p.learning();
    audit::Query q;
    q.tool = tool;
    q.after_seq = e.through_seq;
    q.limit = audit::Query::kMaxLimit;
    uint64_t replayed = 0;
    for (;;) {
        auto page = store_->query(q);
        if (!page) return std::unexpected("reading its runs: " + page.error().message);
        for (const auto& x : page->rows) {
            const std::pair key{x.task_id, x.run_id};
            switch (x.kind) {
            case audit::RecordKind::RunStart: {
                Replaying& r = runs[key];
                r.started = true;
                r.vars = audit::run_start_vars(x).value_or(policy::TaskVars{});
                break;
            }
            case audit::RecordKind::Decision:
                if (auto it = runs.find(key); it != runs.end() && it->second.started)
                    it->second.features.add(x, it->second.vars);
                break;
            case audit::RecordKind::Finding: runs[key].found = true; break;
            case audit::RecordKind::RunExit: {
                e.through_seq = std::max(e.through_seq, x.seq);
                Replaying r;
                if (auto it = runs.find(key); it != runs.end()) {
                    r = std::move(it->second);
                    runs.erase(it);
                }
                const json exit_detail = json::parse(x.detail, nullptr, false);
                if (!learned_live(x, exit_detail, r.found)) break;
                if (r.started) {
                    r.features.add_exit(exit_detail);
                } else {
                    auto f = recorded_run_features(*store_, x.task_id, x.run_id, exit_detail);
                    if (!f) return std::unexpected("reading run " + std::to_string(x.run_id) + ": " + f.error());
                    r.features = std::move(*f);
                }
                p.learn(r.features);
                ++replayed;
                break;
            }
            default: break;
            }
        }
        if (!page->next_after_seq) break;
        q.after_seq = *page->next_after_seq;
    }
    if (p.learn_runs() != e.plan.learn_runs) {
        p.set_learn_runs(e.plan.learn_runs);  // the rule file changed it
        ++e.version;
    }
    if (was_learning && !p.learning()) ++e.version;
    e.profile = std::move(p);
    if (replayed) spdlog::info("profile of {}: {} run(s) after its last snapshot replayed", tool, replayed);
    return {};
}

std::expected<RunFeatures, std::string> recorded_run_features(const audit::AuditStore& store, uint64_t task_id,
                                                              uint64_t run_id, const json& exit_detail) {
    RunFeatures f;
    policy::TaskVars vars;
    auto start = run_records(store, task_id, run_id, audit::RecordKind::RunStart, 1);
    if (!start) return std::unexpected(start.error());
    if (!start->empty()) vars = audit::run_start_vars(start->front()).value_or(policy::TaskVars{});
    auto decisions = run_records(store, task_id, run_id, audit::RecordKind::Decision, SIZE_MAX);
    if (!decisions) return std::unexpected(decisions.error());
    for (const auto& r : *decisions) f.add(r, vars);
    f.add_exit(exit_detail);
    return f;
}

std::shared_ptr<RunObserver> ProfileBook::observe(const std::string& tool, uint64_t task_id, uint64_t run_id,
                                                  policy::TaskVars vars, std::function<void()> stop) {
    std::lock_guard lk(mu_);
    Entry* e = find(tool);
    if (!e) return nullptr;
    std::shared_ptr<RunObserver> o(
        new RunObserver(tool, task_id, run_id, e->plan, e->live, std::move(vars), std::move(stop)));
    if (e->plan.task_learn_runs && task_id) {
        auto [it, fresh] = e->tasks.try_emplace(task_id);
        if (fresh) {
            it->second.profile = Profile(tool, e->plan.task_learn_runs, task_id);
            it->second.live = it->second.profile.live_view();
        }
        o->task_view_ = it->second.live;
    }
    return o;
}

void ProfileBook::end_task(uint64_t task_id) {
    std::lock_guard lk(mu_);
    for (auto& [tool, e] : entries_) e.tasks.erase(task_id);
}

RunVerdict ProfileBook::conclude(RunObserver& run, const json& exit_detail) {
    RunFeatures features;
    std::vector<Finding> live;
    bool stopped = false;
    {
        std::lock_guard lk(run.mu_);
        run.features_.add_exit(exit_detail);
        features = std::move(run.features_);  // the run is over: nothing adds to them now
        live = run.live_;
        stopped = run.stopped_;
    }
    RunVerdict v;
    std::lock_guard lk(mu_);
    Entry* e = find(run.tool_);
    if (!e) return v;
    // Scored against the profile as it is now (other runs may have taught
    // it since this one started); what was found live stays found.
    // A task's own profile adds what the tool's does not find already.
    v.findings = e->profile.score(features);
    auto add = [&](Finding f) {
        bool have = std::any_of(v.findings.begin(), v.findings.end(),
                                [&](const Finding& x) { return x.feature == f.feature && x.item == f.item; });
        if (!have) v.findings.push_back(std::move(f));
    };
    auto scope = e->tasks.find(run.task_id_);
    Entry::TaskScope* task = scope == e->tasks.end() ? nullptr : &scope->second;
    if (task)
        for (auto& f : task->profile.score(features)) add(std::move(f));
    for (auto& f : live) add(std::move(f));
    v.learning = e->profile.learning();
    ++e->pending;
    // A snapshot every kSnapshotEvery runs, learned or not: a restart
    // replays at most that many.
    if (++e->since_snapshot >= kSnapshotEvery && e->due.empty()) e->due = "snapshot";
    if (v.findings.empty() && task && !task->profile.pinned()) {
        const bool was_learning = task->profile.learning();
        task->profile.learn(features);
        task->live = task->profile.live_view();
        if (was_learning && !task->profile.learning()) snapshot_task(run.tool_, *task, "learned");
    }
    if (task) v.task = RunVerdict::TaskPart{run.task_id_, task->profile.learning(), task->profile.runs()};
    if (v.findings.empty()) {
        if (!e->profile.pinned()) {
            e->profile.learn(features);
            renew_live(*e);
            v.learned = true;
            if (v.learning && !e->profile.learning()) {
                ++e->version;
                e->due = "learned";
            }
        }
    } else {
        const auto respond = run.plan_.respond;
        v.response = stopped ? "stopped"
                     : respond == policy::ProfileResponse::RequireGrant ? "require-grant"
                     : respond == policy::ProfileResponse::Narrow       ? "narrowed"
                                                                       : "recorded";
        v.summary = "unusual for " + run.tool_ + ": " + v.findings.front().message;
        if (v.findings.size() > 1) v.summary += " (and " + std::to_string(v.findings.size() - 1) + " more)";
        if (store_) {
            json fs = json::array();
            for (const auto& f : v.findings) fs.push_back(f.to_json());
            audit::AuditRecord r;
            r.kind = audit::RecordKind::Finding;
            r.ts_ns = audit::realtime_now_ns();
            r.task_id = run.task_id_;
            r.run_id = run.run_id_;
            r.tool = run.tool_;
            r.layer = BW_LAYER_SUPERVISOR;
            r.detail = json{{"summary", v.summary},
                            {"findings", std::move(fs)},
                            {"response", v.response},
                            {"profile_version", e->version},
                            {"profile_runs", e->profile.runs()},
                            {"features", features.to_json()}}
                           .dump();
            v.finding_seq = store_->enqueue(std::move(r)).value_or(0);
        }
    }
    v.profile_runs = e->profile.runs();
    return v;
}

void ProfileBook::exit_recorded(const std::string& tool, uint64_t exit_seq) {
    std::lock_guard lk(mu_);
    Entry* e = find(tool);
    if (!e) return;
    e->through_seq = std::max(e->through_seq, exit_seq);
    if (e->pending) --e->pending;
    if (e->pending == 0 && !e->due.empty()) snapshot(tool, *e, e->due);
}

void ProfileBook::snapshot(const std::string& tool, Entry& e, std::string change, json extra) {
    e.due.clear();  // `change` may be the due one: it is a copy
    e.since_snapshot = 0;
    if (!store_) return;
    json d = extra.is_object() ? extra : json::object();
    d.update({{"change", std::move(change)},
              {"version", e.version},
              {"through_seq", e.through_seq},
              {"accepted", e.accepted},
              {"profile", e.profile.to_json()}});
    (void)store_->enqueue(profile_record(tool, std::move(d)));
}

void ProfileBook::snapshot_task(const std::string& tool, const Entry::TaskScope& t, std::string change, json extra) {
    if (!store_) return;
    json d = extra.is_object() ? extra : json::object();
    d.update({{"change", std::move(change)}, {"profile", t.profile.to_json()}});
    auto r = profile_record(tool, std::move(d));
    r.task_id = t.profile.task_id();
    (void)store_->enqueue(std::move(r));
}

json ProfileBook::summary(const std::string& tool, const Entry& e) const {
    const Profile& p = e.profile;
    json j = {{"tool", tool},
              {"version", e.version},
              {"runs", p.runs()},
              {"learn_runs", p.learn_runs()},
              {"learning", p.learning()},
              {"pinned", p.pinned()},
              {"respond", policy::response_name(e.plan.respond)}};
    if (e.plan.task_learn_runs) j["task_learn_runs"] = e.plan.task_learn_runs;
    return j;
}

std::expected<ProfileBook::Copy, ProfileError> ProfileBook::copy(const std::string& tool,
                                                                std::optional<uint64_t> task) const {
    std::lock_guard lk(mu_);
    const Entry* e = find(tool);
    if (!e) return no_profile(tool);
    if (!task) return Copy{e->profile, e->version};
    auto it = e->tasks.find(*task);
    if (it == e->tasks.end()) return no_task_profile(tool, *task);
    return Copy{it->second.profile, e->version};
}

json ProfileBook::list() const {
    std::lock_guard lk(mu_);
    json out = json::array();
    for (const auto& [tool, e] : entries_) out.push_back(summary(tool, e));
    return {{"profiles", std::move(out)}};
}

std::expected<json, ProfileError> ProfileBook::get(const std::string& tool, std::optional<uint64_t> task) const {
    std::lock_guard lk(mu_);
    const Entry* e = find(tool);
    if (!e) return no_profile(tool);
    json j = summary(tool, *e);
    if (task) {
        auto it = e->tasks.find(*task);
        if (it == e->tasks.end()) return no_task_profile(tool, *task);
        j["profile"] = it->second.profile.to_json();
        return j;
    }
    j["profile"] = e->profile.to_json();
    json tasks = json::array();
    for (const auto& [id, t] : e->tasks)
        tasks.push_back({{"task_id", id},
                         {"runs", t.profile.runs()},
                         {"learn_runs", t.profile.learn_runs()},
                         {"learning", t.profile.learning()}});
    j["tasks"] = std::move(tasks);
    return j;
}

std::expected<ProfileBook::Edited, ProfileError> ProfileBook::edited(const std::string& tool,
                                                                    std::optional<uint64_t> task) {
    Entry* e = find(tool);
    if (!e) return no_profile(tool);
    if (!task) return Edited{e, nullptr};
    auto it = e->tasks.find(*task);
    if (it == e->tasks.end()) return no_task_profile(tool, *task);
    return Edited{e, &it->second};
}

void ProfileBook::changed(const std::string& tool, const Edited& p, std::string change, json extra) {
    if (p.task) {
        p.task->live = p.task->profile.live_view();
        snapshot_task(tool, *p.task, std::move(change), std::move(extra));
        return;
    }
    renew_live(*p.entry);
    ++p.entry->version;
    snapshot(tool, *p.entry, std::move(change), std::move(extra));
}

json ProfileBook::summary(const std::string& tool, const Edited& p) const {
    return p.task ? task_summary(tool, *p.entry, *p.task) : summary(tool, *p.entry);
}

json ProfileBook::task_summary(const std::string& tool, const Entry& e, const Entry::TaskScope& t) const {
    json j = summary(tool, e);
    j.update({{"task_id", t.profile.task_id()},
              {"runs", t.profile.runs()},
              {"learn_runs", t.profile.learn_runs()},
              {"learning", t.profile.learning()},
              {"pinned", t.profile.pinned()}});
    return j;
}

std::expected<json, ProfileError> ProfileBook::reset(const std::string& tool, std::optional<uint64_t> task) {
    std::lock_guard lk(mu_);
    auto p = edited(tool, task);
    if (!p) return std::unexpected(p.error());
    p->profile().reset();
    p->accepted().clear();
    changed(tool, *p, "reset");
    return summary(tool, *p);
}

std::expected<json, ProfileError> ProfileBook::pin(const std::string& tool, bool pinned, std::optional<uint64_t> task) {
    std::lock_guard lk(mu_);
    auto p = edited(tool, task);
    if (!p) return std::unexpected(p.error());
    if (p->profile().pinned() != pinned) {
        p->profile().set_pinned(pinned);
        changed(tool, *p, pinned ? "pin" : "unpin");
    }
    return summary(tool, *p);
}

std::expected<json, ProfileError> ProfileBook::accept(const std::string& tool, uint64_t finding_seq,
                                                      std::optional<uint64_t> task) {
    if (!keeps(tool)) return no_profile(tool);
    if (!store_) return std::unexpected(ProfileError{ProfileError::Code::Store, "no audit store"});
    std::string sql = "SELECT detail, run_id FROM records WHERE seq = " + std::to_string(finding_seq) +
                      " AND kind = " + std::to_string(int(audit::RecordKind::Finding)) + " AND tool = " + sql_text(tool);
    if (task) sql += " AND task_id = " + std::to_string(*task);
    auto rows = store_->read_sql(sql, std::chrono::milliseconds(5000));
    if (!rows) return std::unexpected(ProfileError{ProfileError::Code::Store, rows.error().message});
    if (rows->empty())
        return std::unexpected(ProfileError{ProfileError::Code::UnknownFinding,
                                            "no finding of " + tool + " with seq " + std::to_string(finding_seq) +
                                                (task ? " in task " + std::to_string(*task) : std::string())});
    RunFeatures f;
    try {
        f = RunFeatures::from_json(json::parse((*rows)[0][0].get<std::string>()).at("features"));
    } catch (const json::exception& ex) {
        return std::unexpected(ProfileError{ProfileError::Code::Store,
                                            "finding " + std::to_string(finding_seq) + " is unreadable: " + ex.what()});
    }
    std::lock_guard lk(mu_);
    auto p = edited(tool, task);
    if (!p) return std::unexpected(p.error());
    const std::string whose = task ? tool + " in task " + std::to_string(*task) : tool;
    if (p->profile().pinned())
        return std::unexpected(ProfileError{ProfileError::Code::Pinned,
                                            "the profile of " + whose + " is pinned: unpin it to accept a finding"});
    if (p->accepted().contains(finding_seq))
        return std::unexpected(ProfileError{ProfileError::Code::Accepted,
                                            "finding " + std::to_string(finding_seq) + " of " + whose +
                                                " was accepted already: its run is learned"});
    p->profile().learn(f);
    p->accepted().insert(finding_seq);
    changed(tool, *p, "accept", {{"finding_seq", finding_seq}, {"run_id", (*rows)[0][1]}});
    return summary(tool, *p);
}

}  // namespace bulwark::profiles
