#pragma once
// A BPF runtime of one test or benchmark alone: the host's real programs and
// maps under a pin root and cgroup parent of its own (the default ones are
// shared with tiers running in parallel, and with an installed agentd),
// keeping every decision it reads. Each run it launches is bound to it;
// everything is removed at the end.
#include <unistd.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "audit/audit_record.h"
#include "bpf/bpf_loader.h"
#include "bpf/bpf_runtime.h"
#include "sandbox/spawner.h"

namespace bulwark::test {

struct PrivateRuntime {
    std::string pin_root, parent, error;
    std::mutex mu;
    std::vector<audit::AuditRecord> decisions;
    std::unique_ptr<bpf::BpfRuntime> rt;

    explicit PrivateRuntime(const std::string& leaf) {
        auto mnt = cgroup2_mount();
        auto own = own_cgroup2_path();
        if (!mnt || !own) {
            error = "no cgroup v2 mount";
            return;
        }
        pin_root = "/sys/fs/bpf/" + leaf;
        parent = *mnt + (*own == "/" ? "" : *own) + "/" + leaf;
        bpf::RuntimeOptions ro;
        ro.pin_root = pin_root;
        ro.cgroup_parent = parent;
        ro.sink = [this](audit::AuditRecord r) {
            std::lock_guard lk(mu);
            decisions.push_back(std::move(r));
        };
        if (auto r = bpf::BpfRuntime::start(ro)) rt = std::move(*r);
        else error = r.error().message();
    }
    ~PrivateRuntime() {
        rt.reset();
        if (!pin_root.empty()) (void)bpf::BpfLoader::unpin_all(pin_root);
        if (!parent.empty()) ::rmdir(parent.c_str());
    }

    // `bundle`'s tool run bound to this runtime as run `run_id`.
    RunReport run(const policy::Bundle& bundle, uint64_t run_id, const std::vector<std::string>& argv,
                  const std::string& workdir) {
        auto att = rt->attach(bundle, RunContext{.run_id = run_id, .tool = bundle.tool});
        if (!att) {
            RunReport r;
            r.tool = bundle.tool;
            r.argv = argv;
            r.error = "BPF attach: " + att.error().message;
            return r;  // SetupFailed: nothing ran
        }
        RunRequest req;
        req.argv = argv;
        req.workdir = workdir;
        req.attach_bpf = (*att)->hook();
        req.bpf_layers = rt->layer_states();
        req.cgroup_v2_parent = rt->cgroup_parent();
        RunReport r = run_tool(bundle, req);
        (*att)->release();  // delivers the run's last events
        return r;
    }

    // "<layer>[ <op>]" of the run's deny record about `object`, "" if none.
    std::string deny_layer(uint64_t run_id, const std::string& object, bool with_op) {
        std::lock_guard lk(mu);
        std::string layer;
        for (const auto& d : decisions)
            if (d.run_id == run_id && d.decision == BW_DECISION_DENY && d.object == object)
                layer = std::string(audit::layer_name(d.layer)) +
                        (with_op ? " " + std::string(audit::op_name(d.op)) : std::string());
        return layer;
    }
};

}  // namespace bulwark::test
