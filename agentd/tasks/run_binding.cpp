#include "tasks/run_binding.h"

#include "bpf/bpf_runtime.h"
#include "kaudit/kernel_audit.h"

namespace bulwark {

namespace {
uint64_t kaudit_losses(const KernelAuditReader* k) {
    return k ? k->kernel_lost_since_start() + k->overruns() : 0;
}
}  // namespace

RunBinding::RunBinding(const DecisionSources& sources, const policy::Bundle& bundle, RunContext ctx)
    : src_(sources), ctx_(std::move(ctx)) {
    if (!src_.bpf) {
        unavailable_ = src_.bpf_unavailable;
    } else if (auto a = src_.bpf->attach(bundle, ctx_)) {
        att_ = std::move(*a);
    } else {
        unavailable_ = a.error().message;
    }
    kaudit_lost_at_start_ = kaudit_losses(src_.kaudit);
}

RunBinding::~RunBinding() {
    if (att_) att_->release();
}

void RunBinding::prepare(RunRequest& req) {
    if (att_) {
        req.attach_bpf = att_->hook();
        req.cgroup_v2_parent = src_.bpf->cgroup_parent();
        req.bpf_layers = src_.bpf->layer_states();
    } else {
        req.bpf_unavailable = unavailable_;
    }
    if (src_.kaudit && src_.registry)
        req.on_cgroup = [this](const std::string& path, pid_t pid) {
            RunContext ctx;
            {
                std::lock_guard lk(mu_);
                cgroup_ = path;
                cgroup_pid_ = pid;
                ctx = ctx_;
            }
            src_.registry->add(path, pid, ctx);
        };
}

std::expected<void, bpf::BindError> RunBinding::rebind(const policy::Bundle& bundle, uint64_t policy_version) {
    if (!att_) return {};
    return att_->rebind(bundle, policy_version);
}

std::expected<void, bpf::BindError> RunBinding::retarget(RunContext ctx) {
    std::string cgroup;
    pid_t pid = 0;
    {
        std::lock_guard lk(mu_);
        ctx_ = ctx;
        cgroup = cgroup_;
        pid = cgroup_pid_;
        kaudit_lost_at_start_ = kaudit_losses(src_.kaudit);
    }
    if (!cgroup.empty() && src_.registry) src_.registry->add(cgroup, pid, ctx);
    if (!att_) return {};
    return att_->retarget(ctx);
}

RunSourcesEnd RunBinding::settle(RunReport& rep) {
    RunSourcesEnd end;
    std::string cgroup;
    {
        std::lock_guard lk(mu_);
        if (finished_) return end;
        cgroup = cgroup_;
    }
    if (!cgroup.empty()) {
        // Kernel audit records of the run arrive asynchronously: wait until
        // the reader has consumed the audit queue up to the run's end.
        end.kaudit_read = src_.kaudit->barrier(src_.kaudit_wait);
        if (!end.kaudit_read)
            rep.warnings.push_back("kernel audit: the backlog up to the run's end was not consumed within " +
                                   std::to_string(src_.kaudit_wait.count()) + " ms; decisions may be incomplete");
        end.kaudit_lost = kaudit_losses(src_.kaudit) - kaudit_lost_at_start_;
        if (end.kaudit_lost > 0)
            rep.warnings.push_back("kernel audit: " + std::to_string(end.kaudit_lost) +
                                   " record loss(es) on the host during the run (the kernel's lost counter and "
                                   "socket overruns); decisions may be incomplete");
    }
    if (att_)
        for (auto& w : att_->warnings()) rep.warnings.push_back(std::move(w));
    return end;
}

RunSourcesEnd RunBinding::finish(RunReport& rep) {
    RunSourcesEnd end = settle(rep);
    std::string cgroup;
    {
        std::lock_guard lk(mu_);
        if (finished_) return end;
        finished_ = true;
        cgroup = cgroup_;
    }
    if (!cgroup.empty()) src_.registry->remove(cgroup);
    if (att_) att_->release();  // delivers the run's last events
    return end;
}

}  // namespace bulwark
