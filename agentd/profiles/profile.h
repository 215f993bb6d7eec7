#pragma once
// A tool's profile: what its recorded runs usually did, and the scoring of
// one run against it.
//
// Learning. The first `learn_runs` runs of the tool (the learning window)
// are learned whatever they did; after it, a run is learned only when it
// raised no finding (an unusual run does not teach the profile that it is
// usual; accepting its finding does). A pinned profile learns nothing.
//
// Scoring (once the window is full):
// - a set feature's item never seen in a learned run is a "first-time"
//   finding (a binary, a destination, a file area, a credential-like file,
//   a refused system call);
// - a number above max(2 x the largest learned value, median + 10 x MAD,
//   median + the feature's floor) is an "outlier" finding. The bounds are
//   wide on purpose: the target is at most one false alarm per 1,000 usual
//   runs, and the attacks this catches (a slow loop, a miner, a mass read,
//   a burst of denials) depart by far more.
// Numbers keep the last kRecent learned values (median, MAD) and the
// largest ever learned; items keep in how many learned runs they appeared,
// at most kMaxItems per feature (beyond it, new items are counted as
// `overflow` and not scored as first-time: a tool that varies that much
// has no usual set).
//
// Cost. A profile is learned and scored in place, once per run, by its
// owner (the ProfileBook, under its lock): its numbers keep their recent
// values sorted as well (median and MAD without a copy or a sort), and the
// items of the features judged while a run runs (exec, destination) are
// also kept as immutable sets, replaced only when a learned run adds an
// item; a LiveView shares them with the runs in flight, which judge each
// record against it without the owner's lock.
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "profiles/run_features.h"

namespace bulwark::profiles {

inline constexpr size_t kRecent = 256;
inline constexpr size_t kMaxItems = 4096;

struct Finding {
    std::string feature;  // "exec", "wall_ms", ...
    std::string kind;     // "first-time" | "outlier"
    std::string item;     // first-time: the item
    double value = 0;     // outlier: the run's value
    double bound = 0;     // outlier: what the profile allows
    std::string message;  // "first-time binary /usr/bin/nc in 412 runs"
    uint64_t task_id = 0;  // the task whose own profile found it; 0: the tool's profile
    nlohmann::json to_json() const;
};

class NumberStats {
public:
    void add(double v);
    const std::deque<double>& recent() const { return recent_; }  // the last kRecent learned values, oldest first
    double max() const { return max_; }
    uint64_t n() const { return n_; }
    double median() const;
    double mad() const;  // median absolute deviation from the median
    static NumberStats from(const std::deque<double>& recent, double max, uint64_t n);

private:
    std::deque<double> recent_;
    std::vector<double> sorted_;  // recent_, sorted
    double max_ = 0;
    uint64_t n_ = 0;
};

using ItemNames = std::set<std::string, std::less<>>;

// What a run in flight judges its items against, as the profile was when the
// run started: whether the window is full, the runs learned, and the learned
// items of the features judged live (exec, destination).
class LiveView {
public:
    std::optional<Finding> score_item(std::string_view feature, const std::string& item) const;

private:
    friend class Profile;
    struct Known {
        std::shared_ptr<const ItemNames> names;  // null: none learned
        bool overflow = false;
    };
    const Known* known(std::string_view feature) const;
    uint64_t runs_ = 0;
    uint64_t task_id_ = 0;
    bool learning_ = true;
    Known exec_, destination_;
};

struct ItemStats {
    std::map<std::string, uint64_t, std::less<>> runs;  // item -> learned runs it appeared in
    uint64_t overflow = 0;                             // items past kMaxItems
};

class Profile {
public:
    Profile() = default;
    // task_id: a task's own profile of the tool (its findings say so); 0: the tool's.
    Profile(std::string tool, uint32_t learn_runs, uint64_t task_id = 0)
        : tool_(std::move(tool)), learn_runs_(learn_runs), task_id_(task_id) {}

    const std::string& tool() const { return tool_; }
    uint64_t task_id() const { return task_id_; }
    uint64_t runs() const { return runs_; }  // runs learned
    uint32_t learn_runs() const { return learn_runs_; }
    void set_learn_runs(uint32_t n) { learn_runs_ = n; }
    bool learning() const { return runs_ < learn_runs_; }
    bool pinned() const { return pinned_; }
    void set_pinned(bool p) { pinned_ = p; }

    // Findings of one run (none while learning).
    std::vector<Finding> score(const RunFeatures& f) const;
    // A finding for one item of the run, or none.
    std::optional<Finding> score_item(std::string_view feature, const std::string& item) const;
    // A set feature's learned items, or null when it learned none.
    const ItemStats* items(std::string_view feature) const {
        auto it = sets_.find(feature);
        return it == sets_.end() ? nullptr : &it->second;
    }
    // What runs starting now judge their items against as they happen.
    std::shared_ptr<const LiveView> live_view() const;
    void learn(const RunFeatures& f);
    // The learned part emptied: the window starts again.
    void reset();

    // {tool, [task_id,] learn_runs, runs, pinned, learning, sets: {feature: {items: {item: runs}, overflow}},
    //  numbers: {feature: {n, max, median, mad, recent: [...]}}}
    nlohmann::json to_json() const;
    static Profile from_json(const nlohmann::json& j);  // throws nlohmann::json::exception

private:
    std::string tool_;
    uint32_t learn_runs_ = 20;
    uint64_t task_id_ = 0;
    uint64_t runs_ = 0;
    bool pinned_ = false;
    std::map<std::string, ItemStats, std::less<>> sets_;
    std::map<std::string, NumberStats, std::less<>> numbers_;
    // The learned items of the features judged live, shared with live views.
    std::shared_ptr<const ItemNames> live_exec_, live_destination_;
    void learned_item(std::string_view feature, const std::string& item);
};

// What the message calls a set feature's item ("binary", "destination", ...).
std::string_view item_noun(std::string_view feature);

}  // namespace bulwark::profiles
