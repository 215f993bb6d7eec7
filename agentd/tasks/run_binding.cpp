#include "tasks/run_binding.h"

#include <seccomp.h>

#include <cstdlib>

#include "bpf/bpf_runtime.h"
#include "kaudit/kernel_audit.h"

namespace bulwark {

namespace {
uint64_t kaudit_losses(const KernelAuditReader* k) {
    return k ? k->kernel_lost_since_start() + k->overruns() : 0;
}

// The counts as the report says them: system calls by name (the native
// ABI's numbering; a number libseccomp cannot name stays a number).
nlohmann::json counted_json(const bw_run_usage& u) {
    nlohmann::json calls = nlohmann::json::object();
    for (int nr = 0; nr < BW_SYSCALL_SLOTS; ++nr) {
        if (!u.syscalls[nr]) continue;
        char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
        calls[name ? std::string(name) : std::to_string(nr)] = u.syscalls[nr];
        std::free(name);
    }
    return {{"syscalls", std::move(calls)},
            {"compat_syscalls", u.compat_syscalls},
            {"unknown_syscalls", u.unknown_syscalls},
            {"sent_bytes", u.tx_bytes},
            {"sent_packets", u.tx_packets}};
}
}  // namespace

RunBinding::RunBinding(const DecisionSources& sources, const policy::Bundle& bundle, RunContext ctx)
    : src_(sources), ctx_(std::move(ctx)), count_usage_(bundle.profile.enabled) {
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
    if (count_usage_) take_counts(rep);
    return end;
}

void RunBinding::take_counts(RunReport& rep) {
    // A run refused or failed before its tool ran has nothing to count (its
    // entry, if any, is taken all the same).
    const bool ran = rep.outcome == RunOutcome::Exited || rep.outcome == RunOutcome::Signaled;
    if (!ran) {
        if (att_) (void)att_->take_usage();
        return;
    }
    if (!att_) {
        rep.warnings.push_back("monitor: the run's system calls and sent bytes were not counted: no BPF binding (" +
                               unavailable_ + ")");
        return;
    }
    auto u = att_->take_usage();
    if (!u) {
        rep.warnings.push_back("monitor: the run's counts could not be read: " + u.error().message());
    } else if (!*u) {
        rep.warnings.push_back("monitor: the run's system calls and sent bytes were not counted (its count "
                               "entry could not be made: the map is full)");
    } else {
        rep.counted = counted_json(**u);
        // Zero system calls from a run that ran means none were counted.
        if (std::string gap = src_.bpf->syscall_counting_gap(); !gap.empty()) {
            rep.counted.erase("syscalls");
            rep.counted["syscalls_not_counted"] = gap;
        }
    }
}

}  // namespace bulwark
