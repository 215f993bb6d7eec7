#pragma once
// One tool run in a VM of its own (docs/microvm.md):
//
//   probe_microvm_host  what this host offers: a VMM (vmm.h), a guest image
//                       (guest_image.h), the VMM's rule file; or why not.
//   route               where a run goes: the VM when the tool's microvm.mode
//                       asks and the host can; else the host sandbox, with
//                       the request's "microvm" layer saying why (a
//                       `required` tool is then refused by per-rule coverage,
//                       naming its rule; `preferred` runs and says so).
//   plan_microvm        the VMM's policy (vmm_bundle.h) for this tool.
//   run_in_microvm      the VMM launched by run_tool under that policy (the
//                       caller binds its BPF policy like any run's), the
//                       channel: Hello -> Start, stdin, StdinEof -> output,
//                       records -> Exit -> Ack; cancel and timeout tear the
//                       VM down. The report is the guest's (its layers and
//                       coverage), with the VM's facts and the VMM's own
//                       layers on the host in RunReport::microvm.
#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bulwark/policy/bundle.h"
#include "bulwark/policy/instantiate.h"
#include "sandbox/run_report.h"
#include "sandbox/spawner.h"
#include "vm/guest_image.h"
#include "vm/vmm.h"

namespace bulwark::vm {

struct MicroVmHost {
    std::optional<Vmm> vmm;
    std::optional<GuestImage> image;
    std::optional<policy::Bundle> vmm_rules;  // rules/vmm/qemu.yaml, compiled
    std::string unavailable;                  // "" when the tier can run here
};

// rules_dirs: where vmm/qemu.yaml and its bases are found; image_dirs: where
// the guest image is looked for (guest_image_dirs()).
MicroVmHost probe_microvm_host(const std::vector<std::string>& rules_dirs, const std::vector<std::string>& image_dirs);

// true: run in a VM. false: the host sandbox; req.vm_layers and `warnings`
// say why (nothing when the tool does not ask for a VM).
bool route(const policy::Bundle& tool, const MicroVmHost& host, RunRequest& req, std::vector<std::string>& warnings);

struct MicroVmLaunch {
    policy::Bundle vmm_bundle;  // instantiated: what the caller binds for the VMM's run
    policy::Bundle vmm_rules;   // the VMM's own rules, instantiated: vmm_bundle before the tool's part
    Vmm vmm;
    GuestImage image;
    // Where snapshots of the parked guest agent are kept (one per image,
    // memory, vCPUs and acceleration; root only), "" for cold boots only:
    // $BULWARK_MICROVM_SNAPSHOTS ("off": none), else /var/cache/bulwark/microvm.
    std::string snapshot_dir;
};

std::expected<MicroVmLaunch, std::string> plan_microvm(const policy::Bundle& tool, const MicroVmHost& host,
                                                       const policy::TaskVars& vars);

// req: the tool's request (argv, workdir, ids, environment, stdin, output
// callback, cancel fd). vmm_req: the VMM's, as the caller's binding prepared
// it (BPF hook and layers, cgroup parent); run_in_microvm fills the rest.
RunReport run_in_microvm(const MicroVmLaunch& launch, const policy::Bundle& tool, const RunRequest& req,
                         RunRequest vmm_req);

// A task's VM kept warm across its runs (docs/microvm.md, "Warm task VMs"):
// booted or restored by its first run, the guest parked after each run's
// exit and handed the next run's Start (the run's own policy, bound inside
// the guest like any run's). Any fault, a cancel or a timeout of a run tears
// the VM down (parked() is then false); so does close() and the destructor.
// The VMM's own wall-clock limit is kWarmVmLifeMs instead of the run's.
// One run at a time: the caller serialises them.
inline constexpr uint64_t kWarmVmLifeMs = 3'600'000;
class MicroVmRun;
class VmSession {
public:
    VmSession(MicroVmLaunch launch, const policy::Bundle& tool, RunRequest vmm_req);
    ~VmSession();
    VmSession(const VmSession&) = delete;
    VmSession& operator=(const VmSession&) = delete;
    // As run_in_microvm, the VM kept afterwards when the run ended cleanly.
    // policy_version: the task's version of `tool` (switch_policy).
    RunReport run(const policy::Bundle& tool, const RunRequest& req, uint64_t policy_version = 0);
    bool parked() const;
    void close();
    // A task's new policy epoch for the run in progress or about to start
    // (any thread): the guest's BPF binding follows it (a Policy frame, or
    // the run's Start if not sent yet); the run's report lists each switch
    // and the guest's answer. Older than the run's own version: ignored.
    void switch_policy(const policy::Bundle& tool, uint64_t policy_version);
    // The VMM's policy for the tool's rules `tool` (compose_vmm_bundle), as
    // the VMM's binding on the host takes it at a switch.
    policy::Bundle vmm_bundle_for(const policy::Bundle& tool) const;

private:
    std::unique_ptr<MicroVmRun> vm_;
};

}  // namespace bulwark::vm
