#include "spawn_fixture.h"

#include <dirent.h>
#include <fcntl.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sched.h>
#include <sys/socket.h>
#include <stdexcept>

#include "sandbox/cgroup.h"
#include "sandbox/landlock.h"

namespace bulwark::test {
namespace {

const std::vector<std::string> kAllowed = {
    // Roughly Docker's default profile minus what the escape battery probes.
    "accept", "accept4", "access", "alarm", "arch_prctl", "bind", "brk", "capget", "chdir", "chmod",
    "chown", "clock_getres", "clock_gettime", "clock_nanosleep", "close", "close_range", "connect",
    "copy_file_range", "creat", "dup", "dup2", "dup3", "epoll_create", "epoll_create1", "epoll_ctl",
    "epoll_pwait", "epoll_wait", "eventfd", "eventfd2", "execve", "execveat", "exit", "exit_group",
    "faccessat", "faccessat2", "fadvise64", "fallocate", "fchdir", "fchmod", "fchmodat", "fchown",
    "fchownat", "fcntl", "fdatasync", "flock", "fork", "fstat", "fstatfs", "fsync", "ftruncate",
    "futex", "getcwd", "getdents", "getdents64", "getegid", "geteuid", "getgid", "getgroups",
    "getitimer", "getpeername", "getpgid", "getpgrp", "getpid", "getppid", "getpriority", "getrandom",
    "getresgid", "getresuid", "getrlimit", "getrusage", "getsid", "getsockname", "getsockopt",
    "gettid", "gettimeofday", "getuid", "getxattr", "ioctl", "kill", "lchown", "lgetxattr", "link",
    "linkat", "listen", "lseek", "lstat", "madvise", "membarrier", "memfd_create", "mincore", "mkdir",
    "mkdirat", "mknod", "mknodat", "mlock", "mmap", "mprotect", "mremap", "msync", "munmap",
    "nanosleep", "newfstatat", "open", "openat", "openat2", "pause", "pipe", "pipe2", "poll", "ppoll",
    "prctl", "pread64", "preadv", "preadv2", "prlimit64", "pselect6", "pwrite64", "pwritev",
    "pwritev2", "read", "readlink", "readlinkat", "readv", "recvfrom", "recvmmsg", "recvmsg", "rename",
    "renameat", "renameat2", "restart_syscall", "rmdir", "rseq", "rt_sigaction", "rt_sigpending",
    "rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
    "rt_tgsigqueueinfo", "sched_getaffinity", "sched_getparam", "sched_getscheduler", "sched_yield",
    "select", "sendfile", "sendmmsg", "sendmsg", "sendto", "set_robust_list", "set_tid_address",
    "setitimer", "setpgid", "setsid", "setsockopt", "shutdown", "sigaltstack", "socket", "socketpair",
    "stat", "statfs", "statx", "symlink", "symlinkat", "sysinfo", "tgkill", "time", "timer_create",
    "timer_delete", "timer_getoverrun", "timer_gettime", "timer_settime", "timerfd_create",
    "timerfd_gettime", "timerfd_settime", "tkill", "truncate", "umask", "uname", "unlink", "unlinkat",
    "utime", "utimensat", "utimes", "vfork", "wait4", "waitid", "write", "writev", "pidfd_open",
    "pidfd_send_signal", "get_robust_list", "getcpu", "sched_setaffinity", "shmget", "shmat",
    "shmdt", "shmctl", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semctl",
    "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "setfsuid",
    "setfsgid", "capset",
};

std::vector<sock_filter> export_filter(scmp_filter_ctx ctx) {
    int fd = memfd_create("seccomp", MFD_CLOEXEC);
    if (seccomp_export_bpf(ctx, fd) != 0) throw std::runtime_error("seccomp_export_bpf");
    seccomp_release(ctx);
    off_t size = lseek(fd, 0, SEEK_END);
    std::vector<sock_filter> prog(size / sizeof(sock_filter));
    if (pread(fd, prog.data(), size, 0) != size) throw std::runtime_error("read filter");
    close(fd);
    return prog;
}

std::vector<sock_filter> allow_all_filter() {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) throw std::runtime_error("seccomp_init");
    return export_filter(ctx);
}

std::vector<sock_filter> build_filter(const BundleOptions& o) {
    if (o.seccomp_allow_all) return allow_all_filter();
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
    if (!ctx) throw std::runtime_error("seccomp_init");
    for (const auto& n : kAllowed) {
        bool denied = false;
        for (const auto& d : o.extra_denied_syscalls) denied |= d == n;
        if (denied || n == "chmod" || n == "fchmod" || n == "fchmodat" || n == "socket") continue;
        int nr = seccomp_syscall_resolve_name(n.c_str());
        if (nr == __NR_SCMP_ERROR) continue;
        if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0) != 0) throw std::runtime_error("rule " + n);
    }
    // clone only without namespace flags (clone3 stays ENOSYS: its flags are
    // behind a pointer seccomp cannot read; libc falls back to clone).
    const uint64_t ns = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |
                        CLONE_NEWNET | CLONE_NEWCGROUP;
    seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, ns, 0));
    // socket: unix, inet, inet6, and netlink route only (what the policy's
    // families would emit).
    for (scmp_datum_t fam : {AF_UNIX, AF_INET, AF_INET6})
        seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, fam));
    seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2, SCMP_A0(SCMP_CMP_EQ, AF_NETLINK),
                     SCMP_A2(SCMP_CMP_EQ, 0));
    // chmod family only without setuid/setgid bits (no u+s on outputs).
    seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(chmod), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, 06000, 0));
    seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(fchmod), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, 06000, 0));
    seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(fchmodat), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, 06000, 0));
    return export_filter(ctx);
}

}  // namespace

