// Docker / OCI profile import: the compiled filter decides every syscall
// number as libseccomp does when it loads the same profile directly.
#include <catch2/catch.hpp>

#include <linux/audit.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "bulwark/policy/cbpf.h"
#include "bulwark/policy/seccomp.h"
#include "seccomp_model.h"

using namespace bulwark::policy;

namespace bulwark::policy {
extern const std::string_view kDockerDefaultSeccompProfile;
}

namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    REQUIRE(in);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

uint32_t action_of(const std::string& a, uint32_t err) {
    if (a == "SCMP_ACT_ALLOW") return SCMP_ACT_ALLOW;
    if (a == "SCMP_ACT_ERRNO") return SCMP_ACT_ERRNO(err);
    if (a == "SCMP_ACT_KILL" || a == "SCMP_ACT_KILL_THREAD") return SCMP_ACT_KILL_THREAD;
    if (a == "SCMP_ACT_KILL_PROCESS") return SCMP_ACT_KILL_PROCESS;
    if (a == "SCMP_ACT_TRAP") return SCMP_ACT_TRAP;
    if (a == "SCMP_ACT_LOG") return SCMP_ACT_LOG;
    FAIL("unexpected action " << a);
    return 0;
}

std::pair<int, int> kernel() {
    utsname u{};
    int a = 0, b = 0;
    uname(&u);
    std::sscanf(u.release, "%d.%d", &a, &b);
    return {a, b};
}

// The profile loaded straight into libseccomp the way Docker does it (no
// capabilities, host arch amd64), on x86_64 + i386.
std::vector<sock_filter> reference_program(const std::string& json) {
    auto doc = nlohmann::json::parse(json);
    const uint32_t def = action_of(doc["defaultAction"], doc.value("defaultErrnoRet", 1u));
    scmp_filter_ctx ctx = seccomp_init(def);
    REQUIRE(ctx);
    seccomp_arch_add(ctx, SCMP_ARCH_X86);
    seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    for (const auto& call : doc["syscalls"]) {
        auto inc = call.value("includes", nlohmann::json::object());
        auto exc = call.value("excludes", nlohmann::json::object());
        auto has = [](const nlohmann::json& list, const char* v) {
            for (const auto& x : list) if (x == v) return true;
            return false;
        };
        if (exc.contains("arches") && has(exc["arches"], "amd64")) continue;
        if (inc.contains("arches") && !has(inc["arches"], "amd64")) continue;
        if (inc.contains("caps") && !inc["caps"].empty()) continue;
        if (inc.contains("minKernel")) {
            int a = 0, b = 0;
            std::sscanf(inc["minKernel"].get<std::string>().c_str(), "%d.%d", &a, &b);
            if (kernel() < std::pair{a, b}) continue;
        }
        const uint32_t act = action_of(call["action"], call.value("errnoRet", 1u));
        std::vector<scmp_arg_cmp> cmps;
        for (const auto& a : call.value("args", nlohmann::json::array())) {
            static const std::map<std::string, scmp_compare> ops = {
                {"SCMP_CMP_EQ", SCMP_CMP_EQ}, {"SCMP_CMP_NE", SCMP_CMP_NE}, {"SCMP_CMP_LT", SCMP_CMP_LT},
                {"SCMP_CMP_LE", SCMP_CMP_LE}, {"SCMP_CMP_GT", SCMP_CMP_GT}, {"SCMP_CMP_GE", SCMP_CMP_GE},
                {"SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ}};
            cmps.push_back(scmp_arg_cmp{a["index"].get<unsigned>(), ops.at(a["op"].get<std::string>()),
                                        a["value"].get<uint64_t>(), a.value("valueTwo", uint64_t{0})});
        }
        for (const auto& n : call["names"]) {
            int nr = seccomp_syscall_resolve_name(n.get<std::string>().c_str());
            if (nr == __NR_SCMP_ERROR) continue;
            if (act == def) continue;
            int rc = seccomp_rule_add_array(ctx, act, nr, static_cast<unsigned>(cmps.size()),
                                            cmps.empty() ? nullptr : cmps.data());
            INFO(n.get<std::string>());
            REQUIRE(rc == 0);
        }
    }
    int fd = memfd_create("ref", 0);
    REQUIRE(seccomp_export_bpf(ctx, fd) == 0);
    seccomp_release(ctx);
    off_t size = lseek(fd, 0, SEEK_END);
    std::vector<sock_filter> prog(static_cast<size_t>(size) / sizeof(sock_filter));
    REQUIRE(pread(fd, prog.data(), static_cast<size_t>(size), 0) == size);
    close(fd);
    return prog;
}

void check_same_as_libseccomp(const std::string& json) {
    auto spec = import_seccomp_profile(json, "profile.json");
    INFO((spec ? "" : spec.error().message));
    REQUIRE(spec);
    // Docker's filters accept i386 under the same rules: compared with i386
    // accepted (the rule language's architectures: [native, i386]).
    spec->compat_arches = {"i386"};
    auto plan = compile_seccomp(*spec);
    INFO((plan ? "" : plan.error().message));
    REQUIRE(plan);
    const auto ref = reference_program(json);
    REQUIRE(check_seccomp_filter(ref));
    size_t compared = 0, differ = 0;
    for (auto [audit, scmp] : {std::pair<uint32_t, uint32_t>{AUDIT_ARCH_X86_64, SCMP_ARCH_X86_64},
                               std::pair<uint32_t, uint32_t>{AUDIT_ARCH_I386, SCMP_ARCH_X86}}) {
        for (int nr = 0; nr < 1100; ++nr) {
            std::vector<std::vector<uint64_t>> samples{{0, 0, 0, 0, 0, 0}};
            if (auto name = bulwark::test::name_of(scmp, nr)) {
                std::vector<const std::vector<SyscallRule>*> lists{&spec->imported};
                samples = bulwark::test::arg_samples(*name, lists);
            }
            for (const auto& s : samples) {
                seccomp_data d{};
                d.nr = nr;
                d.arch = audit;
                std::copy(s.begin(), s.end(), d.args);
                uint32_t want = run_seccomp_filter(ref, d);
                if (want == SECCOMP_RET_KILL_THREAD) want = SECCOMP_RET_KILL_PROCESS;  // documented
                // documented: openat2 answers ENOSYS whatever a profile says (its mode is unreadable)
                if (auto name = bulwark::test::name_of(scmp, nr); name && *name == "openat2" && want == SECCOMP_RET_ALLOW)
                    want = SECCOMP_RET_ERRNO | ENOSYS;
                const uint32_t got = run_seccomp_filter(plan->program, d);
                ++compared;
                if (got != want && ++differ <= 10)
                    FAIL_CHECK("arch " << std::hex << audit << std::dec << " nr " << nr << " a0 "
                                       << std::hex << s[0] << ": got " << got << " libseccomp " << want);
            }
        }
    }
    CHECK(differ == 0);
    CHECK(compared >= 2200);
}

}  // namespace

TEST_CASE("a profile with a number no double holds is an error, not an exception", "[seccomp][import]") {
    // found by fuzz_seccomp_profile: nlohmann throws out_of_range, not parse_error
    auto spec = import_seccomp_profile(R"({"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 55e555})", "big.json");
    REQUIRE_FALSE(spec);
    CHECK_THAT(spec.error().message, Catch::Contains("big.json: not valid JSON"));
}

