// The compiled seccomp program, run through the cBPF interpreter for every
// syscall number and arch value, against an independent model of the spec.
#include <catch2/catch.hpp>

#include <asm/unistd_64.h>
#include <linux/audit.h>
#include <sched.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <csignal>

#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bulwark/policy/cbpf.h"
#include "bulwark/policy/seccomp.h"
#include "seccomp_model.h"

using namespace bulwark::policy;
using bulwark::test::Model;

namespace {

constexpr uint32_t kForeignArches[] = {AUDIT_ARCH_AARCH64, AUDIT_ARCH_ARM, AUDIT_ARCH_PPC64LE,
                                       AUDIT_ARCH_S390X, 0, 0xdeadbeef, AUDIT_ARCH_X86_64 ^ 1};
constexpr int kMaxNr = 1100;

uint32_t run(const SeccompPlan& plan, uint32_t arch, int nr, const uint64_t (&args)[6] = {}) {
    seccomp_data d{};
    d.nr = nr;
    d.arch = arch;
    d.instruction_pointer = 0x401000;
    for (int i = 0; i < 6; ++i) d.args[i] = args[i];
    return run_seccomp_filter(plan.program, d);
}

SyscallRule rule(std::string name, uint32_t id, std::vector<SyscallArgCond> args = {},
                 SeccompAction action = SeccompAction::Allow, uint16_t err = 0) {
    return SyscallRule{std::move(name), std::move(args), action, err, id};
}

SyscallArgCond cond(uint8_t i, SyscallArgCond::Op op, uint64_t v, uint64_t mask = 0) {
    return SyscallArgCond{i, op, v, mask};
}

// Every number on x86_64, i386 and x32, and foreign arches, with sampled
// arguments for the syscalls that have conditions.
void check_against_model(const SeccompSpec& spec, const std::vector<SyscallRule>& baseline) {
    auto plan = compile_seccomp(spec);
    INFO((plan ? "" : plan.error().message));
    REQUIRE(plan);
    REQUIRE(plan->program.size() <= BPF_MAXINSNS);
    REQUIRE(check_seccomp_filter(plan->program));
    Model model{spec, baseline};
    size_t checked = 0, mismatches = 0;
    struct ArchCase { uint32_t audit, scmp; int base; };
    for (auto a : {ArchCase{AUDIT_ARCH_X86_64, SCMP_ARCH_X86_64, 0},
                   ArchCase{AUDIT_ARCH_I386, SCMP_ARCH_X86, 0},
                   ArchCase{AUDIT_ARCH_X86_64, SCMP_ARCH_X32, 0x40000000}}) {
        for (int n = 0; n < kMaxNr; ++n) {
            const int nr = a.base + n;
            std::vector<std::vector<uint64_t>> samples{{0, 0, 0, 0, 0, 0}};
            if (auto name = bulwark::test::name_of(a.scmp, nr)) {
                std::vector<const std::vector<SyscallRule>*> lists{&spec.allow, &spec.deny, &baseline};
                samples = bulwark::test::arg_samples(*name, lists);
                bulwark::test::add_family_samples(spec, *name, samples);
                if (nr == 102 || nr == 117) {  // i386 multiplexers: every call number
                    for (uint64_t c = 0; c < 40; ++c) samples.push_back({c, 0, 0, 0, 0, 0});
                    samples.push_back({0x10000 | 13, 0, 0, 0, 0, 0});  // ipc version bits
                }
            }
            for (const auto& s : samples) {
                uint64_t args[6];
                std::copy(s.begin(), s.end(), args);
                const uint32_t got = run(*plan, a.audit, nr, args);
                const uint32_t want = model.expect(a.audit, nr, args);
                ++checked;
                if (got != want && ++mismatches <= 10) {
                    auto name = bulwark::test::name_of(a.scmp, nr);
                    FAIL_CHECK("arch " << std::hex << a.audit << " nr " << std::dec << nr << " ("
                                       << name.value_or("?") << ") args0 " << std::hex << args[0]
                                       << " args1 " << args[1] << ": got " << got << " want "
                                       << want);
                }
            }
        }
    }
    for (uint32_t arch : kForeignArches)
        for (int nr = 0; nr < kMaxNr; nr += 7) {
            CHECK(run(*plan, arch, nr) == SECCOMP_RET_KILL_PROCESS);
            ++checked;
        }
    CHECK(mismatches == 0);
    CHECK(checked > 3 * kMaxNr);
}

std::set<std::string> profile_unconditional_allows() {
    std::ifstream in(BULWARK_SOURCE_DIR "/policy-compiler/data/docker-default-seccomp.json");
    REQUIRE(in);
    auto doc = nlohmann::json::parse(in);
    std::set<std::string> out;
    for (const auto& c : doc["syscalls"]) {
        if (c["action"] != "SCMP_ACT_ALLOW" || c.contains("args") || c.contains("includes") ||
            c.contains("excludes"))
            continue;
        for (const auto& n : c["names"]) out.insert(n.get<std::string>());
    }
    return out;
}

}  // namespace

TEST_CASE("clone3 is allowed beside an unconditional clone, and matches the model", "[seccomp]") {
    SeccompSpec spec;  // baseline default
    spec.allow = {rule("clone", 1), rule("clone3", 2)};
    auto plan = compile_seccomp(spec);
    INFO((plan ? "" : plan.error().message));
    REQUIRE(plan);
    const uint64_t none[6] = {};
    const uint64_t userns[6] = {CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0, 0};
    CHECK(run(*plan, AUDIT_ARCH_X86_64, __NR_clone3, none) == SECCOMP_RET_ALLOW);
    CHECK(run(*plan, AUDIT_ARCH_X86_64, __NR_clone, userns) == SECCOMP_RET_ALLOW);
    check_against_model(spec, docker_default_rules());
    // Control: without the allow, clone3 answers ENOSYS.
    spec.allow = {rule("clone", 1)};
    auto plain = compile_seccomp(spec);
    REQUIRE(plain);
    CHECK(run(*plain, AUDIT_ARCH_X86_64, __NR_clone3, none) == (SECCOMP_RET_ERRNO | ENOSYS));
    check_against_model(spec, docker_default_rules());
}

