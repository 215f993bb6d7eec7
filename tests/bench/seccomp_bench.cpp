// seccomp_bench: what the compiled filter costs per syscall.
//
//  1. getpid under the Docker-default filter (as compile_seccomp emits it)
//     vs no filter: the added ns per call.
//  2. The syscall a linear filter checks last, under the same rules compiled
//     as a binary tree (SCMP_FLTATR_CTL_OPTIMIZE=2) vs linearly (=1): the
//     added ns per call of each, and their ratio.
//
// Each measurement runs in a fresh forked child (filters cannot be removed);
// variants are interleaved round by round so drift hits them alike. Figures
// are ns per call over batches: median and p99 across all batches, and the
// fastest batch (least disturbed by other load). The instructions each
// filter executes for the call are printed too: they do not depend on load.
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bulwark/policy/seccomp.h"

using namespace bulwark::policy;

namespace {

constexpr int kRounds = 15;
constexpr int kBatches = 100;
constexpr int kBatchCalls = 2000;

std::vector<sock_filter> libseccomp_program(int optimize) {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
    seccomp_arch_add(ctx, SCMP_ARCH_X86);
    seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, static_cast<uint32_t>(optimize));
    for (const auto& r : docker_default_rules()) {
        std::vector<scmp_arg_cmp> cmps;
        for (const auto& c : r.args) {
            scmp_compare op = SCMP_CMP_EQ;
            switch (c.op) {
                case SyscallArgCond::Op::Eq: op = SCMP_CMP_EQ; break;
                case SyscallArgCond::Op::Ne: op = SCMP_CMP_NE; break;
                case SyscallArgCond::Op::Lt: op = SCMP_CMP_LT; break;
                case SyscallArgCond::Op::Le: op = SCMP_CMP_LE; break;
                case SyscallArgCond::Op::Gt: op = SCMP_CMP_GT; break;
                case SyscallArgCond::Op::Ge: op = SCMP_CMP_GE; break;
                case SyscallArgCond::Op::MaskedEq: op = SCMP_CMP_MASKED_EQ; break;
            }
            const bool masked = c.op == SyscallArgCond::Op::MaskedEq;
            cmps.push_back(scmp_arg_cmp{c.index, op, masked ? c.mask : c.value, masked ? c.value : 0});
        }
        const uint32_t act = r.action == SeccompAction::Allow ? SCMP_ACT_ALLOW : SCMP_ACT_ERRNO(r.errno_value);
        if (act == SCMP_ACT_ERRNO(ENOSYS)) continue;
        seccomp_rule_add_array(ctx, act, seccomp_syscall_resolve_name(r.name.c_str()),
                               static_cast<unsigned>(cmps.size()), cmps.empty() ? nullptr : cmps.data());
    }
    int fd = memfd_create("bench", 0);
    seccomp_export_bpf(ctx, fd);
    seccomp_release(ctx);
    off_t size = lseek(fd, 0, SEEK_END);
    std::vector<sock_filter> prog(static_cast<size_t>(size) / sizeof(sock_filter));
    if (pread(fd, prog.data(), static_cast<size_t>(size), 0) != size) std::abort();
    close(fd);
    return prog;
}

// Instructions a program executes for (x86_64, nr, zero args): enough of
// cBPF for what libseccomp emits.
int steps(const std::vector<sock_filter>& p, int nr) {
    seccomp_data d{};
    d.nr = nr;
    d.arch = AUDIT_ARCH_X86_64;
    uint32_t a = 0;
    int n = 0;
    for (size_t pc = 0; pc < p.size(); ++pc, ++n) {
        const sock_filter& f = p[pc];
        switch (f.code) {
            case BPF_LD | BPF_W | BPF_ABS: std::memcpy(&a, reinterpret_cast<char*>(&d) + f.k, 4); break;
            case BPF_RET | BPF_K: return n + 1;
            case BPF_JMP | BPF_JA: pc += f.k; break;
            case BPF_JMP | BPF_JEQ | BPF_K: pc += a == f.k ? f.jt : f.jf; break;
            case BPF_JMP | BPF_JGT | BPF_K: pc += a > f.k ? f.jt : f.jf; break;
            case BPF_JMP | BPF_JGE | BPF_K: pc += a >= f.k ? f.jt : f.jf; break;
            case BPF_JMP | BPF_JSET | BPF_K: pc += (a & f.k) ? f.jt : f.jf; break;
            case BPF_ALU | BPF_AND | BPF_K: a &= f.k; break;
            default: return -1;
        }
    }
    return -1;
}

long call(int nr) { return syscall(nr, -1L, 0L, 0L, 0L, 0L, 0L); }

// ns per call for each batch, measured in a child under prog (or none).
std::vector<double> measure(const std::vector<sock_filter>* prog, int nr) {
    int fds[2];
    if (pipe(fds) != 0) std::abort();
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        if (prog) {
            sock_fprog fp{static_cast<unsigned short>(prog->size()), const_cast<sock_filter*>(prog->data())};
            if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
                syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) != 0)
                _exit(1);
        }
        for (int i = 0; i < 20000; ++i) call(nr);
        std::vector<double> out(kBatches);
        for (int b = 0; b < kBatches; ++b) {
            auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < kBatchCalls; ++i) call(nr);
            auto t1 = std::chrono::steady_clock::now();
            out[b] = std::chrono::duration<double, std::nano>(t1 - t0).count() / kBatchCalls;
        }
        if (write(fds[1], out.data(), out.size() * sizeof(double)) < 0) _exit(2);
        _exit(0);
    }
    close(fds[1]);
    std::vector<double> out(kBatches);
    size_t want = out.size() * sizeof(double), got = 0;
    while (got < want) {
        ssize_t n = read(fds[0], reinterpret_cast<char*>(out.data()) + got, want - got);
        if (n <= 0) break;
        got += static_cast<size_t>(n);
    }
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (got != want || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        std::fprintf(stderr, "measurement child failed\n");
        std::exit(1);
    }
    return out;
}

