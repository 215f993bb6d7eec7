#pragma once
// One run bound to the decision sources, the same for `agentd serve`
// (TaskManager::exec) and `agentd run`:
//
//   RunBinding(...)  attaches the run to the BPF runtime (its policy is bound
//                    to the run's cgroup when run_tool makes it).
//   prepare(req)     fills the RunRequest: the BPF hook, the BPF layers in
//                    force and the cgroup parent (or why the BPF layer is
//                    absent), and registers the run's cgroup with the kernel
//                    audit source once it exists.
//   rebind()         a new policy epoch for the running tool (its BPF
//                    binding; seccomp and Landlock are fixed at launch).
//   finish(rep)      after run_tool: waits (bounded) until the kernel audit
//                    reader has consumed the audit queue up to the run's end,
//                    says in the report what either source lost meanwhile and
//                    who else reads the ring buffer, unregisters the cgroup
//                    and releases the BPF binding (its last events
//                    delivered) and, for a bundle that keeps a profile,
//                    puts what the monitor counted of the run in the
//                    report (RunReport::counted). Idempotent; the
//                    destructor releases.
#include <chrono>
#include <cstdint>
#include <expected>
#include <memory>
#include <mutex>
#include <string>

#include "bpf/bind_error.h"
#include "bulwark/policy/bundle.h"
#include "kaudit/run_registry.h"
#include "sandbox/run_report.h"
#include "sandbox/spawner.h"

namespace bulwark {
class KernelAuditReader;
namespace bpf {
class Attachment;
class BpfRuntime;
}  // namespace bpf

// The host's decision sources a run is bound to; any may be absent.
struct DecisionSources {
    bpf::BpfRuntime* bpf = nullptr;
    std::string bpf_unavailable;        // why there is no BPF runtime (the bpf layer's detail)
    KernelAuditReader* kaudit = nullptr;
    RunRegistry* registry = nullptr;    // where the kernel audit reader finds runs (with kaudit)
    std::chrono::milliseconds kaudit_wait{2000};
};

// What finish() found, beyond the report's warnings.
struct RunSourcesEnd {
    bool kaudit_read = false;     // the reader consumed the queue up to the run's end
    uint64_t kaudit_lost = 0;     // kernel audit records lost on the host during the run
};

class RunBinding {
public:
    RunBinding(const DecisionSources& sources, const policy::Bundle& bundle, RunContext ctx);
    ~RunBinding();
    RunBinding(const RunBinding&) = delete;
    RunBinding& operator=(const RunBinding&) = delete;

    void prepare(RunRequest& req);
    std::expected<void, bpf::BindError> rebind(const policy::Bundle& bundle, uint64_t policy_version);
    // A run of a task's warm VM: the cgroup bound (the VMM's) now serves
    // `ctx`'s run; its kernel audit records and BPF events name it.
    std::expected<void, bpf::BindError> retarget(RunContext ctx);
    // finish() for a run whose cgroup lives on (the warm VM's VMM): the
    // kernel audit backlog up to now consumed and the losses said in the
    // report; nothing released.
    RunSourcesEnd settle(RunReport& rep);
    RunSourcesEnd finish(RunReport& rep);

private:
    void take_counts(RunReport& rep);
    DecisionSources src_;
    RunContext ctx_;
    std::string unavailable_;                // why this run has no BPF binding
    std::shared_ptr<bpf::Attachment> att_;
    uint64_t kaudit_lost_at_start_ = 0;
    std::mutex mu_;
    std::string cgroup_;                     // registered with the registry
    pid_t cgroup_pid_ = 0;                   // its first process
    bool finished_ = false;
    bool count_usage_ = false;               // the bundle keeps a profile: the monitor counts the run
};

}  // namespace bulwark