TEST_CASE("Docker-default filter matches the model for every number and arch", "[seccomp]") {
    SeccompSpec spec;  // baseline default, violation ENOSYS, native only
    check_against_model(spec, docker_default_rules());
    SECTION("with i386 accepted: the i386 table mirrors the rules") {
        spec.compat_arches = {"i386"};
        check_against_model(spec, docker_default_rules());
    }
}

TEST_CASE("i386 is refused unless the spec accepts it; x32 always", "[seccomp]") {
    // Every i386 number (the socketcall/ipc multiplexers with every call
    // number) answers the violation action, whatever that action is.
    const uint64_t zeros[6] = {};
    auto every_i386 = [&](const SeccompPlan& plan, uint32_t want) {
        size_t wrong = 0, checked = 0;
        for (int nr = 0; nr < kMaxNr; ++nr) {
            std::vector<uint64_t> a0s{0, 1, ~0ull};
            if (nr == 102 || nr == 117)
                for (uint64_t c = 0; c < 40; ++c) a0s.push_back(c), a0s.push_back(c | 0x10000);
            for (uint64_t a0 : a0s) {
                const uint64_t args[6] = {a0, 0, 0, 0, 0, 0};
                ++checked;
                if (run(plan, AUDIT_ARCH_I386, nr, args) != want && ++wrong <= 5)
                    FAIL_CHECK("i386 nr " << nr << " a0 " << a0 << ": "
                                          << std::hex << run(plan, AUDIT_ARCH_I386, nr, args));
            }
        }
        CHECK(wrong == 0);
        CHECK(checked > kMaxNr);
    };
    auto x32_refused = [&](const SeccompPlan& plan, uint32_t want) {
        for (int nr : {__NR_read, __NR_getpid, __NR_openat, __NR_exit_group})
            CHECK(run(plan, AUDIT_ARCH_X86_64, nr | 0x40000000) == want);
    };
    for (auto [action, err] : {std::pair{SeccompAction::Errno, uint16_t{EPERM}},
                               std::pair{SeccompAction::Errno, uint16_t{ENOSYS}},
                               std::pair{SeccompAction::Kill, uint16_t{0}},
                               std::pair{SeccompAction::Trap, uint16_t{0}},
                               std::pair{SeccompAction::Log, uint16_t{0}}}) {
        SeccompSpec spec;
        spec.violation = action;
        spec.violation_errno = err;
        auto plan = compile_seccomp(spec);
        REQUIRE(plan);
        const uint32_t violation = bulwark::test::ret_of(action, err);
        INFO("violation " << std::hex << violation);
        CHECK(plan->arches == std::vector<uint32_t>{AUDIT_ARCH_X86_64});
        every_i386(*plan, violation);
        x32_refused(*plan, violation);
        // The native table is the rules' (control: getpid really is allowed).
        CHECK(run(*plan, AUDIT_ARCH_X86_64, __NR_getpid, zeros) == SECCOMP_RET_ALLOW);
    }

    // Deny rules hold on a refused ABI with their own action (a kill stays a
    // kill even where the violation action only logs); nothing else does.
    SeccompSpec spec;
    spec.violation = SeccompAction::Log;
    spec.deny = {rule("bpf", 1, {}, SeccompAction::Kill), rule("bind", 2, {}, SeccompAction::Errno, EACCES)};
    auto plan = compile_seccomp(spec);
    REQUIRE(plan);
    const int i386_bpf = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86, "bpf");
    const int i386_bind = 361;  // libseccomp names it by a socketcall pseudo number
    REQUIRE(i386_bpf == 357);
    CHECK(run(*plan, AUDIT_ARCH_I386, i386_bpf) == SECCOMP_RET_KILL_PROCESS);
    CHECK(run(*plan, AUDIT_ARCH_I386, i386_bind) == (SECCOMP_RET_ERRNO | EACCES));
    const uint64_t bind_call[6] = {2, 0, 0, 0, 0, 0}, socket_call[6] = {1, 0, 0, 0, 0, 0};
    CHECK(run(*plan, AUDIT_ARCH_I386, 102, bind_call) == (SECCOMP_RET_ERRNO | EACCES));
    CHECK(run(*plan, AUDIT_ARCH_I386, 102, socket_call) == SECCOMP_RET_LOG);
    CHECK(run(*plan, AUDIT_ARCH_I386, 20 /* getpid */) == SECCOMP_RET_LOG);
    CHECK(run(*plan, AUDIT_ARCH_X86_64, __NR_bpf) == SECCOMP_RET_KILL_PROCESS);
    check_against_model(spec, docker_default_rules());

    // Accepted: the i386 table mirrors the rules, x32 stays refused.
    SeccompSpec accepted;
    accepted.violation_errno = EPERM;
    accepted.compat_arches = {"i386"};
    plan = compile_seccomp(accepted);
    REQUIRE(plan);
    CHECK(plan->arches == std::vector<uint32_t>{AUDIT_ARCH_X86_64, AUDIT_ARCH_I386});
    CHECK(run(*plan, AUDIT_ARCH_I386, 20 /* getpid */) == SECCOMP_RET_ALLOW);
    CHECK(run(*plan, AUDIT_ARCH_I386, 5 /* open */) == SECCOMP_RET_ALLOW);
    CHECK(run(*plan, AUDIT_ARCH_I386, 21 /* mount */) == (SECCOMP_RET_ERRNO | EPERM));
    x32_refused(*plan, SECCOMP_RET_ERRNO | EPERM);

    // Only a compat ABI of this host can be accepted.
    for (const char* bad : {"arm", "x32", "x86_64", "native", ""}) {
        SeccompSpec s2;
        s2.compat_arches = {bad};
        INFO(bad);
        CHECK_FALSE(compile_seccomp(s2));
    }
}