struct Stats { double min, median, p99; };
Stats stats(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return {v.front(), v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 99 / 100)]};
}

}  // namespace

int main() {
    std::string jit = "?";
    if (std::ifstream f{"/proc/sys/net/core/bpf_jit_enable"}; f) std::getline(f, jit);
    std::printf("seccomp_bench: %d rounds x %d batches x %d calls, bpf_jit_enable=%s\n", kRounds,
                kBatches, kBatchCalls, jit.c_str());

    // 1. getpid, Docker default as compiled by Bulwark.
    auto plan = compile_seccomp(SeccompSpec{});
    if (!plan) {
        std::fprintf(stderr, "compile failed: %s\n", plan.error().message.c_str());
        return 1;
    }
    std::vector<double> none, dflt;
    for (int r = 0; r < kRounds; ++r) {
        auto a = measure(nullptr, SYS_getpid);
        auto b = measure(&plan->program, SYS_getpid);
        none.insert(none.end(), a.begin(), a.end());
        dflt.insert(dflt.end(), b.begin(), b.end());
    }
    auto sn = stats(none), sd = stats(dflt);
    std::printf("\ngetpid, no filter:                  median %6.1f ns  p99 %6.1f ns\n", sn.median, sn.p99);
    std::printf("getpid, Docker default (%4zu insns): median %6.1f ns  p99 %6.1f ns\n",
                plan->program.size(), sd.median, sd.p99);
    std::printf("added by the filter: %.1f ns per call (median), %.1f ns (fastest batch); target <= 30 ns\n",
                sd.median - sn.median, sd.min - sn.min);
    std::printf("instructions executed for getpid: %d\n", steps(plan->program, SYS_getpid));

    // 2. Last-listed syscall: linear vs binary tree, same rules.
    const auto linear = libseccomp_program(1);
    const auto tree = libseccomp_program(2);
    // Calls that are harmless with (-1, 0, ...) arguments.
    const int safe[] = {SYS_close,  SYS_dup,     SYS_fstat,    SYS_fsync,   SYS_fdatasync,
                        SYS_read,   SYS_write,   SYS_lseek,    SYS_fcntl,   SYS_ioctl,
                        SYS_flock,  SYS_fchdir,  SYS_fchmod,   SYS_ftruncate, SYS_getdents64,
                        SYS_syncfs, SYS_readv,   SYS_writev,   SYS_pread64, SYS_pwrite64,
                        SYS_fstatfs, SYS_fgetxattr, SYS_flistxattr, SYS_shutdown, SYS_listen,
                        SYS_getsockname, SYS_getpeername, SYS_timerfd_gettime, SYS_epoll_wait,
                        SYS_getpid, SYS_gettid, SYS_getppid, SYS_getuid, SYS_sched_yield,
                        SYS_waitid, SYS_preadv2, SYS_pwritev2, SYS_copy_file_range, SYS_tee,
                        SYS_splice, SYS_vmsplice, SYS_sync_file_range, SYS_fallocate,
                        SYS_fadvise64, SYS_readahead, SYS_inotify_rm_watch, SYS_fanotify_mark};
    int last = SYS_getpid, most = -1;
    for (int nr : safe) {
        int s = steps(linear, nr);
        if (s > most) { most = s; last = nr; }
    }
    char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, last);
    std::printf("\nlast-listed safe syscall in the linear filter: %s (%d instructions linear, %d tree: "
                "%.1fx fewer)\n",
                name ? name : "?", most, steps(tree, last),
                static_cast<double>(most) / std::max(1, steps(tree, last)));
    std::vector<double> base, lin, bt;
    for (int r = 0; r < kRounds; ++r) {
        auto a = measure(nullptr, last);
        auto b = measure(&linear, last);
        auto c = measure(&tree, last);
        base.insert(base.end(), a.begin(), a.end());
        lin.insert(lin.end(), b.begin(), b.end());
        bt.insert(bt.end(), c.begin(), c.end());
    }
    auto s0 = stats(base), s1 = stats(lin), s2 = stats(bt);
    std::printf("%-12s no filter:        median %6.1f ns  p99 %6.1f ns\n", name ? name : "?", s0.median, s0.p99);
    std::printf("%-12s linear (%4zu insns): median %6.1f ns  p99 %6.1f ns  added %.1f ns\n", "",
                linear.size(), s1.median, s1.p99, s1.median - s0.median);
    std::printf("%-12s tree   (%4zu insns): median %6.1f ns  p99 %6.1f ns  added %.1f ns\n", "",
                tree.size(), s2.median, s2.p99, s2.median - s0.median);
    const double added_lin = s1.median - s0.median, added_tree = s2.median - s0.median;
    std::printf("fastest batches: none %.1f, linear %.1f (+%.1f), tree %.1f (+%.1f) ns\n", s0.min,
                s1.min, s1.min - s0.min, s2.min, s2.min - s0.min);
    if (added_tree > 0.5)
        std::printf("binary tree is %.1fx cheaper than linear for the last-listed call (target >= 3x)\n",
                    added_lin / added_tree);
    else
        std::printf("binary tree adds under 0.5 ns (linear adds %.1f ns): ratio not meaningful\n", added_lin);
    std::free(name);
    return 0;
}
