#include "sandbox/spawner.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/fsuid.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <memory>
#include <sstream>

#include "sandbox/caps.h"
#include "sandbox/cgroup.h"
#include "common/digest.h"
#include "common/fd.h"
#include "sandbox/hardening.h"
#include "sandbox/landlock.h"
#include "sandbox/mounts.h"
#include "sandbox/rule_coverage.h"
#include "bulwark/policy/evaluator.h"
#include "sandbox/ns_net.h"
#include "sandbox/ns_pid.h"
#include "sandbox/ns_user.h"
#include "sandbox/ns_uts.h"
#include "sandbox/seccomp_install.h"
#include "sandbox/workdir_access.h"

extern char** environ;

namespace bulwark {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kDefaultOutputBytes = 16ull << 20;
constexpr uint64_t kDefaultFileSizeBytes = 1ull << 30;  // RLIMIT_FSIZE without a policy limit
constexpr uint64_t kDefaultOpenFiles = 1024;
constexpr int kSetupTimeoutMs = 10000;

// Child -> parent messages over the sync socket.
enum : uint32_t { kMsgReady = 1, kMsgSetupFailed = 2, kMsgExecFailed = 3 };
struct ChildMsg {
    uint32_t kind = 0;
    int32_t err = 0;
    char step[96] = {};
    char path[160] = {};
};

// Everything the child needs, prepared by the parent before clone: the child
// only reads it (and the mount plan's fd slots), never allocates.
struct ChildCtx {
    int sock = -1;
    int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1;
    int bin_fd = -1;
    char* const* argv = nullptr;
    char* const* envp = nullptr;
    MountPlan* mounts = nullptr;
    const LandlockPrep* landlock = nullptr;
    const SeccompPrep* seccomp = nullptr;
    const HardeningPrep* hardening = nullptr;
    bool own_netns = true;
    bool memfd_noexec = true;
    int last_cap = 63;
    uid_t uid = 65534;
    gid_t gid = 65534;
    const char* hostname = "bulwark";
    struct Rl { int resource; rlim_t value; };
    Rl rlimits[8] = {};
    int n_rlimits = 0;
    const int* keep_fds = nullptr;
    size_t n_keep = 0;
    // Every descriptor the launch itself uses, ascending (the rest are the
    // daemon's, closed at once in the child).
    const int* own_fds = nullptr;
    size_t n_own = 0;
};

// ---- async-signal-safe helpers for the child ----
void copy_str(char* dst, size_t cap, const char* src) {
    size_t i = 0;
    if (src)
        for (; i + 1 < cap && src[i]; ++i) dst[i] = src[i];
    dst[i] = '\0';
}

[[noreturn]] void child_fail(int sock, uint32_t kind, int err, const char* step, const char* path, int code) {
    ChildMsg m;
    m.kind = kind;
    m.err = err;
    copy_str(m.step, sizeof m.step, step);
    copy_str(m.path, sizeof m.path, path);
    ssize_t n = ::write(sock, &m, sizeof m);
    (void)n;
    ::_exit(code);
}

// The child, between clone3 and execveat. Fixed order; each step must come
// after the ones whose privileges it removes.
[[noreturn]] void child_main(ChildCtx& c) {
    const int s = c.sock;
    // (c0) Nothing here may outlive the daemon. The parent-death signal
    //      first (SIGKILL reaches a pid namespace's init from the parent's
    //      namespace); then every descriptor the launch does not use is
    //      closed, so the daemon's store, BPF objects, API connections and
    //      other launches' sync sockets are not held open by this child. The
    //      parent's end of this launch's sync socket is among those closed:
    //      if the parent died before the signal was armed, the read below
    //      sees EOF and the child exits.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) ::_exit(kExitSetupFailed);
    {
        unsigned lo = 0;
        for (size_t i = 0; i < c.n_own; ++i) {
            const unsigned fd = static_cast<unsigned>(c.own_fds[i]);
            if (fd > lo && ::syscall(SYS_close_range, lo, fd - 1, 0u) != 0) ::_exit(kExitSetupFailed);
            lo = fd + 1;
        }
        if (::syscall(SYS_close_range, lo, ~0u, 0u) != 0) ::_exit(kExitSetupFailed);
    }
    // (c1) Wait until the parent has written the id maps and moved us into
    //      the v1 limit cgroups (EOF: the parent gave up or died; do nothing).
    char go = 0;
    if (::read(s, &go, 1) != 1 || go != 'G') ::_exit(kExitSetupFailed);
    // (c2) New session: no controlling terminal, so no TIOCSTI into the caller's.
    if (::setsid() < 0) child_fail(s, kMsgSetupFailed, errno, "setsid", "", kExitSetupFailed);
    // (c3) Default signal dispositions and an empty mask for the tool.
    for (int sig = 1; sig < NSIG; ++sig) {
        if (sig == SIGKILL || sig == SIGSTOP) continue;
        struct sigaction sa{};
        sa.sa_handler = SIG_DFL;
        ::sigaction(sig, &sa, nullptr);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // (c3b) No executable memfds in this pid namespace (before the fsuid
    //       change below: the sysctl file belongs to host root).
    if (c.memfd_noexec)
        if (int rc = pid_child_memfd_noexec(); rc != 0)
            child_fail(s, kMsgSetupFailed, -rc, "write(/proc/sys/vm/memfd_noexec, 2)", "", kExitSetupFailed);
    // (c4) Filesystem view (needs CAP_SYS_ADMIN in the new user namespace).
    //      Files it creates belong to the sandbox ids: the launcher's own
    //      (root) ids are not mapped in the namespace, and inodes cannot be
    //      created under an unmapped fsuid (EOVERFLOW).
    ::setfsgid(c.gid);
    ::setfsuid(c.uid);
    const char *fcall = "", *fpath = "";
    if (int rc = mounts_child_apply(*c.mounts, &fcall, &fpath); rc != 0)
        child_fail(s, kMsgSetupFailed, -rc, fcall, fpath, kExitSetupFailed);
    // (c5) Own network namespace: bring lo up (CAP_NET_ADMIN there).
    if (c.own_netns)
        if (int rc = net_child_loopback_up(); rc != 0)
            child_fail(s, kMsgSetupFailed, -rc, "ioctl(SIOCSIFFLAGS, lo up)", "", kExitSetupFailed);
    // (c6) Hostname of the UTS namespace.
    if (int rc = uts_child_set_hostname(c.hostname); rc != 0)
        child_fail(s, kMsgSetupFailed, -rc, "sethostname", c.hostname, kExitSetupFailed);
    // (c7) rlimits: CORE 0, NOFILE, FSIZE, NPROC (per user namespace).
    for (int i = 0; i < c.n_rlimits; ++i) {
        rlimit rl{c.rlimits[i].value, c.rlimits[i].value};
        if (::setrlimit(static_cast<__rlimit_resource>(c.rlimits[i].resource), &rl) != 0)
            child_fail(s, kMsgSetupFailed, errno, "setrlimit", "", kExitSetupFailed);
    }
    // (c8) stdio, then every other descriptor close-on-exec except the declared ones.
    if (::dup2(c.stdin_fd, 0) < 0 || ::dup2(c.stdout_fd, 1) < 0 || ::dup2(c.stderr_fd, 2) < 0)
        child_fail(s, kMsgSetupFailed, errno, "dup2(stdio)", "", kExitSetupFailed);
    if (::syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC) != 0)
        child_fail(s, kMsgSetupFailed, errno, "close_range(3, ~0, CLOSE_RANGE_CLOEXEC)", "", kExitSetupFailed);
    for (size_t i = 0; i < c.n_keep; ++i)
        if (::fcntl(c.keep_fds[i], F_SETFD, 0) != 0)
            child_fail(s, kMsgSetupFailed, errno, "fcntl(F_SETFD, 0) on a declared fd", "", kExitSetupFailed);
    // (c9) Credentials and capabilities: securebits locked, bounding and
    //      ambient emptied, unprivileged uid/gid without groups, capset 0,
    //      then no_new_privs.
    if (int rc = caps_child_drop(c.last_cap, c.uid, c.gid, &fcall); rc != 0)
        child_fail(s, kMsgSetupFailed, -rc, fcall, "", kExitSetupFailed);
    // (c10) Parent-death signal (set after the credential change, which clears it).
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
        child_fail(s, kMsgSetupFailed, errno, "prctl(PR_SET_PDEATHSIG)", "", kExitSetupFailed);
    // (c11) Speculation controls (kept across execve).
    if (int rc = hardening_child_apply(*c.hardening); rc != 0)
        child_fail(s, kMsgSetupFailed, -rc, "prctl(PR_SET_SPECULATION_CTRL)", "", kExitSetupFailed);
    // (c12) Landlock (needs no_new_privs).
    if (int rc = landlock_child_apply(*c.landlock); rc != 0)
        child_fail(s, kMsgSetupFailed, -rc, "landlock_restrict_self", "", kExitSetupFailed);
    // (c13) Seccomp last. From here on only write, read, execveat and
    //       exit_group run, so the filter must allow those (it does with
    //       every baseline; otherwise the launch fails, never runs weaker).
    if (int rc = seccomp_child_install(*c.seccomp); rc != 0)
        child_fail(s, kMsgSetupFailed, -rc, "seccomp(SECCOMP_SET_MODE_FILTER)", "", kExitSetupFailed);
    // (c14) Ready; the parent checks /proc/<pid>/status while we wait here.
    ChildMsg ready;
    ready.kind = kMsgReady;
    if (::write(s, &ready, sizeof ready) != static_cast<ssize_t>(sizeof ready)) ::_exit(kExitSetupFailed);
    if (::read(s, &go, 1) != 1 || go != 'X') ::_exit(kExitSetupFailed);
    // (c15) Execute the verified binary by descriptor (no path lookup).
    ::syscall(SYS_execveat, c.bin_fd, "", c.argv, c.envp, AT_EMPTY_PATH);
    child_fail(s, kMsgExecFailed, errno, "execveat(binary fd, AT_EMPTY_PATH)", c.argv[0], kExitExecFailed);
}

// ---- clone3 into the sandbox, sharing the address space until exec ----
// A fork-like clone3 copies the daemon's page tables and then pays a
// copy-on-write fault for every page either side writes until the child
// execs (~1-2 ms per spawn on a large daemon). With CLONE_VM the child runs
// on its own small stack in the daemon's memory instead, the way
// posix_spawn does, and gets a fresh address space at execveat. What makes
// that safe here:
//  - child_main only reads what the parent prepared, allocates nothing,
//    takes no lock, and makes credential changes with raw syscalls (glibc's
//    setxid broadcast would otherwise signal the daemon's threads);
//  - it shares the calling thread's TLS, so errno: the calling thread runs
//    with every signal blocked while the child is between clone3 and
//    execveat, and reads errno there only after the child has stopped (it
//    waits on the sync socket meanwhile);
//  - every signal is blocked across clone3, so no daemon handler runs in
//    the child before child_main resets dispositions (c3);
//  - the child's credential change makes the shared mm non-dumpable, which
//    is what it must be while an unprivileged-uid task shares it;
//  - the stack is unmapped only once the child has exec'd (EOF on the
//    close-on-exec sync socket: the new mm is in place by then) or died.
// Elsewhere than x86-64, and in sanitizer builds (whose runtime keeps
// per-thread state the child would share), the fork-like clone3 is used.
class ChildStack {
public:
    static constexpr size_t kSize = 256 << 10;
    ChildStack() {
        void* p = ::mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
                         -1, 0);
        if (p == MAP_FAILED) return;
        base_ = p;
        ::mprotect(base_, 4096, PROT_NONE);  // guard page below the stack
    }
    ~ChildStack() {
        if (base_) ::munmap(base_, kSize);
    }
    ChildStack(const ChildStack&) = delete;
    ChildStack& operator=(const ChildStack&) = delete;
    void* base() const { return base_; }

private:
    void* base_ = nullptr;
};