TEST_CASE("Docker-default filter allows exactly the profile's unconditional set on x86_64",
          "[seccomp]") {
    SeccompSpec spec;
    spec.violation_errno = EPERM;
    auto plan = compile_seccomp(spec);
    REQUIRE(plan);
    const auto uncond = profile_unconditional_allows();
    REQUIRE(uncond.size() > 300);
    // Allowed whatever the arguments (two very different argument vectors).
    const uint64_t zeros[6] = {}, ones[6] = {~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull},
                   vsock[6] = {AF_VSOCK, 0, 0, 0, 0, 0};
    // Conditional on the kernel (>= 4.8) or the host arch (amd64) in the profile.
    const std::set<std::string> conditional_whole = {"ptrace", "process_vm_readv",
                                                     "process_vm_writev", "arch_prctl", "modify_ldt"};
    std::set<std::string> allowed_unconditionally;
    for (int nr = 0; nr < kMaxNr; ++nr) {
        auto name = bulwark::test::name_of(SCMP_ARCH_X86_64, nr);
        if (!name) {
            CHECK(run(*plan, AUDIT_ARCH_X86_64, nr) == (SECCOMP_RET_ERRNO | EPERM));
            continue;
        }
        const bool a = run(*plan, AUDIT_ARCH_X86_64, nr, zeros) == SECCOMP_RET_ALLOW;
        const bool b = run(*plan, AUDIT_ARCH_X86_64, nr, ones) == SECCOMP_RET_ALLOW &&
                       run(*plan, AUDIT_ARCH_X86_64, nr, vsock) == SECCOMP_RET_ALLOW;
        if (a && b) allowed_unconditionally.insert(*name);
        // The set-id refusal (a mode with S_ISUID/S_ISGID, ~0 has both) and
        // openat2's ENOSYS stand above the baseline: see the cases below.
        static const std::set<std::string> setid_or_enosys = {"chmod", "fchmod", "fchmodat", "fchmodat2", "open",
                                                              "openat", "creat", "mknod", "mknodat", "openat2"};
        if (uncond.contains(*name) && !setid_or_enosys.contains(*name)) {
            INFO(*name);
            CHECK((a && b));
        }
        if (uncond.contains(*name) && setid_or_enosys.contains(*name) && *name != "openat2") {
            INFO(*name << " without a set-id bit");
            CHECK(a);
        }
    }
    for (const auto& n : allowed_unconditionally) {
        INFO(n);
        CHECK((uncond.contains(n) || conditional_whole.contains(n)));
    }
    // The kernel here is >= 4.8, so the profile allows ptrace (its minKernel rule).
    CHECK(allowed_unconditionally.contains("ptrace"));
    CHECK(allowed_unconditionally.contains("arch_prctl"));
}

TEST_CASE("Docker-default conditional rules decide by argument", "[seccomp]") {
    SeccompSpec spec;
    spec.violation_errno = EPERM;
    auto plan = compile_seccomp(spec);
    REQUIRE(plan);
    auto x = [&](int nr, uint64_t a0 = 0, uint64_t a1 = 0) {
        const uint64_t args[6] = {a0, a1, 0, 0, 0, 0};
        return run(*plan, AUDIT_ARCH_X86_64, nr, args);
    };
    const uint32_t eperm = SECCOMP_RET_ERRNO | EPERM;
    CHECK(x(__NR_personality, 0) == SECCOMP_RET_ALLOW);
    CHECK(x(__NR_personality, PER_LINUX32) == SECCOMP_RET_ALLOW);
    CHECK(x(__NR_personality, 0xffffffff) == SECCOMP_RET_ALLOW);
    CHECK(x(__NR_personality, READ_IMPLIES_EXEC) == eperm);
    CHECK(x(__NR_socket, AF_INET) == SECCOMP_RET_ALLOW);
    CHECK(x(__NR_socket, AF_VSOCK) == eperm);
    CHECK(x(__NR_clone, SIGCHLD) == SECCOMP_RET_ALLOW);
    CHECK(x(__NR_clone, CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD) ==
          SECCOMP_RET_ALLOW);
    for (uint64_t ns : {CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWUTS,
                        CLONE_NEWIPC, CLONE_NEWCGROUP})
        CHECK(x(__NR_clone, ns | SIGCHLD) == eperm);
    CHECK(x(__NR_clone3) == (SECCOMP_RET_ERRNO | ENOSYS));
    for (int nr : {__NR_mount, __NR_unshare, __NR_setns, __NR_bpf, __NR_perf_event_open,
                   __NR_open_by_handle_at, __NR_init_module, __NR_kexec_load, __NR_reboot,
                   __NR_keyctl, __NR_add_key, __NR_userfaultfd, __NR_pivot_root, __NR_chroot,
                   __NR_clock_settime, __NR_kcmp})
        CHECK(x(nr) == eperm);
}

