#pragma once
// Per-run cgroups on the hybrid layout: a cgroup v2 leaf (the tool is cloned
// straight into it with CLONE_INTO_CGROUP; cgroup.kill ends everything in it)
// and v1 memory/pids/cpu leaves that carry the limits (CPU time is read from
// the v2 leaf's cpu.stat). Every leaf is
// created below the cgroup agentd itself runs in (/proc/self/cgroup), never
// at a hierarchy's root, and removed by remove() / the destructor.
#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <expected>
#include <mutex>
#include <thread>
#include <optional>
#include <string>
#include <vector>

#include "common/fd.h"
#include "common/procfs.h"
#include "common/sys_error.h"

namespace bulwark {

// A leaf remove() could not remove, and why (e.g. another process made a
// child cgroup in it, or something in it does not die).
struct CgroupLeft {
    std::string path;
    std::string error;
};

struct CgroupLimits {
    std::optional<uint64_t> memory_bytes;
    std::optional<uint64_t> pids;
    std::optional<uint32_t> cpu_percent;  // of one CPU
};

class SandboxCgroup {
public:
    // Creates the leaves named `name` and applies the limits. Fails (typed) if
    // a requested limit has no controller to carry it: never runs unlimited.
    // v2_parent: absolute cgroup v2 directory for the v2 leaf (it must lie
    // below the cgroup this process runs in); empty: that cgroup itself.
    static std::expected<SandboxCgroup, SysError> create(const std::string& name,
                                                         const CgroupLimits& limits,
                                                         const std::string& v2_parent = {});
    SandboxCgroup(SandboxCgroup&&) noexcept = default;
    SandboxCgroup& operator=(SandboxCgroup&&) noexcept;
    ~SandboxCgroup();

    int v2_fd() const { return v2_fd_.get(); }          // for CLONE_INTO_CGROUP
    const std::string& v2_path() const { return v2_path_; }
    std::vector<std::string> v1_paths() const;

    // Moves pid into every v1 leaf (parent side, before the child proceeds).
    std::expected<void, SysError> add_v1(pid_t pid) const;
    // cgroup.kill: SIGKILL to every process of the v2 leaf, also those that
    // double-forked, setsid()'d and ignore SIGTERM.
    bool kill_all() const;
    // Waits until no process is left in the leaf (cgroup.events populated 0).
    bool wait_empty(int timeout_ms) const;
    // Number of processes still in the v2 leaf.
    size_t population() const;

    uint64_t oom_kills() const;          // memory.oom_control oom_kill
    uint64_t peak_memory() const;        // memory.max_usage_in_bytes
    uint64_t pids_max_hits() const;      // pids.events max
    bool cpu_usage(uint64_t& user_us, uint64_t& system_us) const;  // v2 cpu.stat
    bool has_memory() const { return !mem_.empty() || v2_controllers_; }

    // Kills what is left, waits, removes every leaf. Idempotent. Returns the
    // leaves that could not be removed (a bounded retry each); never a
    // cgroup made by someone else below a leaf: that one holds its leaf.
    std::vector<CgroupLeft> remove();

private:
    SandboxCgroup() = default;
    std::string v2_path_;
    Fd v2_fd_;
    std::string mem_, pids_, cpu_, cpuacct_;
    // Pure cgroup v2 (no v1 memory hierarchy): memory, pids and cpu limits
    // live in the v2 leaf itself (memory.max, pids.max, cpu.max).
    bool v2_controllers_ = false;
};

// Every per-run leaf is named <prefix><agentd pid>-<run number>, followed by
// "-<label>" when the launcher gave one (agentd serve: "r<run id>").
inline constexpr const char* kRunCgroupPrefix = "bulwark-run-";

// A leaf an agentd that died left behind, and what became of it.
struct StaleLeaf {
    std::string path;
    long daemon_pid = 0;
    std::string label;      // "" when the leaf has none
    size_t processes = 0;   // alive in it when found (then killed); v2 leaves
    bool removed = false;
    std::string error;      // why it is still there
};

// Finds the leaves of agentd processes that are gone (bulwark-run-<pid>-...
// whose pid is not alive), kills what is still inside (cgroup.kill), waits
// for them to empty and removes them. v2_extra: another cgroup v2 directory
// holding run leaves (the BPF cgroup parent).
std::vector<StaleLeaf> reap_stale_leaves(const std::string& v2_extra = {});
// The same, counting the leaves removed. run_tool calls it once per process.
size_t reap_stale_cgroups(const std::string& v2_extra = {});

// Tries rmdir once: "" once the directory is gone, else why it stays
// ("rmdir: EBUSY (child cgroups: x, y)", "rmdir: EBUSY (3 process(es) in it)").
std::string try_remove_cgroup(const std::string& dir);

// Leaves left behind by runs of this process, retried once a second until
// they go (the fault gone: the child cgroup removed, the stuck process
// dead). Thread-safe.
class LeftCgroups {
public:
    struct Entry {
        std::string path;
        std::string error;     // the last attempt's
        uint64_t run_id = 0;
        int64_t since_ns = 0;  // realtime, when the run left it
        uint64_t attempts = 0;
    };
    LeftCgroups();
    ~LeftCgroups();
    LeftCgroups(const LeftCgroups&) = delete;
    LeftCgroups& operator=(const LeftCgroups&) = delete;
    void add(const std::vector<CgroupLeft>& left, uint64_t run_id);
    std::vector<Entry> list() const;
    uint64_t removed_later() const;  // entries removed by a retry

private:
    void loop();
    mutable std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    std::vector<Entry> entries_;
    uint64_t removed_ = 0;
    std::thread thread_;
};


}  // namespace bulwark