const std::vector<std::string>& fixture_allowed_syscalls() { return kAllowed; }

policy::Bundle without_layers(policy::Bundle b, bool seccomp_off, bool landlock_off) {
    if (seccomp_off) {
        b.seccomp.program = allow_all_filter();
        b.seccomp.baseline = "allow-all (layer switched off for a per-layer proof)";
    }
    if (landlock_off) b.landlock = {};
    // Every rule id the bundle names gets an entry (the fixture's bundles
    // carry ids without source rules), all marked `unenforceable: run`.
    uint32_t max_id = 0;
    for (const auto& f : b.files) max_id = std::max(max_id, f.rule_id);
    for (const auto& p : b.landlock.paths) max_id = std::max(max_id, p.rule_id);
    for (const auto& p : b.landlock.ports) max_id = std::max(max_id, p.rule_id);
    for (const auto& r : b.network.rules) max_id = std::max(max_id, r.rule_id);
    for (const auto& [name, id] : b.seccomp.syscall_rules) max_id = std::max(max_id, id);
    for (uint32_t id = static_cast<uint32_t>(b.rules.size()); id <= max_id; ++id) {
        policy::RuleRef r;
        r.id = id;
        r.loc = {"test-fixture", id, 1};
        r.section = "files";
        r.text = "files.all: (test fixture rule " + std::to_string(id) + ")";
        b.rules.push_back(r);
    }
    for (auto& r : b.rules) r.unenforceable_run = true;
    return b;
}

policy::Bundle make_bundle(const BundleOptions& o) {
    policy::Bundle b;
    b.tool = "fixture";
    for (const auto& p : o.binaries) b.binaries.push_back({p, std::nullopt, 0});
    b.network.mode = policy::NetMode::None;
    if (o.seccomp) {
        b.seccomp.program = build_filter(o);
        b.seccomp.baseline = "test allow-list";
        b.seccomp.default_errno = ENOSYS;
    }
    if (o.landlock) {
        auto& l = b.landlock;
        l.handled_fs = ll::fs_rights_for_abi(7);
        l.handled_net = ll::kBindTcp | ll::kConnectTcp;
        l.scoped = ll::kScopeAbstractUnix | ll::kScopeSignal;
        const uint64_t rx = ll::kExecute | ll::kReadFile | ll::kReadDir;
        l.paths.push_back({"/usr", rx, 1});
        l.paths.push_back({"/etc", ll::kReadFile | ll::kReadDir, 2});
        if (!o.workdir.empty())
            l.paths.push_back({o.workdir, ll::fs_rights_for_abi(7) & ~(ll::kExecute | ll::kMakeChar | ll::kMakeBlock), 3});
    }
    if (!o.workdir.empty()) b.files.push_back({o.workdir, BW_FS_ALL, 0, 3});
    return b;
}

std::string make_workdir(const char* tag) {
    // Not below /tmp: the sandbox's private /tmp would then lose its Landlock grant.
    std::string t = std::string("/var/tmp/bulwark-test-") + tag + "-XXXXXX";
    if (!mkdtemp(t.data())) throw std::runtime_error("mkdtemp");
    if (chown(t.c_str(), 65534, 65534) != 0) throw std::runtime_error("chown");
    return t;
}

std::string run_unconfined(const std::string& binary, const std::vector<std::string>& args, const std::string& cwd) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error("pipe2");
    pid_t c = fork();
    if (c == 0) {
        dup2(p[1], 1);
        if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(99);
        std::vector<char*> av{const_cast<char*>(binary.c_str())};
        for (const auto& a : args) av.push_back(const_cast<char*>(a.c_str()));
        av.push_back(nullptr);
        execv(binary.c_str(), av.data());
        _exit(98);
    }
    close(p[1]);
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = read(p[0], buf, sizeof buf)) > 0) out.append(buf, n);
    close(p[0]);
    waitpid(c, nullptr, 0);
    return out;
}

void remove_tree(const std::string& dir) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}

int leftover_cgroups() {
    std::string prefix = std::string(kRunCgroupPrefix) + std::to_string(getpid()) + "-";
    int n = 0;
    for (const char* ctrl : {"", "memory", "pids", "cpu", "cpuacct"}) {
        std::string mnt = cgroup_mount(ctrl), own = own_cgroup(ctrl);
        if (mnt.empty()) continue;
        std::string dir = mnt + (own == "/" ? "" : own);
        if (DIR* d = opendir(dir.c_str())) {
            while (auto* e = readdir(d))
                if (std::string(e->d_name).starts_with(prefix)) ++n;
            closedir(d);
        }
    }
    return n;
}

int open_fds() {
    int n = 0;
    if (DIR* d = opendir("/proc/self/fd")) {
        while (auto* e = readdir(d))
            if (e->d_name[0] != '.') ++n;
        closedir(d);
    }
    return n;
}

}  // namespace bulwark::test