TEST_CASE("no call puts a set-id bit on a file, whatever the rules allow", "[seccomp]") {
    // chmod u+s on an output: the workdir is a host directory, so a set-id
    // file left there runs as the tool's ids for whoever executes it later.
    SeccompSpec spec;
    spec.violation_errno = EPERM;
    spec.allow = {rule("chmod", 3), rule("openat", 4)};  // an explicit allow grants no set-id mode either
    auto plan = compile_seccomp(spec);
    REQUIRE(plan);
    const uint32_t eperm = SECCOMP_RET_ERRNO | EPERM;
    struct Call {
        int nr;
        int mode_arg;
    };
    for (Call c : {Call{__NR_chmod, 1}, Call{__NR_fchmod, 1}, Call{__NR_fchmodat, 2}, Call{__NR_open, 2},
                   Call{__NR_openat, 3}, Call{__NR_creat, 1}, Call{__NR_mknod, 1}, Call{__NR_mknodat, 2}}) {
        for (uint64_t mode : {0755ull, 0644ull, 01777ull, 0100755ull}) {
            uint64_t a[6] = {};
            a[c.mode_arg] = mode;
            INFO("nr " << c.nr << " mode 0" << std::oct << mode);
            CHECK(run(*plan, AUDIT_ARCH_X86_64, c.nr, a) == SECCOMP_RET_ALLOW);
        }
        for (uint64_t mode : {04755ull, 02755ull, 06755ull, 04000ull, 0104755ull, 0xffffffff00004755ull}) {
            uint64_t a[6] = {};
            a[c.mode_arg] = mode;
            INFO("nr " << c.nr << " mode 0" << std::oct << mode);
            CHECK(run(*plan, AUDIT_ARCH_X86_64, c.nr, a) == eperm);
        }
    }
    // openat2's mode is behind a pointer: ENOSYS whatever the baseline says;
    // only the rule file's own allow of it by name gives up that check.
    CHECK(run(*plan, AUDIT_ARCH_X86_64, __NR_openat2) == (SECCOMP_RET_ERRNO | ENOSYS));
    {
        auto explicit_allow = spec;
        explicit_allow.allow = {rule("openat2", 21)};
        auto r = compile_seccomp(explicit_allow);
        REQUIRE(r);
        CHECK(run(*r, AUDIT_ARCH_X86_64, __NR_openat2) == SECCOMP_RET_ALLOW);
        uint64_t a[6] = {};
        a[1] = 04755;
        CHECK(run(*r, AUDIT_ARCH_X86_64, __NR_chmod, a) == eperm);  // the other set-id calls still refused
    }
    // With a kill violation action the set-id chmod kills.
    spec = {};
    spec.violation = SeccompAction::Kill;
    plan = compile_seccomp(spec);
    REQUIRE(plan);
    const uint64_t a[6] = {0, 04755, 0, 0, 0, 0};
    CHECK(run(*plan, AUDIT_ARCH_X86_64, __NR_chmod, a) == SECCOMP_RET_KILL_PROCESS);
}

TEST_CASE("the arch check comes first and the program fits the kernel", "[seccomp]") {
    SeccompSpec spec;
    auto plan = compile_seccomp(spec);
    REQUIRE(plan);
    REQUIRE(plan->program.size() >= 3);
    CHECK(plan->program.size() <= BPF_MAXINSNS);
    CHECK(plan->program[0].code == (BPF_LD | BPF_W | BPF_ABS));
    CHECK(plan->program[0].k == offsetof(seccomp_data, arch));
    CHECK(BPF_CLASS(plan->program[1].code) == BPF_JMP);
    // No instruction reads the syscall number before the arch is loaded.
    CHECK(plan->program[1].k != offsetof(seccomp_data, nr));
    CHECK(plan->arches == std::vector<uint32_t>{AUDIT_ARCH_X86_64});
    CHECK(plan->baseline == "default");
    CHECK(plan->default_action == SeccompAction::Errno);
    CHECK(plan->default_errno == ENOSYS);
}

