#include "kaudit/run_registry.h"

#include <fstream>
#include <string_view>

#include "common/procfs.h"
#include "kaudit/kernel_audit_parse.h"

namespace bulwark {

std::optional<std::string> cgroup_v2_of_pid(pid_t pid) {
    if (pid <= 0) return std::nullopt;
    std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
    if (!in) return std::nullopt;
    static const std::string mount = cgroup_mount("");
    std::string line;
    while (std::getline(in, line))
        if (line.starts_with("0::")) {
            std::string rel = line.substr(3);
            return rel == "/" ? mount : mount + rel;
        }
    return std::nullopt;
}

void RunRegistry::add(const std::string& cgroup_v2_path, pid_t root_pid, RunContext ctx) {
    std::lock_guard lk(mu_);
    runs_[cgroup_v2_path] = Entry{root_pid, std::move(ctx)};
}

void RunRegistry::remove(const std::string& cgroup_v2_path) {
    std::lock_guard lk(mu_);
    runs_.erase(cgroup_v2_path);
    std::erase_if(domains_, [&](const auto& kv) { return kv.second == cgroup_v2_path; });
}

size_t RunRegistry::size() const {
    std::lock_guard lk(mu_);
    return runs_.size();
}

std::optional<RunContext> RunRegistry::by_cgroup(const std::string& cgroup_v2_path) const {
    std::lock_guard lk(mu_);
    auto it = runs_.find(cgroup_v2_path);
    if (it == runs_.end()) return std::nullopt;
    return it->second.ctx;
}

std::optional<std::string> RunRegistry::key_of_pid_locked(pid_t pid) const {
    if (pid <= 0) return std::nullopt;
    if (auto cg = cgroup_v2_of_pid(pid)) {
        // A live process is judged by its cgroup alone: one that is not a
        // run's is not ours, whatever its pid.
        if (runs_.contains(*cg)) return *cg;
        return std::nullopt;
    }
    for (const auto& [key, e] : runs_)
        if (e.root_pid == pid) return key;
    return std::nullopt;
}

std::optional<RunContext> RunRegistry::resolve_pid(pid_t pid) const {
    std::lock_guard lk(mu_);
    auto key = key_of_pid_locked(pid);
    if (!key) return std::nullopt;
    return runs_.at(*key).ctx;
}

std::optional<RunContext> RunRegistry::resolve(const kaudit::KernelDenial& d) {
    std::lock_guard lk(mu_);
    if (runs_.empty()) return std::nullopt;
    std::optional<std::string> key;
    bool landlock = d.layer == kaudit::KernelDenial::Layer::Landlock && d.domain != 0;
    if (landlock) {
        // The domain's creator restricted itself in the launcher, before the
        // tool's exec: it is the run's first process, so this is the surest.
        if (auto it = domains_.find(d.domain); it != domains_.end() && runs_.contains(it->second)) key = it->second;
        if (!key && d.domain_creator_pid) key = key_of_pid_locked(static_cast<pid_t>(d.domain_creator_pid));
    }
    if (!key) key = key_of_pid_locked(static_cast<pid_t>(d.pid));
    if (!key && d.ppid) key = key_of_pid_locked(static_cast<pid_t>(d.ppid));
    if (!key) return std::nullopt;
    if (landlock) domains_[d.domain] = *key;
    return runs_.at(*key).ctx;
}

}  // namespace bulwark
