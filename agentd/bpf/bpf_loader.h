#pragma once
// Loads, attaches and pins Bulwark's BPF programs, and proves what enforces.
//
// start():
//   1. bpffs at /sys/fs/bpf (mounted if absent); maps pinned by name under
//      pin_root, links under pin_root/links, so enforcement survives this
//      process; links already pinned there are re-adopted, not reloaded;
//   2. per object (sock_addr, monitor, lsm): load everything at once; if the
//      kernel refuses, load each program alone to find which and why
//      ("lsm/file_open: kernel refused load: EPERM", verifier log kept), then
//      load the rest with the refused ones switched off (autoload false);
//   3. cgroup programs attach to the sandbox PARENT cgroup (cgroup v2, a
//      child of the cgroup this process runs in), as multi-attach links, so
//      every sandbox leaf below it inherits them;
//   4. truth check: a canary child in a canary cgroup bound to a deny-all
//      policy performs one operation per program; a program counts as
//      enforcing only if its operation failed with EPERM and its own deny
//      event arrived. Its verdicts are recorded in <pin_root>/bw_proof with
//      the identity of every link they were made on (bpf_proof.cpp);
//   5. with reuse_proof, a start that finds that record true (same build,
//      options and sandbox parent; every link it proved still pinned, the
//      same link of the same program, a cgroup link still attached to the
//      parent; nothing pinned where it found nothing) takes its verdicts and
//      the links as they are: no object is opened or loaded and no canary
//      runs. Anything else is a full start, which records anew.
#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <bulwark_abi.h>

#include "bpf/bpf_maps.h"
#include "common/fd.h"
#include "bpf/feature_probe.h"
#include "common/procfs.h"
#include "common/sys_error.h"

namespace bulwark::bpf {

struct LoaderOptions {
    std::string pin_root = "/sys/fs/bpf/bulwark";
    // Absolute path of the sandbox parent in the cgroup v2 hierarchy; empty:
    // <v2 mount><cgroup of this process>/bulwark.
    std::string cgroup_parent;
    bool lsm = true;
    bool sock = true;
    bool monitor = true;
    // raw_tp/sys_enter puts every task on the machine on the syscall tracepoint
    // path while attached; load it only when policies use BW_POL_TRACE_SYSCALLS
    // or BW_POL_COUNT_USAGE (agentd serve: when a tool keeps a profile).
    bool trace_syscalls = false;
    bool truth_check = true;
    // The program the canary executes (judged by the exec hooks, then run to
    // its end with no arguments but argv[0] "true"): a file every host has.
    std::string canary_exec = "/bin/true";
    // Probe every program the kernel refuses by loading it, even where a
    // minimal program of its hook was already refused with EPERM (the
    // shortcut's check: both must give the same verdicts).
    bool full_probe = false;
    // Take the verdicts of an earlier truth check on these same links when
    // its record still holds (step 5 above): what one-shot commands do.
    bool reuse_proof = false;
    // Events read from the ring buffer during the truth check that are not the
    // canary's (e.g. from sandboxes that kept running across a restart).
    std::function<void(const bw_event&)> foreign_event_sink;
};

class BpfLoader {
public:
    static std::expected<std::unique_ptr<BpfLoader>, SysError> start(LoaderOptions opts);
    ~BpfLoader();  // closes handles only: pinned links keep enforcing

    const std::vector<ProgramStatus>& programs() const { return programs_; }
    const ProgramStatus* program(const std::string& section) const;
    // Every program of the object proven (enforcing/observing).
    bool object_proven(const std::string& object) const;
    std::string report() const;  // one line per program
    // Where the verdicts come from: "truth check by this process" or
    // "truth check by pid 812 at 2026-12-07T06:01:02Z, reused: ...".
    const std::string& proof() const { return proof_; }
    bool proof_reused() const { return proof_reused_; }

    PolicyMaps& maps() { return maps_; }
    const std::string& parent_cgroup() const { return parent_path_; }
    uint64_t parent_cgroup_id() const { return parent_id_; }
    const std::string& pin_root() const { return opts_.pin_root; }

    // Detaches everything pinned under pin_root (links) and removes the pinned maps.
    static std::expected<void, SysError> unpin_all(const std::string& pin_root);

    struct Object;  // one loaded skeleton and its links (bpf_loader.cpp)

private:
    BpfLoader() = default;
    std::expected<void, SysError> truth_check();
    // bpf_proof.cpp: the record of the verdicts and the links they hold for.
    bool adopt_recorded_proof();  // false (and nothing changed) unless the record holds
    void record_proof();
    std::string proof_options() const;

    LoaderOptions opts_;
    std::string parent_path_;
    Fd parent_fd_;
    uint64_t parent_id_ = 0;
    uint32_t parent_level_ = 0;
    std::vector<std::unique_ptr<Object>> objects_;
    std::vector<ProgramStatus> programs_;
    std::vector<Fd> proven_links_;  // links a reused proof holds for, kept open while the loader lives
    std::string proof_;
    bool proof_reused_ = false;
    PolicyMaps maps_;
};

// Processes other than this one holding a descriptor of the BPF map with
// this id (found through /proc/<pid>/fdinfo); without `children`, not this
// process's children either (a canary, a sandbox before it closes what it
// inherited: copies of this process's descriptors, not readers of their own).
struct MapHolder {
    pid_t pid = 0;
    std::string comm;
};
std::vector<MapHolder> other_map_holders(uint32_t map_id, bool children = true);
// Processes holding an flock() on this file or directory (from /proc/locks;
// a holder in another pid namespace shows with the pid it has there).
std::vector<MapHolder> flock_holders(const std::string& path);
// "pid 12 (agentd), pid 40 (python3)", or what to say when none is visible.
std::string describe_holders(const std::vector<MapHolder>& holders);

// The truth check's scratch directory, <prefix><pid>-XXXXXX, and its canary
// cgroup, <sandbox parent>/<prefix><pid>.
inline constexpr const char* kCanaryScratchPrefix = "/tmp/bulwark-canary-";
inline constexpr const char* kCanaryCgroupPrefix = "canary-";
// Removes what truth checks of processes that are gone (killed during their
// check) left: scratch directories and, below `parent`, canary cgroups
// (empty: their processes died with the check). Returns how many.
size_t remove_stale_canary_leftovers(const std::string& parent);

// The identity of this build's BPF objects (ABI version, size and digest of
// their ELF images) as pinned in <pin_root>/bw_build.
std::string bpf_build_id();

// cgroup v2 helpers used by the loader and its tests.
// The sandbox parent a loader with LoaderOptions::cgroup_parent = configured
// uses: configured, or "bulwark" below this process's cgroup ("" configured).
std::expected<std::string, SysError> resolve_cgroup_parent(const std::string& configured);
// A cgroup v2 directory's file handle: its kernfs id (what
// bpf_get_current_cgroup_id returns) and the handle type open_by_handle_at
// takes for ids of that mount.
struct CgroupHandle {
    uint64_t id = 0;
    int type = 0;
};
std::expected<CgroupHandle, SysError> cgroup_handle(const std::string& dir);
std::expected<uint64_t, SysError> cgroup_id(const std::string& dir);  // cgroup_handle(dir)->id
std::expected<void, SysError> ensure_bpffs();

}  // namespace bulwark::bpf