TEST_CASE("allow, deny and argument conditions combine as the rule language says",
          "[seccomp]") {
    using Op = SyscallArgCond::Op;
    SeccompSpec spec;
    spec.baseline = SeccompSpec::Baseline::None;
    spec.violation = SeccompAction::Errno;
    spec.violation_errno = EACCES;
    spec.allow = {
        rule("read", 1), rule("exit_group", 2), rule("openat", 3),
        rule("write", 4, {cond(0, Op::Eq, 1)}),
        rule("write", 5, {cond(0, Op::Eq, 2)}),
        rule("socket", 6, {cond(0, Op::Ne, 17)}),
        rule("mmap", 7, {cond(2, Op::MaskedEq, 0, PROT_EXEC)}),
        rule("personality", 8, {cond(0, Op::Le, 8)}),
        rule("prctl", 9),
        rule("ioctl", 10),
        rule("kill", 11, {cond(0, Op::Gt, 1), cond(1, Op::Lt, 32)}),
        rule("fcntl", 12, {cond(1, Op::Ge, 1), cond(1, Op::Le, 4)}),  // a range on one argument
        rule("bind", 13), rule("msgget", 14), rule("ptrace", 15),
        rule("lseek", 16, {cond(0, Op::Eq, 0x100000005ull)}),
    };
    spec.deny = {
        rule("ptrace", 20, {}, SeccompAction::Kill),
        rule("socket", 21, {cond(0, Op::Eq, 10)}, SeccompAction::Errno, EAFNOSUPPORT),
        rule("socket", 22, {cond(0, Op::Eq, 40)}, SeccompAction::Trap),
        rule("ioctl", 23, {cond(1, Op::Eq, TIOCSTI)}, SeccompAction::Errno, EPERM),
        rule("ioctl", 24, {cond(1, Op::Eq, TCGETS)}, SeccompAction::Log),
        rule("prctl", 25, {cond(0, Op::Ge, 100)}, SeccompAction::Errno, 0),  // the violation errno
        rule("write", 26, {cond(0, Op::Eq, 2), cond(2, Op::Gt, 4096)}, SeccompAction::Errno, EFBIG),
        rule("bind", 27, {}, SeccompAction::Errno, EPERM),
        rule("msgget", 28, {}, SeccompAction::Errno, EPERM),
        rule("mount", 29, {}, SeccompAction::Kill),
        rule("kill", 30, {cond(0, Op::Eq, 5)}, SeccompAction::Errno, EPERM),
        rule("kill", 31, {cond(0, Op::Eq, 5)}, SeccompAction::Kill),
    };
    check_against_model(spec, {});
    spec.compat_arches = {"i386"};
    check_against_model(spec, {});

    auto plan = compile_seccomp(spec);
    REQUIRE(plan);
    auto x = [&](int nr, uint64_t a0 = 0, uint64_t a1 = 0, uint64_t a2 = 0) {
        const uint64_t args[6] = {a0, a1, a2, 0, 0, 0};
        return run(*plan, AUDIT_ARCH_X86_64, nr, args);
    };
    // Spot checks stated by hand, so a model bug cannot hide a filter bug.
    CHECK(x(__NR_ptrace) == SECCOMP_RET_KILL_PROCESS);
    CHECK(x(__NR_socket, AF_INET) == SECCOMP_RET_ALLOW);
    CHECK(x(__NR_socket, 17) == (SECCOMP_RET_ERRNO | EACCES));
    CHECK(x(__NR_socket, 10) == (SECCOMP_RET_ERRNO | EAFNOSUPPORT));
    CHECK(x(__NR_socket, 40) == SECCOMP_RET_TRAP);
    CHECK(x(__NR_ioctl, 1, TIOCSTI) == (SECCOMP_RET_ERRNO | EPERM));
    CHECK(x(__NR_ioctl, 1, TCGETS) == SECCOMP_RET_LOG);
    CHECK(x(__NR_ioctl, 1, TCSETS) == SECCOMP_RET_ALLOW);
    CHECK(x(__NR_ioctl, 1, FIONREAD) == SECCOMP_RET_ALLOW);
    CHECK(x(__NR_prctl, 99) == SECCOMP_RET_ALLOW);
    CHECK(x(__NR_prctl, 100) == (SECCOMP_RET_ERRNO | EACCES));
    CHECK(x(__NR_write, 2, 0, 4096) == SECCOMP_RET_ALLOW);
    CHECK(x(__NR_write, 2, 0, 4097) == (SECCOMP_RET_ERRNO | EFBIG));
    CHECK(x(__NR_write, 3) == (SECCOMP_RET_ERRNO | EACCES));
    CHECK(x(__NR_mmap, 0, 4096, PROT_READ) == SECCOMP_RET_ALLOW);
    CHECK(x(__NR_mmap, 0, 4096, PROT_READ | PROT_EXEC) == (SECCOMP_RET_ERRNO | EACCES));
    CHECK(x(__NR_fcntl, 0, 0) == (SECCOMP_RET_ERRNO | EACCES));
    CHECK(x(__NR_fcntl, 0, 3) == SECCOMP_RET_ALLOW);
    CHECK(x(__NR_fcntl, 0, 5) == (SECCOMP_RET_ERRNO | EACCES));
    CHECK(x(__NR_kill, 5, 9) == SECCOMP_RET_KILL_PROCESS);  // the stronger deny wins
    CHECK(x(__NR_kill, 6, 9) == SECCOMP_RET_ALLOW);
    CHECK(x(__NR_lseek, 5) == (SECCOMP_RET_ERRNO | EACCES));
    CHECK(x(__NR_lseek, 0x100000005ull) == SECCOMP_RET_ALLOW);
    CHECK(x(__NR_clone3) == (SECCOMP_RET_ERRNO | ENOSYS));
    // i386: bind and msgget denied through socketcall / ipc too.
    const uint64_t bind_call[6] = {2, 0, 0, 0, 0, 0}, msgget_call[6] = {13 | 0x10000, 0, 0, 0, 0, 0};
    CHECK(run(*plan, AUDIT_ARCH_I386, 102, bind_call) == (SECCOMP_RET_ERRNO | EPERM));
    CHECK(run(*plan, AUDIT_ARCH_I386, 117, msgget_call) == (SECCOMP_RET_ERRNO | EPERM));
    // x32 numbers of allowed calls are refused.
    CHECK(x(__NR_read | 0x40000000) == (SECCOMP_RET_ERRNO | EACCES));
    CHECK(run(*plan, AUDIT_ARCH_X86_64, 0x40000000 | 0) == (SECCOMP_RET_ERRNO | EACCES));

    std::map<std::string, uint32_t> ids(plan->syscall_rules.begin(), plan->syscall_rules.end());
    CHECK(ids["read"] == 1);
    CHECK(ids["ptrace"] == 20);
    CHECK(ids["mount"] == 29);
}

TEST_CASE("deny rules on top of the Docker baseline", "[seccomp]") {
    using Op = SyscallArgCond::Op;
    SeccompSpec spec;
    spec.allow = {rule("open_by_handle_at", 1), rule("personality", 2, {cond(0, Op::Eq, 1)})};
    spec.deny = {
        rule("ptrace", 3, {}, SeccompAction::Errno, 0),
        rule("socket", 4, {cond(0, Op::Eq, AF_PACKET)}, SeccompAction::Errno, EPERM),
        rule("ioctl", 5, {cond(1, Op::Eq, TIOCSTI)}, SeccompAction::Kill),
        rule("clone", 6, {cond(0, Op::MaskedEq, CLONE_VM, CLONE_VM)}, SeccompAction::Trap),
        rule("io_uring_setup", 7, {}, SeccompAction::Errno, ENOSYS),
        rule("socket", 8, {}, SeccompAction::Log),
    };
    check_against_model(spec, docker_default_rules());
    spec.compat_arches = {"i386"};
    check_against_model(spec, docker_default_rules());
}

