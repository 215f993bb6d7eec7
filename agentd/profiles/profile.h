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
#include <cstdint>
#include <deque>
#include <map>
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
    nlohmann::json to_json() const;
};

struct NumberStats {
    std::deque<double> recent;  // the last kRecent learned values
    double max = 0;
    uint64_t n = 0;
    double median() const;
    double mad() const;  // median absolute deviation from the median
};

struct ItemStats {
    std::map<std::string, uint64_t, std::less<>> runs;  // item -> learned runs it appeared in
    uint64_t overflow = 0;                             // items past kMaxItems
};

class Profile {
public:
    Profile() = default;
    Profile(std::string tool, uint32_t learn_runs) : tool_(std::move(tool)), learn_runs_(learn_runs) {}

    const std::string& tool() const { return tool_; }
    uint64_t runs() const { return runs_; }  // runs learned
    uint32_t learn_runs() const { return learn_runs_; }
    void set_learn_runs(uint32_t n) { learn_runs_ = n; }
    bool learning() const { return runs_ < learn_runs_; }
    bool pinned() const { return pinned_; }
    void set_pinned(bool p) { pinned_ = p; }

    // Findings of one run (none while learning).
    std::vector<Finding> score(const RunFeatures& f) const;
    // A finding for one item the moment it is seen (a live run), or none.
    std::optional<Finding> score_item(std::string_view feature, const std::string& item) const;
    void learn(const RunFeatures& f);
    // The learned part emptied: the window starts again.
    void reset();

    // {tool, learn_runs, runs, pinned, learning, sets: {feature: {items: {item: runs}, overflow}},
    //  numbers: {feature: {n, max, median, mad, recent: [...]}}}
    nlohmann::json to_json() const;
    static Profile from_json(const nlohmann::json& j);  // throws nlohmann::json::exception

private:
    std::string tool_;
    uint32_t learn_runs_ = 20;
    uint64_t runs_ = 0;
    bool pinned_ = false;
    std::map<std::string, ItemStats, std::less<>> sets_;
    std::map<std::string, NumberStats, std::less<>> numbers_;
};

// What the message calls a set feature's item ("binary", "destination", ...).
std::string_view item_noun(std::string_view feature);

}  // namespace bulwark::profiles
