#include "sandbox/spawner.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string_view>

#include "bulwark/policy/evaluator.h"
#include "common/fd.h"
#include "common/sys_error.h"
#include "sandbox/caps.h"
#include "sandbox/cgroup.h"
#include "sandbox/hardening.h"
#include "sandbox/landlock.h"
#include "sandbox/launch_child.h"
#include "sandbox/launch_inputs.h"
#include "sandbox/mounts.h"
#include "sandbox/ns_net.h"
#include "sandbox/ns_pid.h"
#include "sandbox/ns_user.h"
#include "sandbox/posture.h"
#include "sandbox/rule_coverage.h"
#include "sandbox/seccomp_install.h"
#include "sandbox/supervise.h"
#include "sandbox/workdir_access.h"

namespace bulwark {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kDefaultOutputBytes = 16ull << 20;
constexpr uint64_t kDefaultFileSizeBytes = 1ull << 30;  // RLIMIT_FSIZE without a policy limit
constexpr uint64_t kDefaultOpenFiles = 1024;
constexpr int kSetupTimeoutMs = 10000;

std::atomic<uint64_t> g_run_counter{0};

int dup_high(int fd) {
    // Keep our descriptors clear of 0..2 so the child's dup2 cannot clobber them.
    if (fd >= 3) return fd;
    int n = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
    ::close(fd);
    return n;
}

// Leaves the run could not remove: in the report, said as a warning.
void note_cgroups_left(RunReport& rep, const std::vector<CgroupLeft>& left) {
    for (const auto& l : left) {
        rep.cgroups_left.push_back({l.path, l.error});
        rep.warnings.push_back("cgroup: the run's cgroup " + l.path + " could not be removed: " + l.error +
                               "; it is empty of the run's processes and retried until it goes");
    }
}


// The layers of this launch, for per-rule coverage. Namespaces, cgroups,
// rlimits and the supervisor are in force in every run that starts: a step
// of theirs that fails fails the launch.
LayersInForce layers_in_force(const LandlockPrep& ll, const SeccompPrep& sc, bool own_netns,
                              const RunRequest& req, const MountPlan& mounts) {
    LayersInForce in;
    auto state = [](const LayerStatus& l) { return l.state == LayerState::Enforcing ? std::string() : l.detail; };
    in.state["landlock"] = state(ll.status);
    in.landlock_fs = ll.handled_fs;
    in.state["seccomp"] = state(sc.status);
    in.state["mount"] = "";
    in.state["netns"] = own_netns ? "" : "the tool stays in the host's network namespace (network rules)";
    for (const char* l : {"cgroup", "rlimit", "supervisor"}) in.state[l] = "";
    for (const char* l : {"sock_addr", "sock_unix", "bpf_lsm"}) {
        if (!req.attach_bpf && req.bpf_layers.empty()) {
            in.state[l] = req.bpf_unavailable.empty() ? "no BPF policy binding in this run" : req.bpf_unavailable;
        } else {
            auto it = req.bpf_layers.find(l);
            in.state[l] = it != req.bpf_layers.end() ? it->second : "the BPF binding did not report this layer";
        }
    }
    for (const char* l : {"microvm", "tee"}) {
        auto it = req.vm_layers.find(l);
        in.state[l] = it != req.vm_layers.end()     ? it->second
                      : std::string_view(l) == "tee" ? "the tool does not run in a confidential guest"
                                                     : "the tool runs in the host sandbox";
    }
    in.state["profile"] = req.profile_scoring ? ""
                                              : "no profile scores this run (profiles are learned and scored by "
                                                "agentd serve from its audit store)";
    in.mount = [&mounts](const policy::RuleCoverage& c) -> std::string {
        for (const auto& m : mounts.masks)
            if (m.rule_id == c.rule_id) return m.held ? "" : m.how;
        return "no mask was planned for this rule";
    };
    return in;
}

// Why a launch ended before its tool ran: the run's outcome (Refused,
// SetupFailed or ExecFailed), the reason, and for a refusal the caller may
// answer with a code of its own, RunReport::refusal_code.
struct LaunchError {
    RunOutcome outcome;
    std::string message;
    std::string refusal_code = {};
};
using Step = std::expected<void, LaunchError>;

std::unexpected<LaunchError> refused(std::string why, std::string code = {}) {
    return std::unexpected(LaunchError{RunOutcome::Refused, std::move(why), std::move(code)});
}
std::unexpected<LaunchError> setup_failed(std::string why) {
    return std::unexpected(LaunchError{RunOutcome::SetupFailed, std::move(why)});
}

// One launch, parent side. Each step prepares what the later ones use; the
// order is run_tool's.
class Launch {
public:
    Launch(const policy::Bundle& bundle, const RunRequest& req) : bundle_(bundle), req_(req) {
        rep_.tool = bundle.tool;
        rep_.argv = req.argv;
    }
    // Placeholders go once the sandbox is gone (or was never built).
    ~Launch() { release_placeholders(mounts_); }
    Launch(const Launch&) = delete;
    Launch& operator=(const Launch&) = delete;