TEST_CASE("network.families narrows socket and socketpair on every accepted ABI", "[seccomp]") {
    using Op = SyscallArgCond::Op;
    const uint64_t netlink[6] = {AF_NETLINK, SOCK_RAW, 0, 0, 0, 0};
    const uint64_t inet[6] = {AF_INET, SOCK_STREAM, 0, 0, 0, 0};
    const uint64_t unix_pair[6] = {AF_UNIX, SOCK_STREAM, 0, 0, 0, 0};
    const uint64_t netlink_pair[6] = {AF_NETLINK, SOCK_DGRAM, 0, 0, 0, 0};
    SeccompSpec spec;  // Docker's baseline allows socket(2) in every family
    // Control: with no list, the baseline's allow lets a netlink socket through.
    auto open = compile_seccomp(spec);
    REQUIRE(open);
    CHECK(run(*open, AUDIT_ARCH_X86_64, __NR_socket, netlink) == SECCOMP_RET_ALLOW);

    spec.socket_families = std::vector<int>{AF_UNIX, AF_INET, AF_INET6};
    spec.socket_families_rule_id = 21;
    auto plan = compile_seccomp(spec);
    INFO((plan ? "" : plan.error().message));
    REQUIRE(plan);
    CHECK(run(*plan, AUDIT_ARCH_X86_64, __NR_socket, netlink) == (SECCOMP_RET_ERRNO | EPERM));
    CHECK(run(*plan, AUDIT_ARCH_X86_64, __NR_socket, inet) == SECCOMP_RET_ALLOW);
    CHECK(run(*plan, AUDIT_ARCH_X86_64, __NR_socketpair, unix_pair) == SECCOMP_RET_ALLOW);
    CHECK(run(*plan, AUDIT_ARCH_X86_64, __NR_socketpair, netlink_pair) == (SECCOMP_RET_ERRNO | EPERM));
    // A family's upper half set is no listed family (the kernel reads an int).
    const uint64_t high[6] = {(uint64_t{1} << 32) | AF_INET, SOCK_STREAM, 0, 0, 0, 0};
    CHECK(run(*plan, AUDIT_ARCH_X86_64, __NR_socket, high) == (SECCOMP_RET_ERRNO | EPERM));
    check_against_model(spec, docker_default_rules());

    SECTION("i386 accepted: its socket calls are refused whatever the family (socketcall hides it)") {
        spec.compat_arches = {"i386"};
        auto p = compile_seccomp(spec);
        REQUIRE(p);
        const uint64_t sys_socket[6] = {1, 0, 0, 0, 0, 0}, sys_connect[6] = {3, 0, 0, 0, 0, 0};
        CHECK(run(*p, AUDIT_ARCH_I386, 102, sys_socket) == (SECCOMP_RET_ERRNO | EPERM));
        CHECK(run(*p, AUDIT_ARCH_I386, 102, sys_connect) == SECCOMP_RET_ALLOW);
        CHECK(run(*p, AUDIT_ARCH_I386, 359, unix_pair) == (SECCOMP_RET_ERRNO | EPERM));  // socket(2) itself
        check_against_model(spec, docker_default_rules());
    }
    SECTION("audit mode logs a family the list leaves out") {
        spec.violation = SeccompAction::Log;
        spec.violation_errno = 0;
        auto p = compile_seccomp(spec);
        REQUIRE(p);
        CHECK(run(*p, AUDIT_ARCH_X86_64, __NR_socket, netlink) == SECCOMP_RET_LOG);
        check_against_model(spec, docker_default_rules());
    }
    SECTION("an allow under its own conditions keeps them; what it never allowed keeps the violation action") {
        spec.baseline = SeccompSpec::Baseline::None;
        spec.violation = SeccompAction::Kill;
        spec.violation_errno = 0;
        spec.allow = {rule("socket", 1, {cond(1, Op::Eq, SOCK_STREAM)}), rule("read", 2)};
        spec.deny = {rule("socket", 3, {cond(0, Op::Eq, AF_INET6)}, SeccompAction::Errno, EACCES)};
        auto p = compile_seccomp(spec);
        INFO((p ? "" : p.error().message));
        REQUIRE(p);
        const uint64_t netlink_stream[6] = {AF_NETLINK, SOCK_STREAM, 0, 0, 0, 0};
        const uint64_t inet_dgram[6] = {AF_INET, SOCK_DGRAM, 0, 0, 0, 0};
        const uint64_t inet6[6] = {AF_INET6, SOCK_STREAM, 0, 0, 0, 0};
        CHECK(run(*p, AUDIT_ARCH_X86_64, __NR_socket, inet) == SECCOMP_RET_ALLOW);
        CHECK(run(*p, AUDIT_ARCH_X86_64, __NR_socket, netlink_stream) == (SECCOMP_RET_ERRNO | EPERM));
        CHECK(run(*p, AUDIT_ARCH_X86_64, __NR_socket, inet_dgram) == SECCOMP_RET_KILL_PROCESS);
        CHECK(run(*p, AUDIT_ARCH_X86_64, __NR_socket, inet6) == (SECCOMP_RET_ERRNO | EACCES));
        CHECK(run(*p, AUDIT_ARCH_X86_64, __NR_socketpair, unix_pair) == SECCOMP_RET_KILL_PROCESS);
        check_against_model(spec, {});
    }
    SECTION("more families than the filter narrows to is an error naming the rule") {
        spec.socket_families = std::vector<int>(33);
        for (int f = 0; f < 33; ++f) (*spec.socket_families)[f] = f;
        auto r = compile_seccomp(spec);
        REQUIRE_FALSE(r);
        CHECK(r.error().rule_id == 21);
        CHECK_THAT(r.error().message, Catch::Contains("network.families"));
    }
}

TEST_CASE("spec errors name the rule and never yield a filter", "[seccomp]") {
    SeccompSpec spec;
    spec.allow = {rule("read", 1), rule("no_such_call", 42)};
    auto r = compile_seccomp(spec);
    REQUIRE_FALSE(r);
    CHECK(r.error().rule_id == 42);
    CHECK_THAT(r.error().message, Catch::Contains("no_such_call"));

    spec = {};
    spec.deny = {rule("ptrace", 7, {}, SeccompAction::Allow)};
    r = compile_seccomp(spec);
    REQUIRE_FALSE(r);
    CHECK(r.error().rule_id == 7);

    spec = {};
    spec.violation = SeccompAction::Allow;
    spec.violation_rule_id = 9;
    r = compile_seccomp(spec);
    REQUIRE_FALSE(r);
    CHECK(r.error().rule_id == 9);

    spec = {};
    spec.allow = {rule("clone3", 11)};
    r = compile_seccomp(spec);
    REQUIRE_FALSE(r);
    CHECK(r.error().rule_id == 11);
    // ... nor beside a clone allowed only under a condition, or denied under one
    spec.allow = {rule("clone", 10, {cond(0, SyscallArgCond::Op::MaskedEq, 0, 0x7E020000)}), rule("clone3", 11)};
    r = compile_seccomp(spec);
    REQUIRE_FALSE(r);
    CHECK(r.error().rule_id == 11);
    spec.allow = {rule("clone", 10), rule("clone3", 11)};
    spec.deny = {rule("clone", 14, {cond(0, SyscallArgCond::Op::MaskedEq, 0x10000000, 0x10000000)},
                      SeccompAction::Errno, EPERM)};
    r = compile_seccomp(spec);
    REQUIRE_FALSE(r);
    CHECK(r.error().rule_id == 11);

    spec = {};
    spec.deny = {rule("bpf", 12, {}, SeccompAction::Errno, 5000)};
    REQUIRE_FALSE(compile_seccomp(spec));

    spec = {};
    spec.allow = {rule("read", 13, {cond(6, SyscallArgCond::Op::Eq, 1)})};
    r = compile_seccomp(spec);
    REQUIRE_FALSE(r);
    CHECK(r.error().rule_id == 13);
}

