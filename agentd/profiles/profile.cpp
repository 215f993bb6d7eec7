#include "profiles/profile.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace bulwark::profiles {

namespace {

// The median of sorted values (of an even count: the mean of the middle two).
double median_sorted(const std::vector<double>& s) {
    if (s.empty()) return 0;
    const size_t k = s.size() / 2;
    return s.size() % 2 ? s[k] : (s[k - 1] + s[k]) / 2;
}

// "412 runs", or "12 runs of task 7" for a task's own profile.
std::string runs_of(uint64_t runs, uint64_t task_id) {
    std::string s = std::to_string(runs) + " runs";
    if (task_id) s += " of task " + std::to_string(task_id);
    return s;
}

Finding first_time(std::string_view feature, const std::string& item, uint64_t runs, uint64_t task_id) {
    Finding f;
    f.feature = std::string(feature);
    f.kind = "first-time";
    f.item = item;
    f.task_id = task_id;
    f.message = "first-time " + std::string(item_noun(feature)) + " " + item + " in " + runs_of(runs, task_id);
    return f;
}

bool judged_live(std::string_view feature) { return feature == kExec || feature == kDestination; }

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
    if (task_id) j["task_id"] = task_id;
    return j;
}

void NumberStats::add(double v) {
    recent_.push_back(v);
    sorted_.insert(std::upper_bound(sorted_.begin(), sorted_.end(), v), v);
    if (recent_.size() > kRecent) {
        sorted_.erase(std::lower_bound(sorted_.begin(), sorted_.end(), recent_.front()));
        recent_.pop_front();
    }
    max_ = n_ ? std::max(max_, v) : v;
    ++n_;
}

NumberStats NumberStats::from(const std::deque<double>& recent, double max, uint64_t n) {
    NumberStats s;
    for (double v : recent) s.add(v);
    s.max_ = max;
    s.n_ = n;
    return s;
}

double NumberStats::median() const { return median_sorted(sorted_); }

double NumberStats::mad() const {
    // The deviations from the median, smallest first, are the values walked
    // outward from it on both sides: the middle one is reached in n/2 steps.
    const size_t n = sorted_.size();
    if (!n) return 0;
    const double m = median();
    size_t right = size_t(std::lower_bound(sorted_.begin(), sorted_.end(), m) - sorted_.begin());
    size_t left = right;  // the next on the left is sorted_[left - 1]
    auto next = [&] {
        if (left == 0) return std::fabs(sorted_[right++] - m);
        if (right == n) return std::fabs(sorted_[--left] - m);
        const double dl = std::fabs(sorted_[left - 1] - m), dr = std::fabs(sorted_[right] - m);
        if (dl <= dr) {
            --left;
            return dl;
        }
        ++right;
        return dr;
    };
    double prev = 0, cur = 0;
    for (size_t i = 0; i <= n / 2; ++i) {
        prev = cur;
        cur = next();
    }
    return n % 2 ? cur : (prev + cur) / 2;
}

const LiveView::Known* LiveView::known(std::string_view feature) const {
    if (feature == kExec) return &exec_;
    if (feature == kDestination) return &destination_;
    return nullptr;
}

std::optional<Finding> LiveView::score_item(std::string_view feature, const std::string& item) const {
    const Known* k = known(feature);
    if (learning_ || !k) return std::nullopt;
    if (k->overflow || (k->names && k->names->contains(item))) return std::nullopt;
    return first_time(feature, item, runs_, task_id_);
}

std::optional<Finding> Profile::score_item(std::string_view feature, const std::string& item) const {
    if (learning()) return std::nullopt;
    auto it = sets_.find(feature);
    if (it != sets_.end()) {
        if (it->second.runs.contains(item)) return std::nullopt;
        if (it->second.overflow) return std::nullopt;  // a set too varied to be usual
    }
    return first_time(feature, item, runs_, task_id_);
}