    Step resolve_binary();
    Step prepare_env_and_hardening();
    Step prepare_seccomp();
    Step prepare_landlock();
    Step choose_netns();
    Step resolve_ids();
    Step plan_filesystem();
    Step judge_rules();
    Step take_netns();
    Step create_cgroups();
    Step open_pipes();
    Step prepare_child();
    Step clone_child();
    Step init_parent();
    Step await_ready();
    Step verify_posture();
    Step release_to_exec();

    // The tool runs: supervision, then what it used and hit, then nothing
    // of the run left behind.
    RunReport supervise_to_end();
    void took(const char* step, Clock::duration d) {
        rep_.usage.setup_us.emplace_back(step, uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(d).count()));
    }
    // A step failed: a child is killed and reaped, its cgroup removed.
    RunReport fail(LaunchError e);

private:
    void account(const ToolExit& exit, Clock::time_point t_exec);
    void clean_up();
    void recycle_netns();

    const policy::Bundle& bundle_;
    const RunRequest& req_;
    RunReport rep_;
    const Clock::time_point t0_ = Clock::now();
    LayerStatus sup_{"supervisor", LayerState::Enforcing, "", {}};
    Fd bin_fd_;
    std::vector<std::string> env_;
    std::optional<HardeningPrep> hard_;
    std::optional<SeccompPrep> sc_;
    std::optional<LandlockPrep> ll_;
    bool own_netns_ = true;
    std::string workdir_;
    dev_t workdir_dev_ = 0;
    ino_t workdir_ino_ = 0;
    uid_t uid_ = 65534;
    gid_t gid_ = 65534;
    IdSource ids_from_ = IdSource::RootOwnedWorkdir;
    std::vector<policy::RuleCoverage> claims_;
    MountPlan mounts_;
    std::optional<Fd> pooled_netns_;
    std::optional<SandboxCgroup> cg_;
    Fd out_r_, out_w_, err_r_, err_w_, sock_p_, sock_c_, null_fd_, in_r_, in_w_;
    ChildCtx child_;
    std::vector<std::string> argv_s_;
    std::vector<char*> argv_c_, env_c_;
    std::vector<int> own_fds_;
    // The child, from clone_child on. Its stack lives until it has exec'd
    // or been reaped; signals stay blocked on this thread until then.
    std::optional<ChildStack> stack_;
    std::optional<SignalsBlocked> blocked_;
    pid_t pid_ = -1;
    Fd pidfd_;
};

// (p1) The binary: resolved against the policy's list, opened once,
//      content-pinned when the policy says so. The child executes this very
//      descriptor.
Step Launch::resolve_binary() {
    if (req_.argv.empty()) return refused("no command given");
    auto bin = open_policy_binary(bundle_, req_.argv[0], sup_);
    if (!bin) return refused(bin.error());
    bin_fd_ = std::move(bin->fd);
    sup_.detail = bin->how + "; posture checked before exec";
    return {};
}

