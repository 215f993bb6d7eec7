#pragma once
// The BPF layer of every run: programs loaded (or re-adopted from the pin
// root), one policy binding per run cgroup, and the ring buffer's decisions
// turned into audit records.
//
//   start()   takes the pin-root lock (flock on the bpffs directory, shared
//             by `agentd run` and `agentd serve` on one host), loads or
//             re-adopts the programs with their canary truth check, removes
//             bindings of cgroups that no longer exist and the policy slots
//             only they used, then starts the reader thread.
//   attach()  prepares a run: the returned Attachment's hook() is
//             RunRequest::attach_bpf. Under the lock it loads the bundle's
//             tables into a free slot and binds the run's cgroup leaf to it.
//   rebind()  loads another bundle of the same run (a new epoch) and
//             switches the binding in ONE bw_sandboxes write: every operation
//             sees either the old or the new policy, never none.
//   release() delivers the run's remaining events (a synchronous drain of the
//             ring buffer), unbinds the cgroup and frees its slots.
//
// The reader thread hands one audit record per ring-buffer event to the sink
// (decisions of this runtime's runs carry task, run, tool, the epoch's
// policy version and the rule's file:line; events of cgroups bound by
// another process sharing the maps carry the ids of their binding). Losses
// are never silent: kernel reserve failures (bw_stats) and malformed records
// are reported to on_drops as they are found.
//
// Enforcement never depends on this reader: a full ring buffer drops events,
// not decisions.
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "audit/audit_record.h"
#include "bpf/bind_error.h"
#include "bpf/bpf_loader.h"
#include "bulwark/policy/bundle.h"
#include "common/fd.h"
#include "bpf/ringbuf_reader.h"
#include "common/sys_error.h"

namespace bulwark::bpf {

struct RuntimeOptions {
    std::string pin_root = "/sys/fs/bpf/bulwark";
    std::string cgroup_parent;  // empty: <cgroup v2 of this process>/bulwark
    bool lsm = true;
    bool monitor = true;
    bool trace_syscalls = false;  // LoaderOptions::trace_syscalls (the per-run system call counts need it)
    bool truth_check = true;
    bool reuse_proof = false;  // LoaderOptions::reuse_proof
    std::string canary_exec = "/bin/true";  // LoaderOptions::canary_exec
    // Decision records, on the reader thread (or the thread calling
    // release()); calls are serialised. Must not block for long.
    std::function<void(audit::AuditRecord)> sink;
    // Records lost before they became audit records: source and count.
    std::function<void(const std::string& source, uint64_t count)> on_drops;
    int poll_interval_ms = 200;  // allow/observe records wake the reader only in bulk
    // How long a change of the maps (a run's binding, a grant's rebind, a
    // run's release) waits for the pin root's lock while another process
    // holds it; past that the change fails naming the holders (a release is
    // retried by the reader thread). start() waits start_lock_wait.
    std::chrono::milliseconds lock_wait{5000};
    std::chrono::milliseconds start_lock_wait{30000};
};

class BpfRuntime;

// One run's binding. Thread-safe; release() is idempotent and also run by
// the destructor.
class Attachment {
public:
    ~Attachment();
    Attachment(const Attachment&) = delete;
    Attachment& operator=(const Attachment&) = delete;

    // RunRequest::attach_bpf: binds the run's cgroup leaf (which must lie
    // below the runtime's cgroup parent) and says what is in force; the
    // sandbox takes the BindError's message (it does not know bpf/).
    std::function<std::expected<std::string, std::string>(int cgroup_v2_fd, const std::string& cgroup_path)> hook();
    std::expected<void, BindError> rebind(const policy::Bundle& bundle, uint64_t policy_version);
    // The bound cgroup now belongs to another run (a task's warm VM: its
    // VMM serves the task's runs one after another): its events name that
    // run from here on, in the kernel's binding and in this process's; the
    // policy in force is unchanged.
    std::expected<void, BindError> retarget(const RunContext& run);
    void release();
    // Lets go of the binding without undoing it: the cgroup stays bound in
    // the pinned maps after this process (a container outlives agentd; the
    // next agentd adopts it, BpfRuntime::adopt). release() then does nothing.
    void keep_bound();
    // For the run's report: other readers of the ring buffer, and events the
    // kernel could not queue since the run was bound (the ring buffer was
    // full), with why when the reader was held back meanwhile.
    std::vector<std::string> warnings() const;

