// Compiled filters installed for real: each case forks a child, sets
// no_new_privs, installs the program with seccomp(SECCOMP_SET_MODE_FILTER)
// and fires syscalls; the same call in an unfiltered child is the control.
#include <catch2/catch.hpp>

#include <asm/unistd_64.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <functional>

#include "bulwark/policy/cbpf.h"
#include "bulwark/policy/seccomp.h"

using namespace bulwark::policy;

namespace {

// errno values no kernel path returns for these calls, so a test can tell
// that seccomp answered.
constexpr uint16_t kViolationErrno = EHWPOISON;
constexpr uint16_t kDenyErrno = ENOTRECOVERABLE;

int install(const std::vector<sock_filter>& prog) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
    sock_fprog fp{static_cast<unsigned short>(prog.size()), const_cast<sock_filter*>(prog.data())};
    if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) != 0) return errno;
    return 0;
}

struct Outcome {
    bool exited = false;
    int code = -1;    // exit code
    int signal = 0;   // terminating signal
};

// Runs fn in a forked child (restrictions never leak into the test process).
// fn returns 0 on success or a small failure code; prog, if given, is
// installed first.
Outcome in_child(const std::vector<sock_filter>* prog, const std::function<int()>& fn) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        // Catch's fatal-signal handlers must not report from the child.
        for (int sig : {SIGSEGV, SIGSYS, SIGILL, SIGBUS, SIGABRT, SIGFPE}) signal(sig, SIG_DFL);
        if (prog && install(*prog) != 0) _exit(100);
        _exit(fn());
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    Outcome o;
    if (WIFEXITED(status)) { o.exited = true; o.code = WEXITSTATUS(status); }
    if (WIFSIGNALED(status)) o.signal = WTERMSIG(status);
    return o;
}

// 0 when syscall(nr, args...) fails with want_errno, otherwise the errno
// seen (or 250 for success).
int expect_errno(long r, int want) {
    if (r != -1) return 250;
    return errno == want ? 0 : (errno & 0xff ? errno & 0xff : 251);
}

SeccompPlan compiled(SeccompSpec spec) {
    auto plan = compile_seccomp(spec);
    INFO((plan ? "" : plan.error().message));
    REQUIRE(plan);
    return *plan;
}

SeccompSpec tool_spec() {
    SeccompSpec spec;  // Docker default baseline
    spec.violation_errno = kViolationErrno;
    spec.deny = {
        SyscallRule{"getcwd", {}, SeccompAction::Errno, kDenyErrno, 11},
        SyscallRule{"kcmp", {}, SeccompAction::Kill, 0, 12},
        SyscallRule{"uname", {{0, SyscallArgCond::Op::Eq, 0, 0}}, SeccompAction::Errno, kDenyErrno, 13},
    };
    return spec;
}

// i386 syscall through int 0x80 from this 64-bit process (the kernel reports
// AUDIT_ARCH_I386 for it when IA32 emulation is built in).
long int80(long nr, long a = 0, long b = 0) {
    long ret;
    asm volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b) : "memory", "r8", "r9", "r10", "r11");
    return ret;
}

}  // namespace

TEST_CASE("allowed calls work and denied calls fail with the rule's errno", "[seccomp][install]") {
    const auto plan = compiled(tool_spec());
    char buf[256];
    auto getcwd_call = [&] { return syscall(__NR_getcwd, buf, sizeof buf); };
    // Control: unfiltered, getcwd works.
    CHECK(in_child(nullptr, [&] { return getcwd_call() > 0 ? 0 : 1; }).code == 0);
    // Filtered: getpid works, getcwd is refused with the deny rule's errno.
    auto o = in_child(&plan.program, [&] {
        if (syscall(__NR_getpid) != getpid()) return 1;
        if (write(STDERR_FILENO, "", 0) != 0) return 2;
        return expect_errno(getcwd_call(), kDenyErrno);
    });
    CHECK(o.exited);
    CHECK(o.code == 0);
    // A conditional deny: uname(NULL) is refused by the rule, uname(buf) allowed.
    o = in_child(&plan.program, [&] {
        if (int e = expect_errno(syscall(__NR_uname, 0), kDenyErrno)) return e;
        return syscall(__NR_uname, buf) == 0 ? 0 : 3;
    });
    CHECK(o.code == 0);
}

TEST_CASE("a kill rule kills the process with SIGSYS", "[seccomp][install]") {
    const auto plan = compiled(tool_spec());
    auto o = in_child(&plan.program, [] {
        syscall(__NR_kcmp, getpid(), getpid(), 0, 0, 0);
        return 0;
    });
    CHECK_FALSE(o.exited);
    CHECK(o.signal == SIGSYS);
}