// (p2) Environment, then hardening (MTE via the tool's allocator tunables,
//      ELF properties of the tool and its libraries).
Step Launch::prepare_env_and_hardening() {
    auto tool = prepare_tool_environment(bundle_, bin_fd_.get(), req_.argv[0], req_);
    if (!tool) return refused(tool.error());
    env_ = std::move(tool->env);
    hard_ = std::move(tool->hardening);
    rep_.hardening = hard_->in_force;
    for (const auto& w : hard_->warnings) rep_.warnings.push_back(w);
    return {};
}

// (p3) Seccomp program, compiled by policyc before we ever clone.
Step Launch::prepare_seccomp() {
    auto sc = bulwark::prepare_seccomp(bundle_.seccomp);
    if (!sc) return refused(sc.error());
    sc_ = std::move(*sc);
    sc_->finalize();
    return {};
}

// (p4) Landlock ruleset at the best ABI (dropped rights reported).
Step Launch::prepare_landlock() {
    char wd_real[PATH_MAX] = {};
    std::string wd_for_landlock =
        !req_.workdir.empty() && ::realpath(req_.workdir.c_str(), wd_real) ? std::string(wd_real) : std::string();
    auto ll = bulwark::prepare_landlock(bundle_, bin_fd_.get(), wd_for_landlock, rep_.warnings);
    if (!ll) return setup_failed(ll.error().message());
    ll_ = std::move(*ll);
    return {};
}

// (p5) Network design. `none`/`loopback`: own netns with only lo. `network:`
//      rules: the host netns, where the BPF loader's cgroup sock_addr
//      programs (connect/sendmsg/bind on the run's cgroup) judge every
//      address and Landlock judges TCP ports. Without the BPF binding nothing
//      holds those rules: judge_rules refuses the tool, it is never run
//      unconfined.
Step Launch::choose_netns() {
    own_netns_ = bundle_.network.mode != policy::NetMode::Rules;
    return {};
}