TEST_CASE("the embedded Docker profile is the data file", "[seccomp][import]") {
    CHECK(std::string(kDockerDefaultSeccompProfile) ==
          read_file(BULWARK_SOURCE_DIR "/policy-compiler/data/docker-default-seccomp.json"));
}

TEST_CASE("Docker's default profile imports with notes and decides like libseccomp",
          "[seccomp][import]") {
    const std::string json(kDockerDefaultSeccompProfile);
    auto spec = import_seccomp_profile(json, "default.json");
    REQUIRE(spec);
    CHECK(spec->baseline == SeccompSpec::Baseline::Imported);
    CHECK(spec->violation == SeccompAction::Errno);
    CHECK(spec->violation_errno == EPERM);
    bool cap_note = false;
    for (const auto& n : spec->notes)
        if (n.find("CAP_SYS_ADMIN") != std::string::npos) cap_note = true;
    CHECK(cap_note);
    check_same_as_libseccomp(json);
}

TEST_CASE("an OCI profile with every supported feature decides like libseccomp",
          "[seccomp][import]") {
    const std::string json = R"({
      "defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 38,
      "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86"],
      "syscalls": [
        {"names": ["read", "write", "exit_group", "brk", "mmap", "futex"], "action": "SCMP_ACT_ALLOW"},
        {"names": ["openat"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 2, "value": 3, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]},
        {"names": ["socket"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 10, "op": "SCMP_CMP_LE"}, {"index": 1, "value": 1, "op": "SCMP_CMP_EQ"}]},
        {"names": ["kill"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 1, "value": 9, "op": "SCMP_CMP_NE"}]},
        {"names": ["prctl"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 40, "op": "SCMP_CMP_LT"}]},
        {"names": ["dup3"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 2, "value": 524288, "op": "SCMP_CMP_GE"}]},
        {"names": ["ptrace"], "action": "SCMP_ACT_KILL"},
        {"names": ["bpf"], "action": "SCMP_ACT_KILL_PROCESS"},
        {"names": ["mount"], "action": "SCMP_ACT_TRAP"},
        {"names": ["getpid"], "action": "SCMP_ACT_LOG"},
        {"names": ["unshare"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13, "comment": "no namespaces"},
        {"names": ["chroot"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_CHROOT"]}},
        {"names": ["arch_prctl"], "action": "SCMP_ACT_ALLOW", "includes": {"arches": ["amd64"]}},
        {"names": ["set_tls"], "action": "SCMP_ACT_ALLOW", "includes": {"arches": ["arm"]}},
        {"names": ["clock_settime"], "action": "SCMP_ACT_ALLOW", "excludes": {"arches": ["amd64"]}},
        {"names": ["process_vm_readv"], "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": "4.8"}},
        {"names": ["not_a_syscall_yet"], "action": "SCMP_ACT_ALLOW"}
      ]})";
    auto spec = import_seccomp_profile(json, "oci.json");
    REQUIRE(spec);
    CHECK(spec->violation_errno == 38);
    std::string notes;
    for (const auto& n : spec->notes) notes += n + "\n";
    CHECK_THAT(notes, Catch::Contains("CAP_SYS_CHROOT"));
    CHECK_THAT(notes, Catch::Contains("not_a_syscall_yet"));
    CHECK_THAT(notes, Catch::Contains("kills the whole process"));
    CHECK_THAT(notes, Catch::Contains("other architectures"));
    check_same_as_libseccomp(json);
}