TEST_CASE("clone3 gets ENOSYS so libc falls back to clone", "[seccomp][install]") {
    const auto plan = compiled(tool_spec());
    // Control: unfiltered clone3 with a NULL struct is EFAULT/EINVAL, not ENOSYS.
    auto ctl = in_child(nullptr, [] {
        long r = syscall(__NR_clone3, nullptr, 0);
        return (r == -1 && errno != ENOSYS) ? 0 : 1;
    });
    CHECK(ctl.code == 0);
    auto o = in_child(&plan.program, [] {
        if (int e = expect_errno(syscall(__NR_clone3, nullptr, 0), ENOSYS)) return e;
        // fork() still works through clone.
        pid_t p = fork();
        if (p == 0) _exit(7);
        int st = 0;
        if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 7) return 4;
        return 0;
    });
    CHECK(o.code == 0);
}

TEST_CASE("x32 and unknown syscall numbers get the violation action", "[seccomp][install]") {
    const auto plan = compiled(tool_spec());
    auto o = in_child(&plan.program, [] {
        if (int e = expect_errno(syscall(__NR_getpid | 0x40000000), kViolationErrno)) return e;
        if (int e = expect_errno(syscall(__NR_read | 0x40000000, 0, nullptr, 0), kViolationErrno)) return e;
        if (int e = expect_errno(syscall(1000), kViolationErrno)) return e;
        return expect_errno(syscall(__NR_mount, "none", "/", "tmpfs", 0, nullptr), kViolationErrno);
    });
    CHECK(o.code == 0);

    SeccompSpec spec;  // defaults: violation ENOSYS
    const auto enosys = compiled(spec);
    o = in_child(&enosys.program, [] { return expect_errno(syscall(1000), ENOSYS); });
    CHECK(o.code == 0);
}

TEST_CASE("i386 syscalls via int 0x80 are refused unless i386 is accepted, then judged by the rules",
          "[seccomp][install]") {
    // Control: is IA32 emulation available here?
    auto ctl = in_child(nullptr, [] { return int80(20 /* i386 getpid */) == getpid() ? 0 : 1; });
    if (!ctl.exited || ctl.code != 0) {
        WARN("no IA32 emulation on this kernel: int 0x80 not checked");
        return;
    }
    // Default (native only): getpid, allowed natively, answers the violation
    // errno through int 0x80; the getcwd deny rule keeps its own errno.
    const auto refused = compiled(tool_spec());
    auto o = in_child(&refused.program, [] {
        if (syscall(__NR_getpid) != getpid()) return 1;  // native: allowed
        if (int80(20) != -kViolationErrno) return 2;
        char buf[64];
        if (int80(183 /* i386 getcwd */, reinterpret_cast<long>(buf), sizeof buf) != -kDenyErrno) return 3;
        return 0;
    });
    CHECK(o.exited);
    CHECK(o.code == 0);

    // Accepted: the i386 table mirrors the rules.
    SeccompSpec spec = tool_spec();
    spec.compat_arches = {"i386"};
    const auto plan = compiled(spec);
    o = in_child(&plan.program, [] {
        if (int80(20) != getpid()) return 1;  // getpid allowed
        char buf[64];
        long r = int80(183 /* i386 getcwd */, reinterpret_cast<long>(buf), sizeof buf);
        return r == -kDenyErrno ? 0 : 2;
    });
    CHECK(o.exited);
    CHECK(o.code == 0);
}

TEST_CASE("the kernel and the cBPF checker agree on what is a valid filter", "[seccomp][install]") {
    const sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    const std::vector<std::vector<sock_filter>> programs = {
        {allow},
        {BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 60), allow},
        {BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 64), allow},
        {BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 2), allow},
        {BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 0), allow},
        {BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, 3), allow},
        {BPF_STMT(BPF_ALU | BPF_DIV | BPF_K, 0), allow},
        {allow, BPF_STMT(BPF_LD | BPF_IMM, 0)},
        {BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0), allow},
        {BPF_STMT(BPF_LD | BPF_MEM, 0), allow},
        {BPF_STMT(BPF_ST, 0), BPF_STMT(BPF_LD | BPF_MEM, 0), allow},
        {BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1), BPF_STMT(BPF_ST, 2),
         BPF_STMT(BPF_LDX | BPF_MEM, 2), allow},
        std::vector<sock_filter>(BPF_MAXINSNS, allow),
    };
    for (size_t i = 0; i < programs.size(); ++i) {
        const bool ours = check_seccomp_filter(programs[i]).has_value();
        auto o = in_child(nullptr, [&] {
            if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return 2;
            sock_fprog fp{static_cast<unsigned short>(programs[i].size()),
                          const_cast<sock_filter*>(programs[i].data())};
            return syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) == 0 ? 0 : 1;
        });
        INFO("program " << i);
        CHECK(o.exited);
        CHECK((o.code == 0) == ours);
    }
}