std::shared_ptr<const LiveView> Profile::live_view() const {
    auto v = std::make_shared<LiveView>();
    v->runs_ = runs_;
    v->task_id_ = task_id_;
    v->learning_ = learning();
    auto overflow = [&](std::string_view feature) {
        auto it = sets_.find(feature);
        return it != sets_.end() && it->second.overflow;
    };
    v->exec_ = {live_exec_, overflow(kExec)};
    v->destination_ = {live_destination_, overflow(kDestination)};
    return v;
}

void Profile::learned_item(std::string_view feature, const std::string& item) {
    if (!judged_live(feature)) return;
    auto& names = feature == kExec ? live_exec_ : live_destination_;
    auto next = names ? std::make_shared<ItemNames>(*names) : std::make_shared<ItemNames>();
    next->insert(item);
    names = std::move(next);
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
        if (v == run.numbers.end() || s == numbers_.end() || s->second.n() == 0) continue;
        const double med = s->second.median();
        const double bound = std::max({2 * s->second.max(), med + 10 * s->second.mad(), med + nf.floor});
        if (v->second <= bound) continue;
        Finding f;
        f.feature = std::string(nf.name);
        f.kind = "outlier";
        f.value = v->second;
        f.bound = bound;
        f.task_id = task_id_;
        f.message = std::string(nf.name) + " " + figure(v->second) + " " + std::string(nf.unit) + " (usual: median " +
                    figure(med) + ", max " + figure(s->second.max()) + " in " + runs_of(runs_, task_id_) + ")";
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
            if (it != s.runs.end()) {
                ++it->second;
            } else if (s.runs.size() < kMaxItems) {
                s.runs.emplace(item, 1);
                learned_item(feature, item);
            } else {
                ++s.overflow;
            }
        }
    }
    for (const auto& [feature, value] : run.numbers) numbers_[feature].add(value);
}

void Profile::reset() {
    runs_ = 0;
    sets_.clear();
    numbers_.clear();
    live_exec_.reset();
    live_destination_.reset();
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
        numbers[feature] = {{"n", s.n()}, {"max", s.max()}, {"median", s.median()}, {"mad", s.mad()},
                            {"recent", nlohmann::json(std::vector<double>(s.recent().begin(), s.recent().end()))}};
    nlohmann::json j = {{"tool", tool_},     {"learn_runs", learn_runs_}, {"runs", runs_},        {"pinned", pinned_},
                        {"learning", learning()}, {"sets", std::move(sets)}, {"numbers", std::move(numbers)}};
    if (task_id_) j["task_id"] = task_id_;
    return j;
}

Profile Profile::from_json(const nlohmann::json& j) {
    Profile p(j.at("tool").get<std::string>(), j.at("learn_runs").get<uint32_t>(), j.value("task_id", uint64_t(0)));
    p.runs_ = j.at("runs").get<uint64_t>();
    p.pinned_ = j.at("pinned").get<bool>();
    for (const auto& [feature, s] : j.at("sets").items()) {
        auto& out = p.sets_[feature];
        for (const auto& [item, n] : s.at("items").items()) out.runs.emplace(item, n.get<uint64_t>());
        out.overflow = s.at("overflow").get<uint64_t>();
    }
    for (const auto& [feature, s] : j.at("numbers").items())
        p.numbers_[feature] = NumberStats::from(s.at("recent").get<std::deque<double>>(), s.at("max").get<double>(),
                                                s.at("n").get<uint64_t>());
    auto names_of = [&](std::string_view feature) -> std::shared_ptr<const ItemNames> {
        auto it = p.sets_.find(feature);
        if (it == p.sets_.end() || it->second.runs.empty()) return nullptr;
        auto names = std::make_shared<ItemNames>();
        for (const auto& [item, n] : it->second.runs) names->insert(names->end(), item);
        return names;
    };
    p.live_exec_ = names_of(kExec);
    p.live_destination_ = names_of(kDestination);
    return p;
}

}  // namespace bulwark::profiles
