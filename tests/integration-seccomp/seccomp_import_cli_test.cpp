// `policyc import-seccomp` run as a user runs it: the printed syscalls:
// section, read back as a spec, compiles to a filter that decides every
// syscall number like the imported profile itself.
#include <catch2/catch.hpp>

#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <yaml-cpp/yaml.h>

#include "bulwark/policy/cbpf.h"
#include "bulwark/policy/seccomp.h"

using namespace bulwark::policy;

namespace {

struct Run {
    int status = -1;
    std::string out;
};

Run run(const std::string& cmd) {
    Run r;
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

uint16_t errno_from(const std::string& name) {
    for (int e = 1; e < 4096; ++e)
        if (const char* n = strerrorname_np(e); n && name == n) return static_cast<uint16_t>(e);
    FAIL("unknown errno name " << name);
    return 0;
}

SeccompAction action_from(const std::string& a) {
    static const std::map<std::string, SeccompAction> m = {
        {"allow", SeccompAction::Allow}, {"errno", SeccompAction::Errno}, {"kill", SeccompAction::Kill},
        {"log", SeccompAction::Log}, {"trap", SeccompAction::Trap}};
    return m.at(a);
}

SyscallRule rule_from(const YAML::Node& n) {
    SyscallRule r;
    if (n.IsScalar()) {
        r.name = n.as<std::string>();
        return r;
    }
    r.name = n["name"].as<std::string>();
    if (n["args"])
        for (const auto& a : n["args"]) {
            static const std::map<std::string, SyscallArgCond::Op> ops = {
                {"eq", SyscallArgCond::Op::Eq}, {"ne", SyscallArgCond::Op::Ne}, {"lt", SyscallArgCond::Op::Lt},
                {"le", SyscallArgCond::Op::Le}, {"gt", SyscallArgCond::Op::Gt}, {"ge", SyscallArgCond::Op::Ge},
                {"masked_eq", SyscallArgCond::Op::MaskedEq}};
            SyscallArgCond c;
            c.index = static_cast<uint8_t>(a["index"].as<unsigned>());
            c.op = ops.at(a["op"].as<std::string>());
            c.value = a["value"].as<uint64_t>();
            if (a["mask"]) c.mask = a["mask"].as<uint64_t>();
            r.args.push_back(c);
        }
    if (n["action"]) r.action = action_from(n["action"].as<std::string>());
    if (n["errno"]) r.errno_value = errno_from(n["errno"].as<std::string>());
    return r;
}

}  // namespace

TEST_CASE("policyc import-seccomp prints a section equivalent to the profile", "[seccomp][cli]") {
    const std::string profile = BULWARK_SOURCE_DIR "/policy-compiler/data/docker-default-seccomp.json";
    auto r = run(std::string(POLICYC_PATH) + " import-seccomp " + profile);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("# note: ") && Catch::Contains("CAP_SYS_ADMIN"));
    YAML::Node doc = YAML::Load(r.out);
    const YAML::Node sc = doc["syscalls"];
    REQUIRE(sc);
    CHECK(sc["baseline"].as<std::string>() == "none");

    SeccompSpec from_yaml;
    from_yaml.baseline = SeccompSpec::Baseline::None;
    for (const auto& n : sc["allow"]) from_yaml.allow.push_back(rule_from(n));
    if (sc["deny"])
        for (const auto& n : sc["deny"]) from_yaml.deny.push_back(rule_from(n));
    from_yaml.violation = action_from(sc["on_violation"]["action"].as<std::string>());
    from_yaml.violation_errno = errno_from(sc["on_violation"]["errno"].as<std::string>());

    std::ifstream in(profile);
    std::stringstream ss;
    ss << in.rdbuf();
    auto imported = import_seccomp_profile(ss.str(), profile);
    REQUIRE(imported);
    // Compared with i386 accepted on both (Docker's filters judge i386 by
    // the profile): the same decision for every number and arch.
    from_yaml.compat_arches = imported->compat_arches = {"i386"};
    auto a = compile_seccomp(from_yaml);
    auto b = compile_seccomp(*imported);
    INFO((a ? "" : a.error().message));
    REQUIRE(a);
    REQUIRE(b);
    size_t differ = 0;
    for (uint32_t arch : {uint32_t{AUDIT_ARCH_X86_64}, uint32_t{AUDIT_ARCH_I386}})
        for (int nr = 0; nr < 1100; ++nr)
            for (uint64_t a0 : {0ull, 8ull, 40ull, 0x10000000ull, 0xffffffffull}) {
                seccomp_data d{};
                d.arch = arch;
                d.nr = nr;
                d.args[0] = a0;
                if (run_seccomp_filter(a->program, d) != run_seccomp_filter(b->program, d)) ++differ;
            }
    CHECK(differ == 0);
    // By default i386 is refused by both. The printed section's deny rules
    // keep their errno there (clone3: ENOSYS) where the profile's own errno
    // rule is a baseline rule: the errno may differ, an allow never appears.
    from_yaml.compat_arches = imported->compat_arches = {};
    a = compile_seccomp(from_yaml);
    b = compile_seccomp(*imported);
    REQUIRE(a);
    REQUIRE(b);
    size_t allowed = 0;
    for (int nr = 0; nr < 1100; ++nr) {
        seccomp_data d{};
        d.arch = AUDIT_ARCH_I386;
        d.nr = nr;
        for (const auto* p : {&a->program, &b->program})
            if (run_seccomp_filter(*p, d) == SECCOMP_RET_ALLOW) ++allowed;
    }
    CHECK(allowed == 0);
}

TEST_CASE("policyc import-seccomp --json and its errors", "[seccomp][cli]") {
    const std::string profile = BULWARK_SOURCE_DIR "/policy-compiler/data/docker-default-seccomp.json";
    auto r = run(std::string(POLICYC_PATH) + " import-seccomp --json " + profile);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("\"syscalls\"") && Catch::Contains("\"notes\""));
    auto missing = run(std::string(POLICYC_PATH) + " import-seccomp /nonexistent.json 2>/dev/null");
    CHECK(missing.status == 2);
    const std::string bad = "/tmp/bulwark-import-test-" + std::to_string(getpid()) + ".json";
    {
        std::ofstream out(bad);
        out << R"({"defaultAction": "SCMP_ACT_ALLOW"})";
    }
    auto refused = run(std::string(POLICYC_PATH) + " import-seccomp " + bad + " 2>&1");
    std::remove(bad.c_str());
    CHECK(refused.status == 1);
    CHECK_THAT(refused.out, Catch::Contains("deny-list"));
}
