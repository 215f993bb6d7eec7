#pragma once
// The live sandboxed runs of this agentd, keyed by their cgroup v2 leaf:
// what the kernel audit source (kernel_audit.h) needs to tell which run a
// kernel record belongs to. A run is added once its cgroup exists and its
// first process was cloned into it (RunRequest::on_cgroup), and removed
// after its end once the audit backlog up to its exit has been consumed.
//
// Thread-safe. Resolution of a host pid, in order: the cgroup in
// /proc/<pid>/cgroup while the process lives; else the run whose first
// process (the tool, pid 1 of its namespace) has that pid. A Landlock domain,
// once resolved, stays with its run (later denials of short-lived children
// resolve through it even after they are gone).
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "audit/run_context.h"

namespace bulwark {

namespace kaudit {
struct KernelDenial;
}
namespace policy {
struct Bundle;
}


class RunRegistry {
public:
    // cgroup_v2_path: the leaf as a full path (SandboxCgroup::v2_path()).
    void add(const std::string& cgroup_v2_path, pid_t root_pid, RunContext ctx);
    void remove(const std::string& cgroup_v2_path);
    size_t size() const;

    std::optional<RunContext> by_cgroup(const std::string& cgroup_v2_path) const;
    std::optional<RunContext> resolve_pid(pid_t pid) const;
    // Every pid a denial names (the task, its parent, the Landlock domain's
    // creator), then the domain cache.
    std::optional<RunContext> resolve(const kaudit::KernelDenial& d);

private:
    struct Entry {
        pid_t root_pid = 0;
        RunContext ctx;
    };
    std::optional<std::string> key_of_pid_locked(pid_t pid) const;
    mutable std::mutex mu_;
    std::map<std::string, Entry> runs_;                  // by cgroup v2 path
    std::unordered_map<uint64_t, std::string> domains_;  // Landlock domain -> cgroup v2 path
};

// The full cgroup v2 path of a live process (the "0::" line of
// /proc/<pid>/cgroup below the v2 mount); nullopt when it is gone.
std::optional<std::string> cgroup_v2_of_pid(pid_t pid);

}  // namespace bulwark