TEST_CASE("precedence that needs too many libseccomp rules is refused quickly", "[seccomp]") {
    using Op = SyscallArgCond::Op;
    SeccompSpec spec;
    spec.baseline = SeccompSpec::Baseline::None;
    spec.allow = {rule("ioctl", 1)};
    spec.deny = {rule("ioctl", 2, {cond(1, Op::Eq, TIOCSTI)}, SeccompAction::Errno, EPERM),
                 rule("ioctl", 3, {cond(1, Op::MaskedEq, 0x5400, 0xff00), cond(0, Op::Ge, 3)},
                      SeccompAction::Log)};
    auto r = compile_seccomp(spec);
    REQUIRE_FALSE(r);
    CHECK(r.error().rule_id == 2);
    CHECK_THAT(r.error().message, Catch::Contains("ioctl"));
}

TEST_CASE("a rule mix libseccomp compiles wrongly fails the compile", "[seccomp]") {
    // libseccomp 2.5.4 drops the LOG branch of this ioctl rule set (rules
    // over a0 and a1 with different actions); the compiler runs the exported
    // program against what it asked for and refuses the result.
    using Op = SyscallArgCond::Op;
    SeccompSpec spec;
    spec.baseline = SeccompSpec::Baseline::None;
    spec.allow = {rule("ioctl", 1)};
    spec.deny = {rule("ioctl", 2, {cond(1, Op::Eq, TIOCSTI)}, SeccompAction::Errno, EPERM),
                 rule("ioctl", 3, {cond(0, Op::Ge, 1000)}, SeccompAction::Log)};
    auto r = compile_seccomp(spec);
    if (r) {
        // A libseccomp that gets it right must then really decide correctly.
        seccomp_data d{};
        d.arch = AUDIT_ARCH_X86_64;
        d.nr = __NR_ioctl;
        d.args[0] = 1000;
        CHECK(run_seccomp_filter(r->program, d) == SECCOMP_RET_LOG);
        d.args[1] = TIOCSTI;
        CHECK(run_seccomp_filter(r->program, d) == (SECCOMP_RET_ERRNO | EPERM));
    } else {
        CHECK_THAT(r.error().message, Catch::Contains("ioctl"));
    }
}

TEST_CASE("rule mixes libseccomp builds wrongly as written compile with their rules cut apart", "[seccomp]") {
    for (const auto& [what, spec] : bulwark::test::libseccomp_trouble_specs()) {
        INFO(what);
        check_against_model(spec, spec.baseline == SeccompSpec::Baseline::Default ? docker_default_rules()
                                                                                   : std::vector<SyscallRule>{});
        // The rules a runtime would be handed are the verified ones: no two of
        // one syscall can match the same arguments.
        auto rules = resolve_seccomp_rules(spec);
        REQUIRE(rules);
        for (const auto& [name, samples] : {std::pair{std::string("socket"), bulwark::test::arg_samples(
                                                          "socket", {&spec.allow, &spec.deny})}})
            for (const auto& s : samples) {
                int matches = 0;
                for (const auto& r : *rules)
                    if (r.name == name &&
                        std::ranges::all_of(r.args, [&](const SyscallArgCond& c) {
                            return bulwark::test::cond_holds(c, s[c.index], true);
                        }))
                        ++matches;
                CHECK(matches <= 1);
            }
    }
    // The reported mix: socket(AF_VSOCK, SOCK_DGRAM) is what the rule file's
    // allow covers in a family the list leaves out.
    auto plan = compile_seccomp(bulwark::test::libseccomp_trouble_specs().front().spec);
    REQUIRE(plan);
    const uint64_t vsock_dgram[6] = {AF_VSOCK, SOCK_DGRAM, 0, 0, 0, 0};
    const uint64_t vsock_stream[6] = {AF_VSOCK, SOCK_STREAM, 0, 0, 0, 0};
    const uint64_t inet_dgram[6] = {AF_INET, SOCK_DGRAM, 0, 0, 0, 0};
    const uint64_t packet_stream[6] = {AF_PACKET, SOCK_STREAM, 0, 0, 0, 0};
    CHECK(run(*plan, AUDIT_ARCH_X86_64, __NR_socket, vsock_dgram) == (SECCOMP_RET_ERRNO | EPERM));
    CHECK(run(*plan, AUDIT_ARCH_X86_64, __NR_socket, vsock_stream) == (SECCOMP_RET_ERRNO | ENOSYS));
    CHECK(run(*plan, AUDIT_ARCH_X86_64, __NR_socket, inet_dgram) == SECCOMP_RET_ALLOW);
    CHECK(run(*plan, AUDIT_ARCH_X86_64, __NR_socket, packet_stream) == (SECCOMP_RET_ERRNO | EPERM));
}

