// Hardening on the host (x86_64): ELF properties of tools and their
// libraries, require/warn outcomes, MTE reported unsupported, speculation
// controls in force inside the sandbox.
#include <catch2/catch.hpp>

#include <sys/prctl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include "bulwark/policy/elf_props.h"
#include "spawn_fixture.h"
#include "sandbox/hardening.h"
#include "sandbox/spawner.h"

using namespace bulwark;

TEST_CASE("ELF properties: hardened vs soft builds of the same program") {
    auto h = read_elf_props(ELF_HARD);
    auto s = read_elf_props(ELF_SOFT);
    REQUIRE(h);
    REQUIRE(s);
    CHECK(h->pie);
    CHECK(h->relro);
    CHECK(h->bind_now);
    CHECK(h->nx_stack);
    CHECK(h->stack_protector);
    CHECK(h->fortify);
    CHECK_FALSE(s->pie);
    CHECK_FALSE(s->relro);
    CHECK_FALSE(s->bind_now);
    CHECK_FALSE(s->nx_stack);
    CHECK_FALSE(s->stack_protector);
    CHECK_FALSE(s->fortify);
    CHECK(std::find(h->needed.begin(), h->needed.end(), "libc.so.6") != h->needed.end());
    std::vector<std::string> missing;
    auto libs = read_needed_closure(*h, "", missing);
    CHECK(missing.empty());
    REQUIRE_FALSE(libs.empty());
    CHECK(libs[0].path.ends_with("libc.so.6"));
}

TEST_CASE("ELF properties: CET IBT/SHSTK notes") {
    auto on = read_elf_props(CET_ON);
    auto off = read_elf_props(CET_OFF);
    REQUIRE(on);
    REQUIRE(off);
    CHECK(on->cet_ibt);
    CHECK(on->cet_shstk);
    CHECK_FALSE(off->cet_ibt);
    CHECK_FALSE(off->cet_shstk);
}

TEST_CASE("tunables are merged, not replaced") {
    CHECK(merge_tunables("", 3) == "glibc.mem.tagging=3");
    CHECK(merge_tunables("glibc.malloc.check=3:glibc.mem.tagging=1", 3) ==
          "glibc.malloc.check=3:glibc.mem.tagging=3");
}

TEST_CASE("hardening policy in a run: require refuses, warn reports, MTE unsupported on x86_64") {
    auto b = test::make_bundle({.binaries = {ELF_SOFT, ELF_HARD}});
    b.hardening.properties = {{"pie", policy::Requirement::Require}, {"nx", policy::Requirement::Require}};
    RunRequest soft;
    soft.argv = {ELF_SOFT, "hi"};
    auto r = run_tool(b, soft);
    CHECK(r.outcome == RunOutcome::Refused);
    CHECK(r.error.find("required pie: missing in") != std::string::npos);

    RunRequest hard;
    hard.argv = {ELF_HARD, "hi"};
    auto ok = run_tool(b, hard);
    INFO(summary(ok));
    CHECK(ok.exit_code == 0);
    CHECK(ok.stdout_data == "hi\n");
    CHECK(std::find(ok.hardening.begin(), ok.hardening.end(), "pie: yes") != ok.hardening.end());

    // Warn: runs, and says what is missing. Libraries count for cet-ibt.
    b.hardening.properties = {{"cet-shstk", policy::Requirement::Warn}};
    b.hardening.mte = policy::MteMode::Sync;
    auto w = run_tool(b, hard);
    INFO(summary(w));
    CHECK(w.exit_code == 0);
    bool warned_mte = false, warned_cet = false;
    for (const auto& s : w.warnings) {
        warned_mte |= s.find("MTE unsupported on x86_64") != std::string::npos;
        warned_cet |= s.find("cet-shstk: missing in") != std::string::npos;
    }
    CHECK(warned_mte);
    CHECK(warned_cet);

    b.hardening.properties = {{"mte", policy::Requirement::Require}};
    auto m = run_tool(b, hard);
    CHECK(m.outcome == RunOutcome::Refused);
    CHECK(m.error.find("MTE unsupported on x86_64") != std::string::npos);
}

TEST_CASE("speculation controls reach the tool, or the run is refused when they cannot") {
    auto b = test::make_bundle({.binaries = {"/usr/bin/cat"}});
    b.hardening.disable_store_bypass = true;
    RunRequest req;
    req.argv = {"/usr/bin/cat", "/proc/self/status"};
    auto r = run_tool(b, req);
    INFO(summary(r));
    int v = prctl(PR_GET_SPECULATION_CTRL, PR_SPEC_STORE_BYPASS, 0, 0, 0);
    if (v > 0 && !(v & PR_SPEC_PRCTL) && !(v & (PR_SPEC_DISABLE | PR_SPEC_FORCE_DISABLE))) {
        // This host: store bypass mitigation off globally, no per-task control.
        CHECK(r.outcome == RunOutcome::Refused);
        CHECK(r.error.find("cannot be disabled per task") != std::string::npos);
        return;
    }
    REQUIRE(r.exit_code == 0);
    auto pos = r.stdout_data.find("Speculation_Store_Bypass:");
    REQUIRE(pos != std::string::npos);
    std::string line = r.stdout_data.substr(pos, r.stdout_data.find('\n', pos) - pos);
    INFO(line);
    // "thread force mitigated", or "not vulnerable" on CPUs without the issue.
    CHECK((line.find("force mitigated") != std::string::npos || line.find("not vulnerable") != std::string::npos));
}

TEST_CASE("the ELF reader survives hostile input (the tool's binary is not trusted)") {
    // Mutated and truncated copies of a real binary, and pure noise: every
    // one must parse or fail cleanly, never crash or hang.
    std::ifstream in("/usr/bin/true", std::ios::binary);
    std::string orig((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(orig.size() > 1000);
    std::mt19937_64 rng(42);
    std::string path = "/tmp/bulwark-elf-fuzz-" + std::to_string(getpid());
    int parsed = 0, rejected = 0;
    for (int i = 0; i < 800; ++i) {
        std::string data = orig;
        if (i % 5 == 4) data.resize(rng() % data.size());
        int flips = 1 + static_cast<int>(rng() % 16);
        for (int f = 0; f < flips && !data.empty(); ++f) {
            // Bias towards the headers, where the offsets live.
            size_t at = (rng() % 2) ? rng() % std::min<size_t>(data.size(), 1024) : rng() % data.size();
            data[at] = static_cast<char>(rng());
        }
        if (i % 50 == 49) {
            data.assign(4096, '\0');
            for (auto& c : data) c = static_cast<char>(rng());
            std::memcpy(data.data(), "\x7f" "ELF\x02\x01\x01", 7);
        }
        {
            std::ofstream out(path, std::ios::binary | std::ios::trunc);
            out.write(data.data(), static_cast<std::streamsize>(data.size()));
        }
        auto p = read_elf_props(path);
        (p ? parsed : rejected)++;
        if (p) {
            std::vector<std::string> missing;
            read_needed_closure(*p, "/nonexistent-sysroot", missing);
        }
    }
    ::unlink(path.c_str());
    CHECK(parsed + rejected == 800);
    CHECK(parsed > 0);
}
