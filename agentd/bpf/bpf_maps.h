#pragma once
// Map writer for the pinned Bulwark maps (bpf/include/maps.bpf.h).
//
// Policy is data: loading a policy fills a free slot of bw_policies and its
// file/net entries; binding a sandbox cgroup to (slot, version) is ONE update
// of bw_sandboxes, so a subtask's policy switch is gapless. A binding is
// honoured only while the slot's version equals the binding's, so a freed or
// reused slot denies everything for stale bindings.
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <vector>

#include <bulwark_abi.h>

#include "bulwark/policy/bundle.h"
#include "common/fd.h"
#include "common/sys_error.h"

namespace bulwark::bpf {

struct PolicyHandle {
    uint32_t slot = 0;
    uint64_t version = 0;
};

struct LoadReport {
    PolicyHandle handle;
    size_t file_entries = 0;  // distinct (dev, ino) keys written
    size_t net_entries = 0;
    size_t unix_entries = 0;
    std::vector<std::string> skipped_paths;  // allow-only rules on paths that do not exist
    // Deny rules on missing paths that cannot appear while the policy is in
    // force (nothing to hold), each with why: "path (reason)".
    std::vector<std::string> absent_denies;
    uint64_t resolve_ns = 0;  // stat() of every file path
    uint64_t write_ns = 0;    // map updates
    bool files_batched = false, net_batched = false;  // one BPF_MAP_UPDATE_BATCH each
};

// Names of the shared maps, as pinned under the pin root.
inline constexpr const char* kMapNames[] = {"bw_sandboxes", "bw_policies", "bw_file_rules", "bw_file_bloom",
                                            "bw_net_rules", "bw_unix_rules", "bw_rule_hits", "bw_stats",
                                            "bw_events",    "bw_run_usage"};

// Not thread-safe: one owner (agentd's policy manager) serialises calls. The
// kernel side needs no coordination: every switch is a single map update.
class PolicyMaps {
public:
    // Opens the maps pinned under pin_root (e.g. /sys/fs/bpf/bulwark).
    static std::expected<PolicyMaps, SysError> open_pinned(const std::string& pin_root);

    // Stats each file path (kernel dev encoding major<<20|minor), fills a free
    // slot (batched where the kernel allows), publishes the header last.
    std::expected<LoadReport, SysError> load(const policy::BpfTables& tables);
    // flags: BW_BIND_* (BW_BIND_SETUP: a run's first binding, before its
    // tool's exec; the LSM hooks let its setup through until that exec).
    std::expected<void, SysError> bind(uint64_t cgroup_id, PolicyHandle h, uint64_t task_id = 0,
                                       uint64_t run_id = 0, uint32_t flags = 0);
    std::expected<void, SysError> unbind(uint64_t cgroup_id);
    // Marks the slot unused first (stale bindings deny), then deletes its entries.
    std::expected<void, SysError> free(uint32_t slot);

    std::expected<bw_counters, SysError> stats() const;  // summed over CPUs
    std::expected<uint64_t, SysError> rule_hits(uint32_t slot, uint32_t rule_id) const;
    std::expected<bw_binding, SysError> binding(uint64_t cgroup_id) const;
    size_t free_slots() const;
    bool slot_used(uint32_t slot) const { return slot < used_.size() && used_[slot]; }
    // Re-reads which slots are in use from the kernel (version != 0). Several
    // processes share the pinned maps (agentd run, agentd serve): call it
    // under the pin-root lock before load(), so no two pick one slot.
    std::expected<void, SysError> sync_slots();
    // A zeroed usage entry for the run in cgroup_id: the monitor counts its
    // system calls and sent bytes from now on (its policy has
    // BW_POL_COUNT_USAGE).
    std::expected<void, SysError> start_usage(uint64_t cgroup_id);
    // What the monitor counted of the run in cgroup_id (read and deleted);
    // nullopt when nothing was (no entry).
    std::expected<std::optional<bw_run_usage>, SysError> take_usage(uint64_t cgroup_id);
    // Deletes the usage entries of cgroups no longer bound (a run whose
    // process ended before it took its entry); returns how many.
    std::expected<size_t, SysError> drop_unbound_usage();
    // Every (cgroup id, binding) in bw_sandboxes.
    std::expected<std::vector<std::pair<uint64_t, bw_binding>>, SysError> bindings() const;

    int events_fd() const { return events_.get(); }
    int sandboxes_fd() const { return sandboxes_.get(); }

private:
    Fd sandboxes_, policies_, file_rules_, file_bloom_, net_rules_, unix_rules_, rule_hits_, stats_, events_,
        run_usage_;
    std::vector<bool> used_;
    // Keys this process wrote per slot (deleted in one batch on free); slots
    // adopted from an earlier process are found by iterating the maps instead.
    struct SlotKeys {
        bool known = false;
        std::vector<bw_inode_key> files;
        std::vector<bw_net_key> net;
        std::vector<bw_unix_key> unix_keys;
    };
    std::vector<SlotKeys> keys_;
    uint64_t last_version_ = 0;

    uint64_t next_version();
    std::expected<void, SysError> purge_slot(uint32_t slot);
};

// st_dev as stat() reports it -> the kernel's sb->s_dev encoding.
uint64_t kernel_dev_of(uint64_t st_dev);

}  // namespace bulwark::bpf