    uint64_t cgroup_id() const;
    // What the monitor counted of the run (its rules keep a profile), once
    // its processes are gone: read and deleted; nullopt when nothing was
    // counted, or the error.
    std::expected<std::optional<bw_run_usage>, SysError> take_usage();

private:
    friend class BpfRuntime;
    Attachment() = default;
    std::expected<std::string, BindError> bind(const std::string& cgroup_path);

    BpfRuntime* rt_ = nullptr;
    mutable std::mutex mu_;
    RunContext run_;  // which run (its bundle: unused, each epoch names its own)
    std::shared_ptr<const policy::Bundle> bundle_;  // until bound
    uint64_t policy_version_ = 0;
    uint64_t cgid_ = 0;
    uint64_t reserve_failures_at_bind_ = 0;  // the kernel's count (bw_stats) when bound
    uint64_t blocks_at_bind_ = 0;            // the reader's hold-backs when bound
    std::vector<uint32_t> slots_;  // the slot of the epoch in force
    // Slots of earlier epochs, with when they were switched away from: an
    // operation that read the old binding just before a switch still finds
    // its slot intact; they are freed a grace period later (or at release).
    std::vector<std::pair<uint32_t, std::chrono::steady_clock::time_point>> retired_;
    bool released_ = false;
};

class BpfRuntime {
public:
    static std::expected<std::unique_ptr<BpfRuntime>, SysError> start(RuntimeOptions opts);
    ~BpfRuntime();  // stops the reader after a last drain; pinned links keep enforcing

    std::expected<std::shared_ptr<Attachment>, BindError> attach(const policy::Bundle& bundle, RunContext run);
    // A cgroup another process bound and that outlived it (a container bound
    // by an agentd that was killed): when its binding is still in the maps
    // and names this run, the returned Attachment owns it as it is (the
    // enforcement never paused; events name the run again, and release()
    // frees its slot). Otherwise the cgroup is bound afresh, as attach() and
    // its hook would.
    std::expected<std::shared_ptr<Attachment>, BindError> adopt(const std::string& cgroup_path,
                                                                const policy::Bundle& bundle, RunContext run);

    // Absolute path of the cgroup below which run leaves must be created.
    const std::string& cgroup_parent() const { return loader_->parent_cgroup(); }
    // cgroup connect/sendmsg (v4 and v6) proven by the canary: network rules can be enforced.
    bool net_enforcing() const;
    // The BPF layers for per-rule coverage (rule_coverage.h): "sock_addr" and
    // "bpf_lsm" -> "" when every program of the layer enforces, else the
    // first program's state and reason.
    std::map<std::string, std::string> layer_states() const;
    // "" when the monitor programs that count a run's system calls (from its
    // tool's exec on) are proven in force here, else why not (a profile's runs then count only
    // what they send).
    std::string syscall_counting_gap() const;
    // cgroup connect_unix/sendmsg_unix (Linux 6.7+) proven by the canary: a
    // sandboxed tool's connect or addressed send to a named unix socket is
    // refused unless a unix rule allows it. Otherwise nothing but Landlock's
    // abstract scope and the mount namespace stands in the way.
    bool unix_enforcing() const;
    // "enforcing", or "unavailable: <each program's line>".
    std::string unix_state() const;
    // {"state": "enforcing"|"partial"|"unavailable", "programs": {section: "enforcing" |
    //  "unavailable: <reason>" ...}, counters}
    nlohmann::json status() const;
    // Consumes every event waiting in the ring buffer now (delivered to the
    // sink). False when it stood back because another process holds the pin
    // root's exclusive lock (its canary reads its own events meanwhile).
    bool drain();

    // Other processes holding the ring buffer open (pid and command name):
    // each consumes events of the runs bound by the others and records them
    // as foreign (detail.bound_by), so a run's own report may lack them.
    struct Reader {
        pid_t pid = 0;
        std::string comm;
    };
    std::vector<Reader> other_readers() const;
    // A run report's warning for each of them. The /proc scan behind it runs
    // at most once a second; later calls within it reuse its result.
    std::vector<std::string> reader_warnings() const;
    // Starts that scan now, in the background (a one-shot command, before its
    // run): a report within the second takes its result instead of waiting
    // for a scan of its own.
    void scan_readers_ahead();