// (p6) Ids and the workdir. The tool must be able to enter the workdir as
//      those ids (checked here so the refusal says what to do; the child's
//      chdir is the backstop).
Step Launch::resolve_ids() {
    if (!req_.workdir.empty()) {
        char real[PATH_MAX];
        struct stat st{};
        if (!::realpath(req_.workdir.c_str(), real) || ::stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
            return refused("workdir " + req_.workdir + " is not an existing directory");
        workdir_ = real;
        workdir_dev_ = st.st_dev;
        workdir_ino_ = st.st_ino;
        if (st.st_uid != 0) {
            uid_ = st.st_uid;
            gid_ = st.st_gid;
            ids_from_ = IdSource::WorkdirOwner;
        }
    }
    if (req_.uid) uid_ = *req_.uid;
    if (req_.gid) gid_ = *req_.gid;
    if (req_.uid || req_.gid) ids_from_ = IdSource::Requested;
    if (uid_ == 0 || gid_ == 0) return refused("the tool may not run as uid/gid 0");
    if (!workdir_.empty())
        if (std::string why = check_workdir_access(workdir_, uid_, gid_, ids_from_); !why.empty())
            return refused(why);
    return {};
}

// (p7) Mount plan (flat C strings for the child), with a mask for each deny
//      below an allowed subtree.
Step Launch::plan_filesystem() {
    claims_ = policy::rule_coverage(bundle_);
    mounts_ = plan_mounts(bundle_, workdir_, deny_mask_requests(claims_), uid_, gid_, req_.host_view);
    if (req_.host_view) rep_.warnings.push_back("the host's directories are shown read-only (agentd learn)");
    for (const auto& n : mounts_.notes) rep_.warnings.push_back(n);
    for (const auto& m : mounts_.masks)
        if (m.created) rep_.placeholders.push_back(m.placeholder);
    for (const auto& m : mounts_.masks)
        if (!m.placeholder.empty())
            rep_.warnings.push_back("mount: " + m.placeholder + " is absent, in a directory the tool may create in: "
                                    "an empty directory stands there for the run, masked, so that " +
                                    policy::describe_rule(bundle_, m.rule_id) + " holds; it is removed afterwards");
    return {};
}

// (p7b) Per-rule coverage: every rule held by a layer in force here, or
//       nothing runs (unless the rule says `unenforceable: run`).
Step Launch::judge_rules() {
    CoverageReport cov = judge_coverage(std::move(claims_), layers_in_force(*ll_, *sc_, own_netns_, req_, mounts_));
    rep_.coverage = coverage_json(bundle_, cov);
    rep_.coverage_summary = coverage_summary(cov);
    for (size_t i : cov.gaps) rep_.unenforced.push_back(describe_gap(bundle_, cov.rules[i]));
    if (cov.launch_refused()) return refused(refusal_message(bundle_, cov), "rule_unenforced");
    if (req_.on_plan)
        if (std::string why = req_.on_plan(rep_); !why.empty()) return refused(why);
    if (req_.plan_only) {
        rep_.layers = {ll_->status, sc_->status};
        return refused("plan only: nothing was started");
    }
    return {};
}

// (p7c) The network namespace of a `none`/`loopback` tool (p5's design).
Step Launch::take_netns() {
    if (own_netns_ && req_.recycle_netns) {
        std::string err;
        pooled_netns_ = NetnsPool::instance().acquire(err);
        if (!pooled_netns_) return setup_failed("network namespace pool: " + err);
    }
    rep_.network = own_netns_ ? std::string(bundle_.network.mode == policy::NetMode::None ? "none" : "loopback") +
                                    (pooled_netns_ ? ": a network namespace of its own with only lo (recycled from "
                                                     "the pool, owned by the host's user namespace)"
                                                   : ": own network namespace with only lo")
                              : "rules: host network namespace, judged by cgroup sock_addr programs "
                                "and Landlock TCP port rules";
    return {};
}

// (p8) Per-run cgroups below our own: v2 leaf + v1 limit leaves. Once per
//      process, leaves of a previous agentd that died are reaped first.
//      Then the layer summary known before launch.
Step Launch::create_cgroups() {
    static std::once_flag reaped;
    std::call_once(reaped, [&] { reap_stale_cgroups(req_.cgroup_v2_parent); });
    std::string name = std::string(kRunCgroupPrefix) + std::to_string(::getpid()) + "-" +
                       std::to_string(g_run_counter++) + (req_.cgroup_label.empty() ? "" : "-" + req_.cgroup_label);
    CgroupLimits cl{bundle_.limits.memory_bytes, bundle_.limits.pids, bundle_.limits.cpu_percent};
    auto cg = SandboxCgroup::create(name, cl, req_.cgroup_v2_parent);
    if (!cg) return setup_failed("cgroup: " + cg.error().message());
    cg_.emplace(std::move(*cg));

    LayerStatus ns{"namespaces", LayerState::Enforcing,
                   std::string("user (uid ") + std::to_string(uid_) + " mapped 1:1), pid, mount, ipc, uts, cgroup" +
                       (own_netns_ ? ", net" : "; host net (see network)") +
                       (memfd_noexec_supported() ? "; memfd_noexec=2" : ""),
                   {}};
    if (!memfd_noexec_supported())
        ns.dropped.push_back("vm.memfd_noexec (kernel < 6.3): executable memfds stay possible");
    LayerStatus cgl{"cgroup", LayerState::Enforcing, "v2 " + cg_->v2_path(), {}};
    if (cl.memory_bytes) cgl.detail += "; memory " + std::to_string(*cl.memory_bytes);
    if (cl.pids) cgl.detail += "; pids " + std::to_string(*cl.pids);
    if (cl.cpu_percent) cgl.detail += "; cpu " + std::to_string(*cl.cpu_percent) + "%";
    rep_.layers = {ns, cgl, ll_->status, sc_->status};
    return {};
}

// (p9) Pipes, the sync socket, stdin: all clear of descriptors 0..2.
Step Launch::open_pipes() {
    int pfd[2], efd[2], sv[2];
    if (::pipe2(pfd, O_CLOEXEC) != 0 || ::pipe2(efd, O_CLOEXEC) != 0)
        return setup_failed("pipe2: " + errno_text(errno));
    out_r_ = Fd(dup_high(pfd[0]));
    out_w_ = Fd(dup_high(pfd[1]));
    err_r_ = Fd(dup_high(efd[0]));
    err_w_ = Fd(dup_high(efd[1]));
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return setup_failed("socketpair: " + errno_text(errno));
    sock_p_ = Fd(dup_high(sv[0]));
    sock_c_ = Fd(dup_high(sv[1]));
    null_fd_ = Fd(dup_high(::open("/dev/null", O_RDONLY | O_CLOEXEC)));
    if (!null_fd_ || !out_r_ || !err_r_ || !sock_p_) return setup_failed("descriptor setup: " + errno_text(errno));
    if (req_.stdin_data) {
        int ifd[2];
        if (::pipe2(ifd, O_CLOEXEC) != 0) return setup_failed("pipe2: " + errno_text(errno));
        in_r_ = Fd(dup_high(ifd[0]));
        in_w_ = Fd(dup_high(ifd[1]));
        if (!in_r_ || !in_w_) return setup_failed("descriptor setup: " + errno_text(errno));
    }
    return {};
}

// (p9b) Everything the child reads, flat: rlimits, argv and environment as
//       C strings, the descriptors it keeps.
Step Launch::prepare_child() {
    ChildCtx& c = child_;
    auto add_rl = [&](int res, uint64_t v) {
        rlimit cur{};
        ::getrlimit(static_cast<__rlimit_resource>(res), &cur);
        rlim_t val = std::min<rlim_t>(v, cur.rlim_max);
        c.rlimits[c.n_rlimits++] = {res, val};
    };
    add_rl(RLIMIT_CORE, 0);
    add_rl(RLIMIT_NOFILE, bundle_.limits.open_files.value_or(kDefaultOpenFiles));
    add_rl(RLIMIT_FSIZE, bundle_.limits.file_size_bytes.value_or(kDefaultFileSizeBytes));
    // NPROC is counted per (user namespace, uid): per sandbox here.
    if (bundle_.limits.pids) add_rl(RLIMIT_NPROC, *bundle_.limits.pids);

    argv_s_ = req_.argv;
    for (auto& a : argv_s_) argv_c_.push_back(a.data());
    argv_c_.push_back(nullptr);
    for (auto& e : env_) env_c_.push_back(e.data());
    env_c_.push_back(nullptr);

    c.sock = sock_c_.get();
    c.stdin_fd = in_r_ ? in_r_.get() : null_fd_.get();
    c.stdout_fd = out_w_.get();
    c.stderr_fd = err_w_.get();
    c.bin_fd = bin_fd_.get();
    c.argv = argv_c_.data();
    c.envp = env_c_.data();
    c.mounts = &mounts_;
    c.landlock = &*ll_;
    c.seccomp = &*sc_;
    c.hardening = &*hard_;
    c.own_netns = own_netns_ && !pooled_netns_;  // a pooled netns has lo up already
    c.memfd_noexec = memfd_noexec_supported();
    c.last_cap = cap_last_cap();
    c.uid = uid_;
    c.gid = gid_;
    c.hostname = req_.hostname.c_str();
    c.keep_fds = req_.keep_fds.data();
    c.n_keep = req_.keep_fds.size();
    own_fds_ = {c.sock, c.stdin_fd, c.stdout_fd, c.stderr_fd, c.bin_fd};
    if (ll_->ruleset) own_fds_.push_back(ll_->ruleset.get());
    own_fds_.insert(own_fds_.end(), req_.keep_fds.begin(), req_.keep_fds.end());
    std::erase_if(own_fds_, [](int fd) { return fd < 0; });
    std::sort(own_fds_.begin(), own_fds_.end());
    own_fds_.erase(std::unique(own_fds_.begin(), own_fds_.end()), own_fds_.end());
    c.own_fds = own_fds_.data();
    c.n_own = own_fds_.size();
    return {};
}

// (p10) clone3 straight into the v2 leaf, in every new namespace. A pooled
//       netns is entered by this thread just for the clone3, so the child
//       starts in it; the thread returns to its own right after.
Step Launch::clone_child() {
    clone_args ca{};
    int pidfd_raw = -1;
    ca.flags = CLONE_PIDFD | CLONE_INTO_CGROUP | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC |
               CLONE_NEWUTS | CLONE_NEWCGROUP | (own_netns_ && !pooled_netns_ ? CLONE_NEWNET : 0);
    ca.pidfd = reinterpret_cast<uint64_t>(&pidfd_raw);
    ca.exit_signal = SIGCHLD;
    ca.cgroup = static_cast<uint64_t>(cg_->v2_fd());
    int own_net = -1;
    if (pooled_netns_ && !enter_thread_netns(pooled_netns_->get(), own_net))
        return setup_failed("setns(pooled netns): " + errno_text(errno));
    blocked_.emplace();
    auto pid = clone_sandbox_child(ca, child_, stack_);
    if (pooled_netns_) leave_thread_netns(own_net);
    if (!pid) return setup_failed("clone3(CLONE_INTO_CGROUP|CLONE_NEW*): " + errno_text(pid.error()));
    pid_ = *pid;
    pidfd_ = Fd(pidfd_raw);
    sock_c_.reset();
    out_w_.reset();
    err_w_.reset();
    null_fd_.reset();
    return {};
}

// (p11) Parent side of the namespaces and cgroups, before the child moves:
//       uid/gid maps, the BPF policy binding; mandatory layers must be
//       enforcing, or nothing runs. Then 'G'.
Step Launch::init_parent() {
    if (req_.on_cgroup) req_.on_cgroup(cg_->v2_path(), pid_);
    if (auto r = write_id_maps(pid_, uid_, gid_); !r) return setup_failed("user namespace: " + r.error().message());
    if (req_.attach_bpf) {
        auto r = req_.attach_bpf(cg_->v2_fd(), cg_->v2_path());
        if (!r)
            return std::unexpected(
                LaunchError{RunOutcome::SetupFailed, "BPF policy binding: " + r.error(), "bpf_binding"});
        rep_.layers.push_back({"bpf", LayerState::Enforcing, *r, {}});
    } else {
        rep_.layers.push_back({"bpf", LayerState::Unavailable,
                               req_.bpf_unavailable.empty()
                                   ? "no BPF policy binding in this run (cgroup sock_addr / BPF LSM not attached)"
                                   : req_.bpf_unavailable,
                               {}});
    }
    for (const auto& m : bundle_.mandatory_layers) {
        const LayerStatus* l = rep_.layer(m == "bpf-lsm" || m == "bpf_lsm" ? "bpf" : m);
        if (!l || l->state != LayerState::Enforcing)
            return refused("mandatory layer " + m + " is not enforcing" + (l ? ": " + l->detail : ""));
    }
    if (::write(sock_p_.get(), "G", 1) != 1) return setup_failed("sync write: " + errno_text(errno));
    return {};
}

// (p12) The child builds its sandbox; it reports a failure or "ready".
//       Meanwhile the child joins its v1 limit leaves: each join may wait
//       for an RCU grace period (the global threadgroup lock; ~10 ms where
//       no cgroup mount has favordynmods), which the child's setup overlaps.
//       The child forks nothing before its exec, which waits for 'X' (p13b),
//       so the limits hold from the tool's first instruction.
Step Launch::await_ready() {
    if (auto r = cg_->add_v1(pid_); !r) return setup_failed("cgroup v1: " + r.error().message());
    ChildMsg msg;
    ChildReply got = read_child_msg(sock_p_.get(), msg, kSetupTimeoutMs);
    if (got == ChildReply::Message && msg.kind == kMsgReady) return {};
    bool workdir_denied = got == ChildReply::Message && std::string_view(msg.step) == "chdir" &&
                          msg.path == workdir_ && (msg.err == EACCES || msg.err == EPERM);
    std::string why = workdir_denied ? workdir_denied_message(workdir_, uid_, gid_, ids_from_, msg.err)
                      : got == ChildReply::Message ? describe_child_msg(msg)
                      : got == ChildReply::Eof ? "the sandbox child died during setup (a seccomp policy must allow "
                                                 "read, write and execveat)"
                                               : "the sandbox child did not become ready in time";
    return setup_failed("sandbox setup: " + why);
}

// (p13) Posture, read from outside while the child waits before exec; then
//       the caller's last word (the daemon's durable start record).
Step Launch::verify_posture() {
    if (std::string bad = check_posture(pid_); !bad.empty()) {
        rep_.denials.push_back("supervisor: posture check failed: " + bad);
        return setup_failed("posture check failed: " + bad);
    }
    rep_.layers.push_back(sup_);
    if (req_.before_exec)
        if (std::string why = req_.before_exec(); !why.empty()) return refused(why);
    return {};
}

// (p13b) 'X': the child executes the verified binary. EOF on the sync socket
//        (close-on-exec) confirms the exec; a message is its failure.
Step Launch::release_to_exec() {
    if (::write(sock_p_.get(), "X", 1) != 1) return setup_failed("sync write: " + errno_text(errno));
    ChildMsg msg;
    ChildReply got = read_child_msg(sock_p_.get(), msg, kSetupTimeoutMs);
    if (got == ChildReply::Message) {
        rep_.denials.push_back("exec: " + describe_child_msg(msg));
        return std::unexpected(LaunchError{RunOutcome::ExecFailed, "exec failed: " + describe_child_msg(msg)});
    }
    if (got == ChildReply::Silent) return setup_failed("no exec confirmation from the sandbox child");
    sock_p_.reset();
    in_r_.reset();
    blocked_.reset();  // the child has its own address space now
    return {};
}

// (p14) Supervise: outputs (bounded), exit via pidfd, wall-clock timeout ->
//       cgroup.kill (takes double-forked orphans too).
RunReport Launch::supervise_to_end() {
    const auto t_exec = Clock::now();
    SupervisedTool tool;
    tool.pidfd = pidfd_.get();
    tool.stdout_r = std::move(out_r_);
    tool.stderr_r = std::move(err_r_);
    tool.stdin_w = std::move(in_w_);
    if (req_.stdin_data) tool.stdin_data = *req_.stdin_data;
    tool.cancel_fd = req_.cancel_fd;
    tool.cancel_reason = &req_.cancel_reason;
    tool.timeout_ms = bundle_.limits.timeout_ms;
    tool.output_bytes = bundle_.limits.output_bytes.value_or(kDefaultOutputBytes);
    tool.on_output = &req_.on_output;
    ToolExit exit = supervise(std::move(tool), *cg_, rep_);
    account(exit, t_exec);
    clean_up();
    return std::move(rep_);
}

// (p15) How the tool ended, what it used, which limits it hit.
void Launch::account(const ToolExit& exit, Clock::time_point t_exec) {
    rep_.usage.wall_us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t_exec).count();
    if (exit.info.si_code == CLD_EXITED) {
        rep_.outcome = RunOutcome::Exited;
        rep_.exit_code = exit.info.si_status;
    } else {
        rep_.outcome = RunOutcome::Signaled;
        rep_.signal = exit.info.si_status;
    }
    if (rep_.stdout_truncated || rep_.stderr_truncated)
        rep_.denials.push_back("supervisor: output beyond " +
                               std::to_string(bundle_.limits.output_bytes.value_or(kDefaultOutputBytes)) +
                               " bytes discarded");
    const rusage& ru = exit.usage;
    if (cg_->cpu_usage(rep_.usage.cpu_user_us, rep_.usage.cpu_system_us)) {
        rep_.usage.source = "cgroup v2 cpu.stat";
    } else {
        rep_.usage.cpu_user_us = ru.ru_utime.tv_sec * 1000000ull + ru.ru_utime.tv_usec;
        rep_.usage.cpu_system_us = ru.ru_stime.tv_sec * 1000000ull + ru.ru_stime.tv_usec;
        rep_.usage.source = "rusage";
    }
    if (cg_->has_memory()) {
        rep_.usage.peak_memory_bytes = cg_->peak_memory();
        rep_.usage.source += ", memory.max_usage_in_bytes";
    } else {
        rep_.usage.peak_memory_bytes = static_cast<uint64_t>(ru.ru_maxrss) * 1024;
        rep_.usage.source += ", ru_maxrss";
    }
    if (uint64_t n = cg_->oom_kills(); n > 0) {
        rep_.oom_killed = true;
        rep_.denials.push_back("cgroup: memory limit reached; " + std::to_string(n) + " process(es) OOM-killed");
    }
    if (uint64_t n = cg_->pids_max_hits(); n > 0)
        rep_.denials.push_back("cgroup: pids limit refused " + std::to_string(n) + " fork(s)");
}

