#pragma once
// One row of the audit store, the way every producer hands it over and every
// reader gets it back. Decision rows are built from a kernel bw_event
// (bulwark_abi.h) plus what only userspace knows (task, tool, run, the rule's
// file:line and text from the policy bundle).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include <bulwark_abi.h>

#include "audit/run_context.h"
#include "bulwark/policy/instantiate.h"

namespace bulwark::policy {
struct Bundle;
}

namespace bulwark::audit {

enum class RecordKind : uint8_t {
    Decision = 1,    // an enforcement or monitor decision (bw_event)
    RunStart = 2,    // a tool run began
    RunExit = 3,     // ... ended: exit, signal, oom, timeout (detail.reason)
    PolicyEpoch = 4, // a policy version was loaded / bound / retired
    Gap = 5,         // records were lost: detail {source, count, after_seq}; the loss
                     // happened between seq-1 and seq+1 (dropped records get no seq)
    HostStatus = 6,  // snapshot of which layers are enforced on this host
    Finding = 7,     // a run departed from its tool's profile: detail {findings, response, baseline}
    Profile = 8,     // a tool's profile: a snapshot of what it learned, or a change (reset, pin, accept)
};

struct AuditRecord {
    RecordKind kind = RecordKind::Decision;
    uint64_t seq = 0;        // assigned by AuditStore::enqueue
    int64_t ts_ns = 0;       // wall clock (CLOCK_REALTIME), ns since the epoch
    uint64_t task_id = 0;
    uint64_t run_id = 0;
    std::string tool;
    uint64_t policy_version = 0;
    uint32_t rule_id = BW_NO_RULE;
    std::string rule_file;   // where the deciding rule is written
    uint32_t rule_line = 0;
    std::string rule_text;
    uint16_t layer = BW_LAYER_NONE;
    uint16_t op = BW_OP_NONE;
    std::string object;      // "/etc/shadow", "tcp 10.0.0.1:443", "pid 42 sig 9"
    uint8_t decision = BW_DECISION_OBSERVE;
    int32_t err = 0;         // errno returned to the tool (positive), 0 if allowed
    uint32_t pid = 0;
    std::string comm;
    std::string detail;      // JSON object text, kind-specific; "" = none
    int64_t enqueued_mono_ns = 0;  // not stored: steady clock at enqueue (latency metrics)
};

// CLOCK_REALTIME - CLOCK_BOOTTIME now: add to bpf_ktime_get_boot_ns() values.
int64_t boot_to_realtime_offset_ns();
int64_t realtime_now_ns();

// A kernel event as a decision record of `run` (its bundle names the rule).
AuditRecord decision_from_event(const bw_event& ev, const RunContext& run, int64_t boot_to_realtime_ns);
std::string render_object(const bw_event& ev);
// A unix socket address as records show it: the path, or "@" and the abstract
// name; bytes outside printable ASCII (and the backslash) as \xNN.
std::string unix_address_text(std::string_view name, bool abstract);

// Records built by the supervisor and the loader.
// A task's variables: its work directory, and its id as `task-N`.
policy::TaskVars task_vars_of(uint64_t task_id, const std::string& workdir);
// The variables of the task a run start record belongs to, from the work
// directory it recorded; nullopt when it names none.
std::optional<policy::TaskVars> run_start_vars(const AuditRecord& start);

AuditRecord run_start_record(uint64_t task_id, uint64_t run_id, std::string tool,
                             uint64_t policy_version, const nlohmann::json& detail);
// reason: "exit", "signal", "oom", "timeout"
AuditRecord run_exit_record(uint64_t task_id, uint64_t run_id, std::string tool,
                            std::string_view reason, int code, const nlohmann::json& extra = {});
AuditRecord policy_epoch_record(std::string tool, uint64_t policy_version,
                                std::string_view change, const nlohmann::json& detail);
AuditRecord host_status_record(const nlohmann::json& status);
// seq: the gap record's own seq (its place in the order of records)
AuditRecord gap_record(std::string_view source, uint64_t count, uint64_t seq);

// Names used in JSON, query strings and metrics labels.
std::string_view kind_name(RecordKind k);
std::string_view layer_name(unsigned layer);
std::string_view op_name(unsigned op);
std::string_view decision_name(unsigned decision);
std::optional<RecordKind> parse_kind(std::string_view s);
std::optional<uint16_t> parse_layer(std::string_view s);
std::optional<uint8_t> parse_decision(std::string_view s);

nlohmann::json to_json(const AuditRecord& r);

}  // namespace bulwark::audit

#include <span>

namespace bulwark::audit {
// Told about every batch right after it is committed (on the writer thread):
// must not block. The event bus is one.
class CommitListener {
public:
    virtual ~CommitListener() = default;
    virtual void on_committed(std::span<const AuditRecord> batch) = 0;
    // The store's own call: it discards the batch afterwards, so a listener
    // may move records out of it instead of copying them.
    virtual void on_committed_owned(std::span<AuditRecord> batch) { on_committed(batch); }
};
}  // namespace bulwark::audit