TEST_CASE("rule mixes libseccomp never returned from compile in bounded time", "[seccomp]") {
    // Two allows sharing a range on a0, then a range and a masked compare on
    // a1: libseccomp 2.5 loops forever when the rule with the range is added
    // first; the compiler adds the other first. Compiled in a child under a
    // time limit, so a regression fails here instead of hanging the tier.
    using Op = SyscallArgCond::Op;
    SeccompSpec spec;
    spec.baseline = SeccompSpec::Baseline::None;
    spec.allow = {rule("socket", 10, {cond(2, Op::Ne, 16), cond(1, Op::Le, 40)}),
                  rule("socket", 11, {cond(2, Op::Lt, 41), cond(1, Op::MaskedEq, 9, 0xfd)})};
    spec.deny = {rule("socket", 20, {cond(0, Op::Lt, 1000)}, SeccompAction::Errno, EACCES)};
    // Control: libseccomp handed the two allows as precedence leaves them
    // (a0 >= 1000 from the deny), range first, does not return.
    const pid_t control = fork();
    REQUIRE(control >= 0);
    if (control == 0) {
        alarm(2);
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
        const scmp_arg_cmp range[] = {SCMP_A0(SCMP_CMP_GE, 1000), SCMP_A1(SCMP_CMP_LE, 40), SCMP_A2(SCMP_CMP_NE, 16)};
        const scmp_arg_cmp masked[] = {SCMP_A0(SCMP_CMP_GE, 1000), SCMP_A1(SCMP_CMP_MASKED_EQ, 0xfd, 9),
                                       SCMP_A2(SCMP_CMP_LT, 41)};
        seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 3, range);
        seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 3, masked);
        _exit(0);
    }
    int control_status = 0;
    REQUIRE(waitpid(control, &control_status, 0) == control);
    CHECK((WIFSIGNALED(control_status) && WTERMSIG(control_status) == SIGALRM));
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        alarm(20);
        _exit(compile_seccomp(spec) ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    INFO("status " << status);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    check_against_model(spec, {});
}

TEST_CASE("random socket rule mixes: a compiled filter decides as the model, and few are refused", "[seccomp]") {
    // Seeded: the same 400 mixes every run. Before the compiler ordered the
    // rules for libseccomp and cut apart the ones it built wrongly, 6 of them
    // never returned from seccomp_rule_add and 26 were refused as built
    // wrongly (tests/bench/seccomp_mix_bench, 4,800 mixes over 24 other seeds:
    // 57 and 364 then, 2 and 21
    // now).
    constexpr uint64_t kSeed = 1;
    std::mt19937_64 rng(kSeed);
    int compiled = 0, too_many = 0, refused = 0;
    for (int i = 0; i < 400; ++i) {
        const SeccompSpec spec = bulwark::test::random_socket_spec(rng);
        auto plan = compile_seccomp(spec);
        if (!plan) {
            INFO("mix " << i);
            CHECK_THAT(plan.error().message, Catch::Contains("socket"));
            ++(plan.error().message.find("more than") != std::string::npos ? too_many : refused);
            continue;
        }
        ++compiled;
        const auto baseline = spec.baseline == SeccompSpec::Baseline::Default ? docker_default_rules()
                                                                               : std::vector<SyscallRule>{};
        bulwark::test::Model model{spec, baseline};
        auto samples = bulwark::test::arg_samples("socket", {&spec.allow, &spec.deny, &baseline});
        bulwark::test::add_family_samples(spec, "socket", samples);
        for (const auto& s : samples) {
            uint64_t args[6];
            std::copy(s.begin(), s.end(), args);
            INFO("mix " << i << " args " << args[0] << ", " << args[1] << ", " << args[2]);
            CHECK(run(*plan, AUDIT_ARCH_X86_64, __NR_socket, args) == model.expect(AUDIT_ARCH_X86_64, __NR_socket, args));
        }
    }
    // Refused as built wrongly by libseccomp in both forms: one; 55 need more
    // rules than the per-syscall bound.
    INFO("compiled " << compiled << ", too many rules " << too_many << ", built wrongly " << refused);
    CHECK(refused <= 1);
    CHECK(compiled >= 340);
}

TEST_CASE("a program over the kernel's 4096 instructions is refused", "[seccomp]") {
    using Op = SyscallArgCond::Op;
    SeccompSpec spec;
    spec.baseline = SeccompSpec::Baseline::None;
    spec.compat_arches = {"i386"};  // native alone fits (about 3400 instructions)
    uint32_t id = 1;
    for (const auto& name : known_syscalls()) {
        // clone3, openat2: never allowed; the set-id calls: a Ne on their mode
        // argument against the set-id refusal splits past the per-call bound.
        static const std::set<std::string> skip = {"clone3", "openat2", "chmod", "fchmod", "fchmodat", "fchmodat2",
                                                   "open", "openat", "creat", "mknod", "mknodat"};
        if (skip.contains(name)) continue;
        spec.allow.push_back(rule(name, id, {cond(0, Op::Ne, id), cond(1, Op::Ne, id + 1)}));
        ++id;
    }
    auto r = compile_seccomp(spec);
    INFO((r ? std::to_string(r->program.size()) + " instructions" : r.error().message));
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("4096"));
}

TEST_CASE("known syscalls are sorted, unique and cover every filter arch", "[seccomp]") {
    const auto& names = known_syscalls();
    CHECK(std::is_sorted(names.begin(), names.end()));
    CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
    for (const char* n : {"read", "clone3", "socketcall", "arch_prctl", "breakpoint", "set_tls",
                          "io_uring_setup", "landlock_create_ruleset"}) {
        INFO(n);
        CHECK(is_known_syscall(n));
    }
    CHECK_FALSE(is_known_syscall("no_such_call"));
    CHECK_FALSE(is_known_syscall(""));
    // Asked by name, the same set as the list.
    for (const auto& n : names) {
        INFO(n);
        CHECK(is_known_syscall(n));
    }
    for (const char* n : {"getpid2", "socket ", "READ", "vm86old_"}) {
        INFO(n);
        CHECK_FALSE(is_known_syscall(n));
    }
    // Names agree with the kernel headers' numbers.
    CHECK(seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, "getpid") == __NR_getpid);
    CHECK(seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, "clone3") == __NR_clone3);
}