// (p16) Nothing left behind: every process killed, the netns back in the
//       pool, the cgroups removed. The work directory may have gone while
//       the tool ran (removed or moved away from under it): what the tool
//       wrote there went with it.
void Launch::clean_up() {
    cg_->kill_all();
    if (!cg_->wait_empty(5000)) rep_.warnings.push_back("cgroup " + cg_->v2_path() + " still populated after kill");
    recycle_netns();
    note_cgroups_left(rep_, cg_->remove());
    if (!workdir_.empty()) {
        struct stat now{};
        bool gone = ::lstat(workdir_.c_str(), &now) != 0;
        if (gone || now.st_dev != workdir_dev_ || now.st_ino != workdir_ino_) {
            rep_.workdir_vanished = true;
            rep_.warnings.push_back("workdir: " + workdir_ + " vanished during the run (" +
                                    (gone ? "removed or moved away" : "another file stands there now") +
                                    "); what the tool wrote there is not there");
        }
    }
}

// Only once nothing of the run is left can its netns serve another.
void Launch::recycle_netns() {
    if (pooled_netns_ && cg_->wait_empty(5000)) NetnsPool::instance().release(std::move(*pooled_netns_));
    pooled_netns_.reset();
}

RunReport Launch::fail(LaunchError e) {
    if (pid_ > 0) {
        ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
        cg_->kill_all();
        reap_pidfd(pidfd_.get());
        recycle_netns();
        note_cgroups_left(rep_, cg_->remove());
        rep_.usage.wall_us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0_).count();
    }
    blocked_.reset();
    rep_.outcome = e.outcome;
    rep_.error = std::move(e.message);
    if (!e.refusal_code.empty()) rep_.refusal_code = std::move(e.refusal_code);
    return std::move(rep_);
}

}  // namespace