// Every signal blocked on the calling thread, until restore() or scope end.
class SignalsBlocked {
public:
    SignalsBlocked() {
        sigset_t all;
        sigfillset(&all);
        ::pthread_sigmask(SIG_SETMASK, &all, &saved_);
    }
    ~SignalsBlocked() { restore(); }
    SignalsBlocked(const SignalsBlocked&) = delete;
    SignalsBlocked& operator=(const SignalsBlocked&) = delete;
    void restore() {
        if (active_) ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
        active_ = false;
    }

private:
    sigset_t saved_{};
    bool active_ = true;
};

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define BULWARK_CLONE_SHARES_VM 1
#else
#define BULWARK_CLONE_SHARES_VM 0
#endif

#if BULWARK_CLONE_SHARES_VM
// clone3 whose child calls fn(arg) on the stack named in ca (never returns
// there); the parent gets the pid or -errno.
[[gnu::noinline]] long clone3_call(clone_args* ca, void (*fn)(void*), void* arg) {
    long ret;
    register void* r12 asm("r12") = reinterpret_cast<void*>(fn);
    register void* r13 asm("r13") = arg;
    asm volatile(
        "syscall\n\t"
        "test %%rax, %%rax\n\t"
        "jnz 1f\n\t"
        "xor %%ebp, %%ebp\n\t"
        "mov %%r13, %%rdi\n\t"
        "call *%%r12\n\t"
        "mov $231, %%eax\n\t"  // exit_group(127) should fn ever return
        "mov $127, %%edi\n\t"
        "syscall\n\t"
        "1:\n\t"
        : "=a"(ret)
        : "a"(static_cast<long>(SYS_clone3)), "D"(ca), "S"(sizeof *ca), "r"(r12), "r"(r13)
        : "rcx", "r11", "memory", "cc");
    return ret;
}
#endif