TEST_CASE("network.netlink: a netlink socket opens only with a listed protocol", "[seccomp][install][netlink]") {
    SeccompSpec spec = tool_spec();
    spec.socket_families = std::vector<int>{AF_UNIX, AF_NETLINK};
    spec.netlink_protocols = std::vector<int>{NETLINK_ROUTE, NETLINK_SOCK_DIAG};
    spec.netlink_rule_id = 21;
    const auto plan = compiled(spec);
    auto open_netlink = [](int proto) {
        return [proto] {
            int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, proto);
            if (fd < 0) return errno == EPERM ? 10 : 11;
            close(fd);
            return 0;
        };
    };
    // Control: unfiltered, the audit and netfilter protocols open (creating
    // the socket needs no capability).
    for (int proto : {NETLINK_AUDIT, NETLINK_NETFILTER, NETLINK_ROUTE}) {
        INFO("control, protocol " << proto);
        CHECK(in_child(nullptr, open_netlink(proto)).code == 0);
    }
    // Filtered: the listed protocols open, the rest answer EPERM, as a family
    // the list leaves out does; a protocol number with high bits set, which
    // the kernel would truncate to a listed one, is refused too.
    CHECK(in_child(&plan.program, open_netlink(NETLINK_ROUTE)).code == 0);
    CHECK(in_child(&plan.program, open_netlink(NETLINK_SOCK_DIAG)).code == 0);
    for (int proto : {NETLINK_AUDIT, NETLINK_NETFILTER, NETLINK_XFRM, NETLINK_KOBJECT_UEVENT, NETLINK_GENERIC, 31}) {
        INFO("protocol " << proto);
        CHECK(in_child(&plan.program, open_netlink(proto)).code == 10);
    }
    auto o = in_child(&plan.program, [] {
        long fd = syscall(__NR_socket, AF_NETLINK, SOCK_RAW, (1ull << 32) | NETLINK_ROUTE);
        return fd < 0 && errno == EPERM ? 0 : 12;
    });
    CHECK(o.code == 0);
    CHECK(netlink_protocols_through(plan.program) == ((1u << NETLINK_ROUTE) | (1u << NETLINK_SOCK_DIAG)));
    // Other families keep their own verdicts: unix opens, inet is refused.
    o = in_child(&plan.program, [] {
        int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (u < 0) return 13;
        close(u);
        return socket(AF_INET, SOCK_STREAM, 0) < 0 && errno == EPERM ? 0 : 14;
    });
    CHECK(o.code == 0);
}

TEST_CASE("an allow of socket by type beside network.families holds in the kernel", "[seccomp][install]") {
    // The mix libseccomp builds wrongly from the rules as precedence leaves
    // them (the baseline's socket allow and this one, both narrowed to the
    // families): the compiler builds it cut apart, and the kernel runs that.
    SeccompSpec spec;  // Docker default baseline
    spec.allow = {SyscallRule{"socket", {{1, SyscallArgCond::Op::Eq, SOCK_DGRAM, 0}}, SeccompAction::Allow, 0, 7}};
    spec.socket_families = std::vector<int>{AF_INET, AF_INET6};
    spec.socket_families_rule_id = 3;
    const auto plan = compiled(spec);
    auto open_socket = [](int family, int type) {
        return [family, type] {
            int fd = socket(family, type | SOCK_CLOEXEC, 0);
            if (fd < 0) return errno == EPERM ? 10 : 11;
            close(fd);
            return 0;
        };
    };
    // Control: unfiltered, a unix datagram socket and a packet socket open.
    CHECK(in_child(nullptr, open_socket(AF_UNIX, SOCK_DGRAM)).code == 0);
    CHECK(in_child(nullptr, open_socket(AF_PACKET, SOCK_DGRAM)).code == 0);
    // Filtered: the listed families open, the others answer the family refusal.
    CHECK(in_child(&plan.program, open_socket(AF_INET, SOCK_DGRAM)).code == 0);
    CHECK(in_child(&plan.program, open_socket(AF_INET, SOCK_STREAM)).code == 0);
    CHECK(in_child(&plan.program, open_socket(AF_INET6, SOCK_DGRAM)).code == 0);
    CHECK(in_child(&plan.program, open_socket(AF_UNIX, SOCK_DGRAM)).code == 10);
    CHECK(in_child(&plan.program, open_socket(AF_PACKET, SOCK_DGRAM)).code == 10);
}
