#include "sandbox/launch_child.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/fsuid.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "common/sys_error.h"
#include "sandbox/caps.h"
#include "sandbox/ns_net.h"
#include "sandbox/ns_pid.h"
#include "sandbox/ns_uts.h"
#include "sandbox/run_report.h"

namespace bulwark {
namespace {

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

}  // namespace

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
ChildStack::ChildStack() {
    void* p = ::mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
                     -1, 0);
    if (p == MAP_FAILED) return;
    base_ = p;
    ::mprotect(base_, 4096, PROT_NONE);  // guard page below the stack
}

ChildStack::~ChildStack() {
    if (base_) ::munmap(base_, kSize);
}

SignalsBlocked::SignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &saved_);
}

void SignalsBlocked::restore() {
    if (active_) ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
    active_ = false;
}

namespace {

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

}  // namespace

std::expected<pid_t, int> clone_sandbox_child(clone_args& ca, ChildCtx& c, std::optional<ChildStack>& stack) {
#if BULWARK_CLONE_SHARES_VM
    if (stack.emplace(); stack->base()) {
        ca.flags |= CLONE_VM;
        ca.stack = reinterpret_cast<uint64_t>(stack->base());
        ca.stack_size = ChildStack::kSize;
        long pid = clone3_call(&ca, [](void* p) { child_main(*static_cast<ChildCtx*>(p)); }, &c);
        if (pid < 0) return std::unexpected(static_cast<int>(-pid));
        return static_cast<pid_t>(pid);
    }
#else
    (void)stack;
#endif
    long pid = ::syscall(SYS_clone3, &ca, sizeof ca);
    if (pid == 0) child_main(c);  // never returns
    if (pid < 0) return std::unexpected(errno);
    return static_cast<pid_t>(pid);
}

int run_canary_child(void (*fn)(void*), void* arg) {
    SignalsBlocked blocked;
    long pid = -1;
#if BULWARK_CLONE_SHARES_VM
    ChildStack stack;
    if (stack.base()) {
        clone_args ca{};
        ca.exit_signal = SIGCHLD;
        ca.flags = CLONE_VM | CLONE_VFORK;
        ca.stack = reinterpret_cast<uint64_t>(stack.base());
        ca.stack_size = ChildStack::kSize;
        pid = clone3_call(&ca, fn, arg);
        // A seccomp filter of the caller's (a container engine's default
        // profile answers clone3 with ENOSYS) leaves the plain fork below.
        if (pid < 0 && pid != -ENOSYS && pid != -EPERM) return static_cast<int>(pid);
    }
#endif
    if (pid < 0) {
        pid = ::fork();
        if (pid == 0) {
            fn(arg);
            ::_exit(127);
        }
        if (pid < 0) return -errno;
    }
    int st = 0;
    while (::waitpid(static_cast<pid_t>(pid), &st, 0) < 0)
        if (errno != EINTR) return -errno;
    return st;
}

ChildReply read_child_msg(int sock, ChildMsg& m, int timeout_ms) {
    pollfd p{sock, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return ChildReply::Silent;
    ssize_t n = ::read(sock, &m, sizeof m);
    if (n == 0) return ChildReply::Eof;
    return n == static_cast<ssize_t>(sizeof m) ? ChildReply::Message : ChildReply::Silent;
}

std::string describe_child_msg(const ChildMsg& m) {
    std::string s = std::string(m.step);
    if (m.path[0]) s += " " + std::string(m.path);
    return s + ": " + errno_text(m.err);
}

}  // namespace bulwark
