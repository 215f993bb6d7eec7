#include "profiles/profile.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace bulwark::profiles {

namespace {

double median_of(std::vector<double> v) {
    if (v.empty()) return 0;
    auto mid = v.begin() + std::ptrdiff_t(v.size() / 2);
    std::nth_element(v.begin(), mid, v.end());
    if (v.size() % 2) return *mid;
    double hi = *mid;
    double lo = *std::max_element(v.begin(), mid);
    return (lo + hi) / 2;
}

std::string figure(double v) {
    std::ostringstream o;
    o.precision(v >= 100 ? 0 : 1);
    o << std::fixed << v;
    return o.str();
}

}  // namespace

std::string_view item_noun(std::string_view feature) {
    if (feature == kExec) return "binary";
    if (feature == kDestination) return "destination";
    if (feature == kFileArea) return "file area";
    if (feature == kSecret) return "credential-like file";
    if (feature == kSyscall) return "system call";
    return feature;
}

nlohmann::json Finding::to_json() const {
    nlohmann::json j = {{"feature", feature}, {"kind", kind}, {"message", message}};
    if (kind == "first-time") j["item"] = item;
    else j.update({{"value", value}, {"bound", bound}});
    return j;
}

double NumberStats::median() const { return median_of({recent.begin(), recent.end()}); }

double NumberStats::mad() const {
    const double m = median();
    std::vector<double> dev;
    dev.reserve(recent.size());
    for (double v : recent) dev.push_back(std::fabs(v - m));
    return median_of(std::move(dev));
}

std::optional<Finding> Profile::score_item(std::string_view feature, const std::string& item) const {
    if (learning()) return std::nullopt;
    auto it = sets_.find(feature);
    if (it != sets_.end()) {
        if (it->second.runs.contains(item)) return std::nullopt;
        if (it->second.overflow) return std::nullopt;  // a set too varied to be usual
    }
    Finding f;
    f.feature = std::string(feature);
    f.kind = "first-time";
    f.item = item;
    f.message = "first-time " + std::string(item_noun(feature)) + " " + item + " in " + std::to_string(runs_) + " runs";
    return f;
}

std::vector<Finding> Profile::score(const RunFeatures& run) const {
    std::vector<Finding> out;
    if (learning()) return out;
    for (auto feature : kSetFeatures) {
        auto items = run.sets.find(feature);
        if (items == run.sets.end()) continue;
        for (const auto& item : items->second)
            if (auto f = score_item(feature, item)) out.push_back(std::move(*f));
    }
    for (const auto& nf : kNumberFeatures) {
        auto v = run.numbers.find(nf.name);
        auto s = numbers_.find(nf.name);
        if (v == run.numbers.end() || s == numbers_.end() || s->second.n == 0) continue;
        const double med = s->second.median();
        const double bound = std::max({2 * s->second.max, med + 10 * s->second.mad(), med + nf.floor});
        if (v->second <= bound) continue;
        Finding f;
        f.feature = std::string(nf.name);
        f.kind = "outlier";
        f.value = v->second;
        f.bound = bound;
        f.message = std::string(nf.name) + " " + figure(v->second) + " " + std::string(nf.unit) + " (usual: median " +
                    figure(med) + ", max " + figure(s->second.max) + " in " + std::to_string(runs_) + " runs)";
        out.push_back(std::move(f));
    }
    return out;
}

void Profile::learn(const RunFeatures& run) {
    if (pinned_) return;
    ++runs_;
    for (const auto& [feature, items] : run.sets) {
        auto& s = sets_[feature];
        for (const auto& item : items) {
            auto it = s.runs.find(item);
            if (it != s.runs.end()) ++it->second;
            else if (s.runs.size() < kMaxItems) s.runs.emplace(item, 1);
            else ++s.overflow;
        }
    }
    for (const auto& [feature, value] : run.numbers) {
        auto& s = numbers_[feature];
        s.recent.push_back(value);
        if (s.recent.size() > kRecent) s.recent.pop_front();
        s.max = s.n ? std::max(s.max, value) : value;
        ++s.n;
    }
}

void Profile::reset() {
    runs_ = 0;
    sets_.clear();
    numbers_.clear();
}

nlohmann::json Profile::to_json() const {
    nlohmann::json sets = nlohmann::json::object();
    for (const auto& [feature, s] : sets_) {
        nlohmann::json items = nlohmann::json::object();
        for (const auto& [item, n] : s.runs) items[item] = n;
        sets[feature] = {{"items", std::move(items)}, {"overflow", s.overflow}};
    }
    nlohmann::json numbers = nlohmann::json::object();
    for (const auto& [feature, s] : numbers_)
        numbers[feature] = {{"n", s.n}, {"max", s.max}, {"median", s.median()}, {"mad", s.mad()},
                            {"recent", nlohmann::json(std::vector<double>(s.recent.begin(), s.recent.end()))}};
    return {{"tool", tool_},     {"learn_runs", learn_runs_}, {"runs", runs_},        {"pinned", pinned_},
            {"learning", learning()}, {"sets", std::move(sets)}, {"numbers", std::move(numbers)}};
}

Profile Profile::from_json(const nlohmann::json& j) {
    Profile p(j.at("tool").get<std::string>(), j.at("learn_runs").get<uint32_t>());
    p.runs_ = j.at("runs").get<uint64_t>();
    p.pinned_ = j.at("pinned").get<bool>();
    for (const auto& [feature, s] : j.at("sets").items()) {
        auto& out = p.sets_[feature];
        for (const auto& [item, n] : s.at("items").items()) out.runs.emplace(item, n.get<uint64_t>());
        out.overflow = s.at("overflow").get<uint64_t>();
    }
    for (const auto& [feature, s] : j.at("numbers").items()) {
        auto& out = p.numbers_[feature];
        for (const auto& v : s.at("recent")) out.recent.push_back(v.get<double>());
        out.max = s.at("max").get<double>();
        out.n = s.at("n").get<uint64_t>();
    }
    return p;
}

}  // namespace bulwark::profiles