// run_tool: the parent's steps in privilege order; the child's (c0..c15)
// are in launch_child.cpp. A step that fails ends the launch: the child, if
// there is one, is killed and reaped, and the report says why.
RunReport run_tool(const policy::Bundle& bundle, const RunRequest& req) {
    struct NamedStep {
        const char* name;
        Step (Launch::*run)();
    };
    static constexpr NamedStep kSteps[] = {
        {"resolve_binary", &Launch::resolve_binary},                        // p1
        {"prepare_env_and_hardening", &Launch::prepare_env_and_hardening},  // p2
        {"prepare_seccomp", &Launch::prepare_seccomp},                      // p3
        {"prepare_landlock", &Launch::prepare_landlock},                    // p4
        {"choose_netns", &Launch::choose_netns},                            // p5
        {"resolve_ids", &Launch::resolve_ids},                              // p6
        {"plan_filesystem", &Launch::plan_filesystem},                      // p7
        {"judge_rules", &Launch::judge_rules},                              // p7b: every rule held, or no launch
        {"take_netns", &Launch::take_netns},                                // p7c
        {"create_cgroups", &Launch::create_cgroups},                        // p8
        {"open_pipes", &Launch::open_pipes},                                // p9
        {"prepare_child", &Launch::prepare_child},                          // p9b
        {"clone_child", &Launch::clone_child},                              // p10: the child waits for 'G'
        {"init_parent", &Launch::init_parent},                              // p11: id maps, BPF binding
        {"await_ready", &Launch::await_ready},        // p12: v1 leaves joined; the child built its sandbox
        {"verify_posture", &Launch::verify_posture},  // p13: read from outside
        {"release_to_exec", &Launch::release_to_exec},  // p13b: 'X'
    };
    Launch launch(bundle, req);
    auto t = Clock::now();
    for (const auto& step : kSteps) {
        auto r = (launch.*step.run)();
        auto now = Clock::now();
        launch.took(step.name, now - t);
        t = now;
        if (!r) return launch.fail(std::move(r.error()));
    }
    return launch.supervise_to_end();  // p14..p16
}

}  // namespace bulwark
