// Arm64 hardening tier: MTE through glibc's tunable, BTI/PAC detection, all
// under qemu-aarch64 -cpu max with the arm64 multiarch root.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <csignal>

#include "bulwark/policy/elf_props.h"
#include "sandbox/hardening.h"
#include "tier_skip.h"

namespace {

const std::string kDir = ARM64_DIR;

struct Result {
    int status = -1;  // exit code, or 128 + signal
    std::string out;
};

// qemu-aarch64 -cpu max -L <root> <prog> args..., with an optional
// GLIBC_TUNABLES for the guest program. Where the arm64 multiarch libc is
// installed (libc6:arm64, scripts/install-deps.sh with BULWARK_ARM64=1) the
// root is /: its loader and its glibc, never the cross toolchain's loader
// with the multiarch libc.so.6 that the loader's search path finds through
// the host's /etc/ld.so.cache. Without it, the cross toolchain's own root
// (/usr/aarch64-linux-gnu, which g++-aarch64-linux-gnu installs).
std::string guest_root() {
    return ::access("/lib/ld-linux-aarch64.so.1", F_OK) == 0 ? "/" : "/usr/aarch64-linux-gnu";
}

Result qemu(std::vector<std::string> args, const std::string& tunables = "") {
    std::vector<std::string> full = {QEMU_AARCH64, "-cpu", "max", "-L", guest_root()};
    if (!tunables.empty()) {
        full.push_back("-E");
        full.push_back("GLIBC_TUNABLES=" + tunables);
    }
    full.insert(full.end(), args.begin(), args.end());
    int p[2];
    REQUIRE(pipe(p) == 0);
    pid_t c = fork();
    if (c == 0) {
        dup2(p[1], 1);
        close(p[0]);
        std::vector<char*> av;
        for (auto& s : full) av.push_back(s.data());
        av.push_back(nullptr);
        // qemu-user reports guest signals by dying of the same signal.
        execv(av[0], av.data());
        _exit(127);
    }
    close(p[1]);
    Result r;
    char buf[4096];
    ssize_t n;
    while ((n = read(p[0], buf, sizeof buf)) > 0) r.out.append(buf, n);
    close(p[0]);
    int st = 0;
    waitpid(c, &st, 0);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
}

}  // namespace

std::string bulwark::test::tier_requirements() {
    if (!HAVE_CROSS) return "no aarch64 cross compiler (apt-get install g++-aarch64-linux-gnu)";
    if (std::string(QEMU_AARCH64).empty() || access(QEMU_AARCH64, X_OK) != 0)
        return "no qemu-aarch64 (apt-get install qemu-user)";
    if (access((kDir + "/hardening_probe").c_str(), X_OK) != 0) return "aarch64 artifacts not built";
    return {};
}

TEST_CASE("the emulated CPU offers MTE and agentd's probe sees it") {
    auto r = qemu({kDir + "/hardening_probe", "cpu"});
    INFO(r.out);
    CHECK(r.status == 0);
    CHECK(r.out == "arch=aarch64 mte=1\n");
}

TEST_CASE("MTE sync from the policy: the tunable agentd sets kills a use-after-free; off, it survives") {
    auto plan = qemu({kDir + "/hardening_probe", "plan", "sync", kDir + "/uaf_probe"});
    INFO(plan.out);
    REQUIRE(plan.status == 0);
    // Merged into the tool's existing tunables, not replacing them.
    REQUIRE(plan.out.starts_with("TUNABLES glibc.malloc.check=0:glibc.mem.tagging=3\n"));
    // The value the tool runs with is the spawner's: the environment (with a
    // tunable of the tool's own) through harden_env, the step run_tool takes.
    auto env = qemu({kDir + "/hardening_probe", "env", "sync", kDir + "/uaf_probe"}, "glibc.malloc.check=0");
    INFO(env.out);
    REQUIRE(env.status == 0);
    REQUIRE(env.out.starts_with("GLIBC_TUNABLES="));
    const std::string tunables = env.out.substr(15, env.out.find('\n') - 15);
    CHECK(tunables == "glibc.malloc.check=0:glibc.mem.tagging=3");

    auto with = qemu({kDir + "/uaf_probe"}, tunables);
    INFO(with.out);
    CHECK(with.out.find("tagged_addr_ctrl=0x7fff3") != std::string::npos);  // sync mode in force
    CHECK(with.out.find("survived") == std::string::npos);
    CHECK(with.status == 128 + SIGSEGV);

    auto without = qemu({kDir + "/uaf_probe"});  // control
    INFO(without.out);
    CHECK(without.status == 0);
    CHECK(without.out.find("survived") != std::string::npos);

    auto async = qemu({kDir + "/hardening_probe", "plan", "async", kDir + "/uaf_probe"});
    CHECK(async.out.starts_with("TUNABLES glibc.malloc.check=0:glibc.mem.tagging=1\n"));
    // Off: the spawner's step leaves the tool's tunables alone, and the
    // use-after-free survives under them.
    auto off = qemu({kDir + "/hardening_probe", "env", "off", kDir + "/uaf_probe"}, "glibc.malloc.check=0");
    CHECK(off.out == "GLIBC_TUNABLES=glibc.malloc.check=0\n");
    auto off_run = qemu({kDir + "/uaf_probe"}, off.out.substr(15, off.out.find('\n') - 15));
    CHECK(off_run.status == 0);
}

TEST_CASE("BTI and PAC properties are read correctly from aarch64 objects") {
    auto std_ = qemu({kDir + "/hardening_probe", "props", kDir + "/libbranch_standard.so"});
    auto bti = qemu({kDir + "/hardening_probe", "props", kDir + "/libbranch_bti.so"});
    auto none = qemu({kDir + "/hardening_probe", "props", kDir + "/libbranch_none.so"});
    INFO(std_.out << bti.out << none.out);
    CHECK(std_.out.find("bti=1 pac=1") != std::string::npos);
    CHECK(bti.out.find("bti=1 pac=0") != std::string::npos);
    CHECK(none.out.find("bti=0 pac=0") != std::string::npos);
    // The same reader on the host (x86_64 build) agrees: it is arch-independent.
    auto host = bulwark::read_elf_props(kDir + "/libbranch_standard.so");
    REQUIRE(host);
    CHECK(host->bti);
    CHECK(host->pac);
}

TEST_CASE("require bti refuses a tool whose libraries lack it, naming them") {
    // The probe itself is built with branch protection, but Debian's
    // aarch64 libc is not: the closure lacks BTI.
    auto r = qemu({kDir + "/hardening_probe", "plan", "off", kDir + "/uaf_probe", "bti"});
    INFO(r.out);
    CHECK(r.status == 1);
    CHECK(r.out.starts_with("REFUSED hardening: required bti: missing in"));
    CHECK(r.out.find("libc.so.6") != std::string::npos);
    auto ok = qemu({kDir + "/hardening_probe", "plan", "off", kDir + "/uaf_probe", "nx", "relro"});
    INFO(ok.out);
    CHECK(ok.status == 0);
    CHECK(ok.out.find("IN_FORCE nx: yes") != std::string::npos);
}