    struct Counters {
        uint64_t events = 0, decisions = 0, foreign = 0, malformed = 0, reserve_failures = 0, reaped_bindings = 0,
                 reaped_slots = 0, reader_blocks = 0, deferred_releases = 0;
    };
    Counters counters() const;
    // The reader: "reading", or "blocked" while another process holds the pin
    // root's exclusive lock (it stands back so that process's canary gets its
    // events), with since when and by whom; the last hold-back that ended.
    nlohmann::json reader_status() const;

private:
    friend class Attachment;
    BpfRuntime() = default;
    mutable std::mutex readers_mu_;
    mutable std::chrono::steady_clock::time_point readers_at_{};
    mutable std::vector<std::string> readers_warnings_;
    using ReadersSeen = std::pair<std::chrono::steady_clock::time_point, std::vector<Reader>>;
    mutable std::future<ReadersSeen> readers_ahead_;
    struct Epoch {
        uint64_t kernel_version = 0;
        uint64_t policy_version = 0;
        uint32_t slot = 0;
        std::shared_ptr<const policy::Bundle> bundle;
        std::vector<std::string> absent_denies;  // LoadReport::absent_denies
    };
    // A run bound by this process: which run, and each epoch's policy (an
    // event names the epoch's kernel version; its rule is named from that
    // epoch's bundle).
    struct BoundRun {
        RunContext run;
        std::vector<Epoch> epochs;
    };

    // Pin-root lock (flock) plus this process's mutex: PolicyMaps is not thread-safe.
    // Waits at most `wait` (opts_.lock_wait by default) for both; false when
    // not taken, refused() then says who holds the pin root's lock.
    class MapsLock {
    public:
        explicit MapsLock(BpfRuntime& rt) : MapsLock(rt, rt.opts_.lock_wait) {}
        MapsLock(BpfRuntime& rt, std::chrono::milliseconds wait);
        ~MapsLock();
        MapsLock(const MapsLock&) = delete;
        MapsLock& operator=(const MapsLock&) = delete;
        explicit operator bool() const { return held_; }
        std::string refused() const;
    private:
        BpfRuntime& rt_;
        std::unique_lock<std::timed_mutex> lk_;
        bool held_ = false;
        std::chrono::milliseconds wait_;
    };
    // A run's unbinding and slots, when release() could not take the lock:
    // retried by the reader thread until it can.
    struct Deferred {
        uint64_t cgid = 0;
        std::vector<uint32_t> slots;
        bool unbound = false;  // the cgroup's binding is already gone; only the slots are left
    };
    void retry_deferred();

    std::expected<Epoch, BindError> load_epoch(const policy::Bundle& bundle, uint64_t policy_version);
    void reap_dead_bindings();
    void on_event(const bw_event& ev);
    void check_drops();
    void note_held_back();
    void note_reading();
    void reader_loop();
    std::string in_force() const;

    RuntimeOptions opts_;
    std::unique_ptr<BpfLoader> loader_;
    Fd lock_fd_;
    // A second open file description of the pin root: readers hold a shared
    // flock on it while they consume, so that while any process holds the
    // exclusive lock (a truth check runs its canary, maps change) no other
    // process's reader takes the events it is waiting for.
    Fd consume_lock_fd_;
    std::atomic<bool> ex_held_{false};  // this process holds the exclusive lock
    std::timed_mutex maps_mu_;
    bool lsm_files_ = false;  // a BPF LSM file program enforces: file tables are written

    mutable std::mutex ctx_mu_;
    std::map<uint64_t, BoundRun> runs_;  // by cgroup id

    std::mutex reader_mu_;  // serialises consume() and the sink
    std::unique_ptr<RingbufReader> reader_;
    Fd stop_fd_;
    std::thread thread_;
    int64_t boot_offset_ns_ = 0;
    uint64_t last_reserve_failures_ = 0;
    uint64_t reported_malformed_ = 0;
    // The reader held back by another process's exclusive lock: since when
    // (steady ns, 0: reading), how often, and the last hold-back that ended.
    std::atomic<int64_t> blocked_since_ns_{0};
    std::atomic<uint64_t> reader_blocks_{0};
    mutable std::mutex block_mu_;
    std::string blocked_by_;       // holders seen when the current hold-back began
    std::string last_block_;       // "held back by ... for N ms", the last one that ended
    std::mutex deferred_mu_;
    std::vector<Deferred> deferred_;
    std::atomic<uint64_t> deferred_total_{0};
    std::atomic<uint64_t> events_{0}, decisions_{0}, foreign_{0}, reserve_failures_{0}, reaped_bindings_{0},
        reaped_slots_{0};
};

}  // namespace bulwark::bpf