// Leaves the run could not remove: in the report, said as a warning.
void note_cgroups_left(RunReport& rep, const std::vector<CgroupLeft>& left) {
    for (const auto& l : left) {
        rep.cgroups_left.push_back({l.path, l.error});
        rep.warnings.push_back("cgroup: the run's cgroup " + l.path + " could not be removed: " + l.error +
                               "; it is empty of the run's processes and retried until it goes");
    }
}

// Resolves argv[0] to one of the policy's binaries; returns the opened,
// verified descriptor.
std::expected<std::pair<Fd, std::string>, std::string> open_policy_binary(const policy::Bundle& b,
                                                                          const std::string& arg0,
                                                                          LayerStatus& sup) {
    if (b.binaries.empty()) return std::unexpected("the policy lists no binaries; nothing may be started");
    std::string wanted = arg0;
    if (wanted.find('/') == std::string::npos) {
        for (const auto& bin : b.binaries) {
            auto slash = bin.path.rfind('/');
            if (bin.path.substr(slash + 1) == wanted) {
                wanted = bin.path;
                break;
            }
        }
        if (wanted.find('/') == std::string::npos)
            return std::unexpected("'" + arg0 + "' names none of the policy's binaries");
    }
    char real[PATH_MAX];
    if (!::realpath(wanted.c_str(), real)) return std::unexpected("realpath(" + wanted + "): " + errno_text(errno));
    const policy::Binary* match = nullptr;
    for (const auto& bin : b.binaries) {
        char r2[PATH_MAX];
        if (::realpath(bin.path.c_str(), r2) && std::strcmp(r2, real) == 0) {
            match = &bin;
            break;
        }
    }
    if (!match) return std::unexpected(std::string(real) + " is not one of the policy's binaries");
    int fd = ::open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return std::unexpected(std::string("open(") + real + "): " + errno_text(errno));
    Fd bin(fd);
    struct stat st{};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return std::unexpected(std::string(real) + ": not a regular file");
    if (st.st_mode & (S_ISUID | S_ISGID)) sup.dropped.push_back("setuid/setgid bit of the tool ignored (nosuid, no_new_privs)");
    std::string how = "binary " + std::string(real);
    if (match->sha256) {
        auto h = sha256_fd(fd);
        if (!h) return std::unexpected(h.error());
        if (*h != *match->sha256)
            return std::unexpected(std::string(real) + ": sha256 " + *h + " differs from the pinned " + *match->sha256);
        how += " sha256-pinned";
    }
    return std::pair{std::move(bin), how};
}

std::vector<std::string> build_env(const policy::EnvPlan& plan, const RunRequest& req) {
    std::map<std::string, std::string> caller;
    if (req.caller_env) {
        for (const auto& [k, v] : *req.caller_env) caller[k] = v;
    } else {
        for (char** e = environ; e && *e; ++e) {
            std::string kv = *e;
            auto eq = kv.find('=');
            if (eq != std::string::npos) caller[kv.substr(0, eq)] = kv.substr(eq + 1);
        }
    }
    std::map<std::string, std::string> env;
    if (!plan.clear_all) env = caller;
    for (const auto& name : plan.pass)
        if (auto it = caller.find(name); it != caller.end()) env[name] = it->second;
    for (const auto& [k, v] : plan.set) env[k] = v;
    std::vector<std::string> out;
    for (const auto& [k, v] : env) out.push_back(k + "=" + v);
    return out;
}

int dup_high(int fd) {
    // Keep our descriptors clear of 0..2 so the child's dup2 cannot clobber them.
    if (fd >= 3) return fd;
    int n = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
    ::close(fd);
    return n;
}

std::atomic<uint64_t> g_run_counter{0};

struct OutputSink {
    std::string* data;
    bool* truncated;
    bool open = true;
};

}  // namespace