TEST_CASE("unsupported or malformed profile content is an error naming it", "[seccomp][import]") {
    auto err = [](const std::string& json) {
        auto r = import_seccomp_profile(json, "p.json");
        REQUIRE_FALSE(r);
        return r.error().message;
    };
    CHECK_THAT(err("{"), Catch::Contains("JSON"));
    CHECK_THAT(err(R"({"syscalls": []})"), Catch::Contains("defaultAction"));
    CHECK_THAT(err(R"({"defaultAction": "SCMP_ACT_ALLOW"})"), Catch::Contains("deny-list"));
    CHECK_THAT(err(R"({"defaultAction": "SCMP_ACT_ERRNO", "mystery": 1})"), Catch::Contains("mystery"));
    CHECK_THAT(err(R"({"defaultAction": "SCMP_ACT_ERRNO", "flags": ["SECCOMP_FILTER_FLAG_LOG"]})"),
               Catch::Contains("flags"));
    CHECK_THAT(err(R"({"defaultAction": "SCMP_ACT_ERRNO", "listenerPath": "/run/x.sock"})"),
               Catch::Contains("listenerPath"));
    CHECK_THAT(err(R"({"defaultAction": "SCMP_ACT_NOTIFY"})"), Catch::Contains("SCMP_ACT_NOTIFY"));
    CHECK_THAT(err(R"({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_TRACE"}]})"),
               Catch::Contains("SCMP_ACT_TRACE"));
    CHECK_THAT(err(R"({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "priority": 3}]})"),
               Catch::Contains("priority"));
    CHECK_THAT(err(R"({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "includes": {"kernel": "5"}}]})"),
               Catch::Contains("kernel"));
    CHECK_THAT(err(R"({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_EQ"}, {"index": 0, "value": 2, "op": "SCMP_CMP_EQ"}]}]})"),
               Catch::Contains("compared twice"));
    CHECK_THAT(err(R"({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 6, "value": 1, "op": "SCMP_CMP_EQ"}]}]})"),
               Catch::Contains("index 6"));
    CHECK_THAT(err(R"({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 1, "valueTwo": 2, "op": "SCMP_CMP_EQ"}]}]})"),
               Catch::Contains("valueTwo"));
    CHECK_THAT(err(R"({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "errnoRet": 5}]})"),
               Catch::Contains("errnoRet"));
    CHECK_THAT(err(R"({"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_VAX"]})"),
               Catch::Contains("SCMP_ARCH_VAX"));
    CHECK_THAT(err(R"({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": -1, "op": "SCMP_CMP_EQ"}]}]})"),
               Catch::Contains("non-negative"));
}

TEST_CASE("an imported clone3 allow is answered ENOSYS with a note", "[seccomp][import]") {
    auto spec = import_seccomp_profile(
        R"({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["clone3", "read"], "action": "SCMP_ACT_ALLOW"}]})",
        "p.json");
    REQUIRE(spec);
    REQUIRE(spec->imported.size() == 1);
    CHECK(spec->imported[0].name == "read");
    REQUIRE_FALSE(spec->notes.empty());
    CHECK_THAT(spec->notes[0], Catch::Contains("clone3"));
}