std::expected<std::string, std::string> sha256_fd(int fd) {
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) return std::unexpected("EVP sha256 init failed");
    unsigned char buf[1 << 16];
    off_t off = 0;
    while (true) {
        ssize_t n = ::pread(fd, buf, sizeof buf, off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return std::unexpected("pread: " + errno_text(errno));
        }
        if (n == 0) break;
        off += n;
        if (EVP_DigestUpdate(ctx.get(), buf, n) != 1) return std::unexpected("EVP_DigestUpdate failed");
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    if (EVP_DigestFinal_ex(ctx.get(), md, &len) != 1) return std::unexpected("EVP_DigestFinal_ex failed");
    return to_hex(md, len);
}

std::string check_posture(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    if (!in) return "cannot read /proc/" + std::to_string(pid) + "/status";
    std::map<std::string, std::string> f;
    std::string line;
    while (std::getline(in, line)) {
        auto c = line.find(':');
        if (c == std::string::npos) continue;
        std::string v = line.substr(c + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        f[line.substr(0, c)] = v;
    }
    std::string bad;
    auto need = [&](const std::string& k, const std::string& want) {
        auto it = f.find(k);
        if (it == f.end()) bad += k + " missing; ";
        else if (it->second != want) bad += k + " is " + it->second + " (want " + want + "); ";
    };
    need("Seccomp", "2");
    need("NoNewPrivs", "1");
    for (const char* cap : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) need(cap, "0000000000000000");
    if (f.contains("Seccomp_filters") && std::atoi(f["Seccomp_filters"].c_str()) < 1) bad += "no seccomp filter; ";
    for (const char* ids : {"Uid", "Gid"}) {
        std::istringstream ss(f[ids]);
        long v;
        int n = 0;
        while (ss >> v) {
            ++n;
            if (v == 0) bad += std::string(ids) + " has 0; ";
        }
        if (n == 0) bad += std::string(ids) + " missing; ";
    }
    return bad;
}

namespace {

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
    in.mount = [&mounts](const policy::RuleCoverage& c) -> std::string {
        for (const auto& m : mounts.masks)
            if (m.rule_id == c.rule_id) return m.held ? "" : m.how;
        return "no mask was planned for this rule";
    };
    return in;
}

}  // namespace

// run_tool: the one function that orders the launch. Parent steps are
// numbered (p1..p14), child steps (c1..c15) are in child_main above.
RunReport run_tool(const policy::Bundle& bundle, const RunRequest& req) {
    RunReport rep;
    rep.tool = bundle.tool;
    rep.argv = req.argv;
    auto t0 = Clock::now();
    auto refuse = [&](std::string why) {
        rep.outcome = RunOutcome::Refused;
        rep.error = std::move(why);
        return rep;
    };
    auto setup_failed = [&](std::string why) {
        rep.outcome = RunOutcome::SetupFailed;
        rep.error = std::move(why);
        return rep;
    };
    if (req.argv.empty()) return refuse("no command given");

    LayerStatus sup{"supervisor", LayerState::Enforcing, "", {}};

    // (p1) The binary: resolved against the policy's list, opened once,
    //      content-pinned when the policy says so. The child executes this
    //      very descriptor.
    auto bin = open_policy_binary(bundle, req.argv[0], sup);
    if (!bin) return refuse(bin.error());
    Fd bin_fd = std::move(bin->first);
    sup.detail = bin->second + "; posture checked before exec";

    // (p2) Environment, then hardening (MTE via the tool's allocator
    //      tunables, ELF properties of the tool and its libraries).
    std::vector<std::string> env = build_env(bundle.env, req);
    std::string existing_tunables;
    for (const auto& kv : env)
        if (kv.starts_with("GLIBC_TUNABLES=")) existing_tunables = kv.substr(15);
    auto hard = prepare_hardening(bundle.hardening, bin_fd.get(), req.argv[0], existing_tunables,
                                  CpuFeatures::probe());
    if (!hard) return refuse(hard.error());
    rep.hardening = hard->in_force;
    for (const auto& w : hard->warnings) rep.warnings.push_back(w);
    if (!hard->glibc_tunables.empty()) {
        std::erase_if(env, [](const std::string& kv) { return kv.starts_with("GLIBC_TUNABLES="); });
        env.push_back("GLIBC_TUNABLES=" + hard->glibc_tunables);
    }

    // (p3) Seccomp program, compiled by policyc before we ever clone.
    auto sc = prepare_seccomp(bundle.seccomp);
    if (!sc) return refuse(sc.error());
    sc->finalize();

    // (p4) Landlock ruleset at the best ABI (dropped rights reported).
    char wd_real[PATH_MAX] = {};
    std::string wd_for_landlock =
        !req.workdir.empty() && ::realpath(req.workdir.c_str(), wd_real) ? std::string(wd_real) : std::string();
    auto ll = prepare_landlock(bundle.landlock, bin_fd.get(), wd_for_landlock, rep.warnings);
    if (!ll) return setup_failed(ll.error().message());

    // (p5) Network design. `none`/`loopback`: own netns with only lo.
    //      `network:` rules: the host netns, where the BPF loader's cgroup
    //      sock_addr programs (connect/sendmsg/bind on the run's cgroup)
    //      judge every address and Landlock judges TCP ports. Without the
    //      BPF binding nothing holds those rules: p7b refuses the tool, it is
    //      never run unconfined.
    bool own_netns = bundle.network.mode != policy::NetMode::Rules;

    // (p6) Ids and the workdir.
    std::string workdir;
    dev_t workdir_dev = 0;
    ino_t workdir_ino = 0;
    uid_t uid = 65534;
    gid_t gid = 65534;
    IdSource ids_from = IdSource::RootOwnedWorkdir;
    if (!req.workdir.empty()) {
        char real[PATH_MAX];
        struct stat st{};
        if (!::realpath(req.workdir.c_str(), real) || ::stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
            return refuse("workdir " + req.workdir + " is not an existing directory");
        workdir = real;
        workdir_dev = st.st_dev;
        workdir_ino = st.st_ino;
        if (st.st_uid != 0) {
            uid = st.st_uid;
            gid = st.st_gid;
            ids_from = IdSource::WorkdirOwner;
        }
    }
    if (req.uid) uid = *req.uid;
    if (req.gid) gid = *req.gid;
    if (req.uid || req.gid) ids_from = IdSource::Requested;
    if (uid == 0 || gid == 0) return refuse("the tool may not run as uid/gid 0");
    //      The tool must be able to enter the workdir as those ids (checked
    //      here so the refusal says what to do; the child's chdir is the
    //      backstop).
    if (!workdir.empty())
        if (std::string why = check_workdir_access(workdir, uid, gid, ids_from); !why.empty()) return refuse(why);

    // (p7) Mount plan (flat C strings for the child), with a mask for each
    //      deny below an allowed subtree.
    std::vector<policy::RuleCoverage> claims = policy::rule_coverage(bundle);
    MountPlan mounts = plan_mounts(bundle, workdir, deny_mask_requests(claims), uid, gid);
    for (const auto& n : mounts.notes) rep.warnings.push_back(n);
    struct ReleaseOnReturn {
        MountPlan& p;
        ~ReleaseOnReturn() { release_placeholders(p); }
    } release_masks{mounts};
    for (const auto& m : mounts.masks)
        if (m.created) rep.placeholders.push_back(m.placeholder);
    for (const auto& m : mounts.masks)
        if (!m.placeholder.empty())
            rep.warnings.push_back("mount: " + m.placeholder + " is absent, in a directory the tool may create in: "
                                   "an empty directory stands there for the run, masked, so that " +
                                   policy::describe_rule(bundle, m.rule_id) + " holds; it is removed afterwards");

    // (p7b) Per-rule coverage: every rule held by a layer in force here, or
    //       nothing runs (unless the rule says `unenforceable: run`).
    CoverageReport cov = judge_coverage(std::move(claims), layers_in_force(*ll, *sc, own_netns, req, mounts));
    rep.coverage = coverage_json(bundle, cov);
    rep.coverage_summary = coverage_summary(cov);
    for (size_t i : cov.gaps) rep.unenforced.push_back(describe_gap(bundle, cov.rules[i]));
    if (cov.launch_refused()) {
        rep.refusal_code = "rule_unenforced";
        return refuse(refusal_message(bundle, cov));
    }
    if (req.on_plan)
        if (std::string why = req.on_plan(rep); !why.empty()) return refuse(why);
    if (req.plan_only) {
        rep.layers = {ll->status, sc->status};
        return refuse("plan only: nothing was started");
    }

    // (p7c) The network namespace of a `none`/`loopback` tool (p5's design).
    std::optional<Fd> pooled_netns;
    if (own_netns && req.recycle_netns) {
        std::string err;
        pooled_netns = NetnsPool::instance().acquire(err);
        if (!pooled_netns) return setup_failed("network namespace pool: " + err);
    }
    rep.network = own_netns ? std::string(bundle.network.mode == policy::NetMode::None ? "none" : "loopback") +
                                  (pooled_netns ? ": a network namespace of its own with only lo (recycled from "
                                                  "the pool, owned by the host's user namespace)"
                                                : ": own network namespace with only lo")
                            : "rules: host network namespace, judged by cgroup sock_addr programs "
                              "and Landlock TCP port rules";

    // (p8) Per-run cgroups below our own: v2 leaf + v1 limit leaves. Once per
    //      process, leaves of a previous agentd that died are reaped first.
    static std::once_flag reaped;
    std::call_once(reaped, [&] { reap_stale_cgroups(req.cgroup_v2_parent); });
    std::string name = std::string(kRunCgroupPrefix) + std::to_string(::getpid()) + "-" + std::to_string(g_run_counter++) +
                       (req.cgroup_label.empty() ? "" : "-" + req.cgroup_label);
    CgroupLimits cl{bundle.limits.memory_bytes, bundle.limits.pids, bundle.limits.cpu_percent};
    auto cgx = SandboxCgroup::create(name, cl, req.cgroup_v2_parent);
    if (!cgx) return setup_failed("cgroup: " + cgx.error().message());
    SandboxCgroup cg = std::move(*cgx);

    // Layer summary known before launch.
    LayerStatus ns{"namespaces", LayerState::Enforcing,
                   std::string("user (uid ") + std::to_string(uid) + " mapped 1:1), pid, mount, ipc, uts, cgroup" +
                       (own_netns ? ", net" : "; host net (see network)") +
                       (memfd_noexec_supported() ? "; memfd_noexec=2" : ""),
                   {}};
    if (!memfd_noexec_supported())
        ns.dropped.push_back("vm.memfd_noexec (kernel < 6.3): executable memfds stay possible");
    LayerStatus cgl{"cgroup", LayerState::Enforcing, "v2 " + cg.v2_path(), {}};
    if (cl.memory_bytes) cgl.detail += "; memory " + std::to_string(*cl.memory_bytes);
    if (cl.pids) cgl.detail += "; pids " + std::to_string(*cl.pids);
    if (cl.cpu_percent) cgl.detail += "; cpu " + std::to_string(*cl.cpu_percent) + "%";
    rep.layers = {ns, cgl, ll->status, sc->status};

    // (p9) Pipes, the sync socket, stdin.
    int pfd[2], efd[2], sv[2];
    if (::pipe2(pfd, O_CLOEXEC) != 0 || ::pipe2(efd, O_CLOEXEC) != 0)
        return setup_failed("pipe2: " + errno_text(errno));
    Fd out_r(dup_high(pfd[0])), out_w(dup_high(pfd[1])), err_r(dup_high(efd[0])), err_w(dup_high(efd[1]));
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return setup_failed("socketpair: " + errno_text(errno));
    Fd sock_p(dup_high(sv[0])), sock_c(dup_high(sv[1]));
    Fd null_fd(dup_high(::open("/dev/null", O_RDONLY | O_CLOEXEC)));
    if (!null_fd || !out_r || !err_r || !sock_p) return setup_failed("descriptor setup: " + errno_text(errno));
    Fd in_r, in_w;
    if (req.stdin_data) {
        int ifd[2];
        if (::pipe2(ifd, O_CLOEXEC) != 0) return setup_failed("pipe2: " + errno_text(errno));
        in_r = Fd(dup_high(ifd[0]));
        in_w = Fd(dup_high(ifd[1]));
        if (!in_r || !in_w) return setup_failed("descriptor setup: " + errno_text(errno));
    }

    // rlimits, prepared here.
    ChildCtx c;
    auto add_rl = [&](int res, uint64_t v) {
        rlimit cur{};
        ::getrlimit(static_cast<__rlimit_resource>(res), &cur);
        rlim_t val = std::min<rlim_t>(v, cur.rlim_max);
        c.rlimits[c.n_rlimits++] = {res, val};
    };
    add_rl(RLIMIT_CORE, 0);
    add_rl(RLIMIT_NOFILE, bundle.limits.open_files.value_or(kDefaultOpenFiles));
    add_rl(RLIMIT_FSIZE, bundle.limits.file_size_bytes.value_or(kDefaultFileSizeBytes));
    // NPROC is counted per (user namespace, uid): per sandbox here.
    if (bundle.limits.pids) add_rl(RLIMIT_NPROC, *bundle.limits.pids);

    std::vector<std::string> argv_s = req.argv;
    std::vector<char*> argv_c, env_c;
    for (auto& a : argv_s) argv_c.push_back(a.data());
    argv_c.push_back(nullptr);
    for (auto& e : env) env_c.push_back(e.data());
    env_c.push_back(nullptr);

    c.sock = sock_c.get();
    c.stdin_fd = in_r ? in_r.get() : null_fd.get();
    c.stdout_fd = out_w.get();
    c.stderr_fd = err_w.get();
    c.bin_fd = bin_fd.get();
    c.argv = argv_c.data();
    c.envp = env_c.data();
    c.mounts = &mounts;
    c.landlock = &*ll;
    c.seccomp = &*sc;
    c.hardening = &*hard;
    c.own_netns = own_netns && !pooled_netns;  // a pooled netns has lo up already
    c.memfd_noexec = memfd_noexec_supported();
    c.last_cap = cap_last_cap();
    c.uid = uid;
    c.gid = gid;
    c.hostname = req.hostname.c_str();
    c.keep_fds = req.keep_fds.data();
    c.n_keep = req.keep_fds.size();
    std::vector<int> own_fds = {c.sock, c.stdin_fd, c.stdout_fd, c.stderr_fd, c.bin_fd};
    if (ll->ruleset) own_fds.push_back(ll->ruleset.get());
    own_fds.insert(own_fds.end(), req.keep_fds.begin(), req.keep_fds.end());
    std::erase_if(own_fds, [](int fd) { return fd < 0; });
    std::sort(own_fds.begin(), own_fds.end());
    own_fds.erase(std::unique(own_fds.begin(), own_fds.end()), own_fds.end());
    c.own_fds = own_fds.data();
    c.n_own = own_fds.size();

    // (p10) clone3 straight into the v2 leaf, in every new namespace.
    clone_args ca{};
    int pidfd_raw = -1;
    ca.flags = CLONE_PIDFD | CLONE_INTO_CGROUP | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC |
               CLONE_NEWUTS | CLONE_NEWCGROUP | (own_netns && !pooled_netns ? CLONE_NEWNET : 0);
    ca.pidfd = reinterpret_cast<uint64_t>(&pidfd_raw);
    ca.exit_signal = SIGCHLD;
    ca.cgroup = static_cast<uint64_t>(cg.v2_fd());
    // A pooled netns is entered by this thread just for the clone3, so the
    // child starts in it; the thread returns to its own right after.
    int own_net = -1;
    if (pooled_netns && !enter_thread_netns(pooled_netns->get(), own_net))
        return setup_failed("setns(pooled netns): " + errno_text(errno));
    std::optional<ChildStack> stack;  // lives until the child has exec'd or been reaped
    SignalsBlocked blocked;
    long pid;
    int clone_errno = 0;
#if BULWARK_CLONE_SHARES_VM
    if (stack.emplace(); stack->base()) {
        ca.flags |= CLONE_VM;
        ca.stack = reinterpret_cast<uint64_t>(stack->base());
        ca.stack_size = ChildStack::kSize;
        pid = clone3_call(&ca, [](void* p) { child_main(*static_cast<ChildCtx*>(p)); }, &c);
        if (pid < 0) clone_errno = static_cast<int>(-pid), pid = -1;
    } else
#endif
    {
        pid = ::syscall(SYS_clone3, &ca, sizeof ca);
        if (pid == 0) child_main(c);  // never returns
        clone_errno = errno;
    }
    if (pooled_netns) leave_thread_netns(own_net);
    if (pid < 0) return setup_failed("clone3(CLONE_INTO_CGROUP|CLONE_NEW*): " + errno_text(clone_errno));
    Fd pidfd(pidfd_raw);
    sock_c.reset();
    out_w.reset();
    err_w.reset();
    null_fd.reset();

    auto reap = [&](siginfo_t* si, rusage* ru) {
        siginfo_t tmp{};
        rusage rtmp{};
        while (::syscall(SYS_waitid, P_PIDFD, pidfd.get(), si ? si : &tmp, WEXITED, ru ? ru : &rtmp) < 0 &&
               errno == EINTR) {
        }
    };
    auto recycle = [&] {
        // Only once nothing of the run is left can its netns serve another.
        if (pooled_netns && cg.wait_empty(5000)) NetnsPool::instance().release(std::move(*pooled_netns));
        pooled_netns.reset();
    };
    auto abort_child = [&](RunOutcome o, std::string why) {
        ::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
        cg.kill_all();
        reap(nullptr, nullptr);
        recycle();
        note_cgroups_left(rep, cg.remove());
        rep.outcome = o;
        rep.error = std::move(why);
        rep.usage.wall_us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
        return rep;
    };
    // Reads one child message (or EOF) within the setup deadline.
    auto read_msg = [&](ChildMsg& m) -> int {  // 1 message, 0 EOF, -1 timeout/error
        pollfd p{sock_p.get(), POLLIN, 0};
        if (::poll(&p, 1, kSetupTimeoutMs) <= 0) return -1;
        ssize_t n = ::read(sock_p.get(), &m, sizeof m);
        if (n == 0) return 0;
        return n == static_cast<ssize_t>(sizeof m) ? 1 : -1;
    };
    auto describe = [](const ChildMsg& m) {
        std::string s = std::string(m.step);
        if (m.path[0]) s += " " + std::string(m.path);
        return s + ": " + errno_text(m.err);
    };

    // (p11) Parent side of the namespaces and cgroups, before the child moves:
    //       v1 limit leaves, uid/gid maps, the BPF policy binding.
    if (req.on_cgroup) req.on_cgroup(cg.v2_path(), static_cast<pid_t>(pid));
    if (auto r = cg.add_v1(static_cast<pid_t>(pid)); !r)
        return abort_child(RunOutcome::SetupFailed, "cgroup v1: " + r.error().message());
    if (auto r = write_id_maps(static_cast<pid_t>(pid), uid, gid); !r)
        return abort_child(RunOutcome::SetupFailed, "user namespace: " + r.error().message());
    if (req.attach_bpf) {
        auto r = req.attach_bpf(cg.v2_fd(), cg.v2_path());
        if (!r) {
            rep.refusal_code = "bpf_binding";
            return abort_child(RunOutcome::SetupFailed, "BPF policy binding: " + r.error());
        }
        rep.layers.push_back({"bpf", LayerState::Enforcing, *r, {}});
    } else {
        rep.layers.push_back({"bpf", LayerState::Unavailable,
                              req.bpf_unavailable.empty()
                                  ? "no BPF policy binding in this run (cgroup sock_addr / BPF LSM not attached)"
                                  : req.bpf_unavailable,
                              {}});
    }
    // Mandatory layers must be enforcing, or nothing runs.
    for (const auto& m : bundle.mandatory_layers) {
        const LayerStatus* l = rep.layer(m == "bpf-lsm" || m == "bpf_lsm" ? "bpf" : m);
        if (!l || l->state != LayerState::Enforcing)
            return abort_child(RunOutcome::Refused, "mandatory layer " + m + " is not enforcing" +
                                                        (l ? ": " + l->detail : ""));
    }
    if (::write(sock_p.get(), "G", 1) != 1) return abort_child(RunOutcome::SetupFailed, "sync write: " + errno_text(errno));

    // (p12) The child builds its sandbox; it reports a failure or "ready".
    ChildMsg msg;
    int got = read_msg(msg);
    if (got != 1 || msg.kind != kMsgReady) {
        bool workdir_denied = got == 1 && std::string_view(msg.step) == "chdir" && msg.path == workdir &&
                              (msg.err == EACCES || msg.err == EPERM);
        std::string why = workdir_denied ? workdir_denied_message(workdir, uid, gid, ids_from, msg.err)
                          : got == 1     ? describe(msg)
                                   : got == 0 ? "the sandbox child died during setup (a seccomp policy must allow "
                                                "read, write and execveat)"
                                              : "the sandbox child did not become ready in time";
        return abort_child(RunOutcome::SetupFailed, "sandbox setup: " + why);
    }

    // (p13) Posture, read from outside while the child waits before exec.
    if (std::string bad = check_posture(static_cast<pid_t>(pid)); !bad.empty()) {
        rep.denials.push_back("supervisor: posture check failed: " + bad);
        return abort_child(RunOutcome::SetupFailed, "posture check failed: " + bad);
    }
    rep.layers.push_back(sup);
    if (req.before_exec)
        if (std::string why = req.before_exec(); !why.empty()) return abort_child(RunOutcome::Refused, why);
    if (::write(sock_p.get(), "X", 1) != 1) return abort_child(RunOutcome::SetupFailed, "sync write: " + errno_text(errno));
    got = read_msg(msg);
    if (got == 1) {
        rep.denials.push_back("exec: " + describe(msg));
        auto r = abort_child(RunOutcome::ExecFailed, "exec failed: " + describe(msg));
        return r;
    }
    if (got < 0) return abort_child(RunOutcome::SetupFailed, "no exec confirmation from the sandbox child");
    sock_p.reset();
    in_r.reset();
    blocked.restore();  // the child has its own address space now
    auto t_exec = Clock::now();

    // (p14) Supervise: outputs (bounded), exit via pidfd, wall-clock timeout
    //       -> cgroup.kill (takes double-forked orphans too).
    const uint64_t out_limit = bundle.limits.output_bytes.value_or(kDefaultOutputBytes);
    uint64_t captured = 0;
    ::fcntl(out_r.get(), F_SETFL, O_NONBLOCK);
    ::fcntl(err_r.get(), F_SETFL, O_NONBLOCK);
    OutputSink sinks[2] = {{&rep.stdout_data, &rep.stdout_truncated}, {&rep.stderr_data, &rep.stderr_truncated}};
    Fd* pipes[2] = {&out_r, &err_r};
    bool exited = false;
    siginfo_t si{};
    rusage ru{};
    std::optional<Clock::time_point> deadline;
    if (bundle.limits.timeout_ms) deadline = t_exec + std::chrono::milliseconds(*bundle.limits.timeout_ms);
    std::optional<Clock::time_point> drain_deadline;
    // stdin: fed from the poll loop, closed when written (or when the tool
    // stops reading: EPIPE).
    std::string_view in_left = req.stdin_data ? std::string_view(*req.stdin_data) : std::string_view();
    if (in_w) {
        ::fcntl(in_w.get(), F_SETFL, O_NONBLOCK);
        if (in_left.empty()) in_w.reset();
    }
    bool cancelled = false;
    while (!exited || sinks[0].open || sinks[1].open) {
        pollfd p[5];
        int np = 0;
        int idx[5];
        if (!exited) {
            p[np] = {pidfd.get(), POLLIN, 0};
            idx[np++] = -1;
        }
        if (in_w && !exited) {
            p[np] = {in_w.get(), POLLOUT, 0};
            idx[np++] = -2;
        }
        if (req.cancel_fd >= 0 && !cancelled && !exited) {
            p[np] = {req.cancel_fd, POLLIN, 0};
            idx[np++] = -3;
        }
        for (int i = 0; i < 2; ++i)
            if (sinks[i].open) {
                p[np] = {pipes[i]->get(), POLLIN, 0};
                idx[np++] = i;
            }
        int timeout = -1;
        auto now = Clock::now();
        auto limit_tp = exited ? drain_deadline : deadline;
        if (limit_tp) {
            timeout = static_cast<int>(std::max<int64_t>(
                0, std::chrono::duration_cast<std::chrono::milliseconds>(*limit_tp - now).count() + 1));
        }
        int rc = ::poll(p, np, timeout);
        if (rc < 0 && errno == EINTR) continue;
        if (rc == 0) {
            if (!exited && !rep.timed_out) {
                rep.timed_out = true;
                rep.denials.push_back("cgroup: wall-clock timeout of " + std::to_string(*bundle.limits.timeout_ms) +
                                      " ms reached; every process of the run killed (cgroup.kill)");
                cg.kill_all();
                deadline.reset();
            } else if (exited) {
                // Output still held open after the tool ended: end it.
                cg.kill_all();
                for (auto& s : sinks) s.open = false;
            }
            continue;
        }
        for (int k = 0; k < np; ++k) {
            if (!p[k].revents) continue;
            if (idx[k] == -2) {
                ssize_t n = ::write(in_w.get(), in_left.data(), in_left.size());
                if (n > 0) in_left.remove_prefix(static_cast<size_t>(n));
                if ((n < 0 && errno != EAGAIN && errno != EINTR) || in_left.empty() || (p[k].revents & POLLERR))
                    in_w.reset();
                continue;
            }
            if (idx[k] == -3) {
                cancelled = true;
                rep.denials.push_back("supervisor: run cancelled (its task was closed or its caller cancelled "
                                      "it); every process of the run "
                                      "killed (cgroup.kill)");
                cg.kill_all();
                continue;
            }
            if (idx[k] == -1) {
                reap(&si, &ru);
                exited = true;
                // The tool was pid 1 of its namespace: everything else in it is
                // gone with it. Kill the cgroup anyway, then drain the pipes.
                cg.kill_all();
                drain_deadline = Clock::now() + std::chrono::seconds(2);
                continue;
            }
            auto& s = sinks[idx[k]];
            char buf[65536];
            while (true) {
                ssize_t n = ::read(pipes[idx[k]]->get(), buf, sizeof buf);
                if (n > 0) {
                    uint64_t room = out_limit > captured ? out_limit - captured : 0;
                    uint64_t take = std::min<uint64_t>(room, static_cast<uint64_t>(n));
                    s.data->append(buf, take);
                    captured += take;
                    if (take && req.on_output) req.on_output(idx[k] + 1, std::string_view(buf, take));
                    if (take < static_cast<uint64_t>(n)) *s.truncated = true;
                    continue;
                }
                if (n == 0) s.open = false;
                break;
            }
        }
    }
    rep.usage.wall_us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t_exec).count();
    if (si.si_code == CLD_EXITED) {
        rep.outcome = RunOutcome::Exited;
        rep.exit_code = si.si_status;
    } else {
        rep.outcome = RunOutcome::Signaled;
        rep.signal = si.si_status;
    }
    if (rep.stdout_truncated || rep.stderr_truncated)
        rep.denials.push_back("supervisor: output beyond " + std::to_string(out_limit) + " bytes discarded");

    // Usage, OOM, limit hits.
    if (cg.cpu_usage(rep.usage.cpu_user_us, rep.usage.cpu_system_us)) {
        rep.usage.source = "cgroup v2 cpu.stat";
    } else {
        rep.usage.cpu_user_us = ru.ru_utime.tv_sec * 1000000ull + ru.ru_utime.tv_usec;
        rep.usage.cpu_system_us = ru.ru_stime.tv_sec * 1000000ull + ru.ru_stime.tv_usec;
        rep.usage.source = "rusage";
    }
    if (cg.has_memory()) {
        rep.usage.peak_memory_bytes = cg.peak_memory();
        rep.usage.source += ", memory.max_usage_in_bytes";
    } else {
        rep.usage.peak_memory_bytes = static_cast<uint64_t>(ru.ru_maxrss) * 1024;
        rep.usage.source += ", ru_maxrss";
    }
    if (uint64_t n = cg.oom_kills(); n > 0) {
        rep.oom_killed = true;
        rep.denials.push_back("cgroup: memory limit reached; " + std::to_string(n) + " process(es) OOM-killed");
    }
    if (uint64_t n = cg.pids_max_hits(); n > 0)
        rep.denials.push_back("cgroup: pids limit refused " + std::to_string(n) + " fork(s)");

    // Nothing left behind.
    cg.kill_all();
    if (!cg.wait_empty(5000)) rep.warnings.push_back("cgroup " + cg.v2_path() + " still populated after kill");
    recycle();
    note_cgroups_left(rep, cg.remove());
    // The work directory may have gone while the tool ran (removed or moved
    // away from under it): what the tool wrote there went with it.
    if (!workdir.empty()) {
        struct stat now{};
        bool gone = ::lstat(workdir.c_str(), &now) != 0;
        if (gone || now.st_dev != workdir_dev || now.st_ino != workdir_ino) {
            rep.workdir_vanished = true;
            rep.warnings.push_back("workdir: " + workdir + " vanished during the run (" +
                                   (gone ? "removed or moved away" : "another file stands there now") +
                                   "); what the tool wrote there is not there");
        }
    }
    return rep;
}

}  // namespace bulwark
