// The OCI runtime-spec seccomp export: loaded the way runc and crun load a
// spec's `linux.seccomp` (libseccomp: a filter with the default action, the
// listed arches, each rule added), then run through the cBPF
// interpreter for every native syscall number against the independent model
// of the rule language (seccomp_model.h).
#include <catch2/catch.hpp>

#include <linux/audit.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "bulwark/policy/cbpf.h"
#include "bulwark/policy/seccomp.h"
#include "seccomp_model.h"

using namespace bulwark::policy;
using nlohmann::json;

namespace {

uint32_t scmp_act(const std::string& a, uint32_t err) {
    if (a == "SCMP_ACT_ALLOW") return SCMP_ACT_ALLOW;
    if (a == "SCMP_ACT_ERRNO") return SCMP_ACT_ERRNO(err);
    if (a == "SCMP_ACT_KILL_PROCESS") return SCMP_ACT_KILL_PROCESS;
    if (a == "SCMP_ACT_LOG") return SCMP_ACT_LOG;
    if (a == "SCMP_ACT_TRAP") return SCMP_ACT_TRAP;
    FAIL("unexpected action " << a);
    return 0;
}

scmp_compare scmp_op(const std::string& op) {
    if (op == "SCMP_CMP_EQ") return SCMP_CMP_EQ;
    if (op == "SCMP_CMP_NE") return SCMP_CMP_NE;
    if (op == "SCMP_CMP_LT") return SCMP_CMP_LT;
    if (op == "SCMP_CMP_LE") return SCMP_CMP_LE;
    if (op == "SCMP_CMP_GT") return SCMP_CMP_GT;
    if (op == "SCMP_CMP_GE") return SCMP_CMP_GE;
    if (op == "SCMP_CMP_MASKED_EQ") return SCMP_CMP_MASKED_EQ;
    FAIL("unexpected op " << op);
    return SCMP_CMP_EQ;
}

// What an OCI runtime builds from the object (runc: libcontainer/seccomp,
// rules added with AddRule/AddRuleConditional, not exact).
std::vector<sock_filter> load_like_runc(const json& oci) {
    const uint32_t def = scmp_act(oci.at("defaultAction"), oci.value("defaultErrnoRet", 1u));
    std::unique_ptr<void, decltype(&seccomp_release)> ctx(seccomp_init(def), &seccomp_release);
    REQUIRE(ctx);
    for (const auto& a : oci.at("architectures")) {
        const std::string name = a;
        const uint32_t token = name == "SCMP_ARCH_X86" ? SCMP_ARCH_X86 : SCMP_ARCH_X86_64;
        const int rc = seccomp_arch_add(ctx.get(), token);
        REQUIRE((rc == 0 || rc == -EEXIST));
    }
    for (const auto& r : oci.at("syscalls")) {
        const uint32_t act = scmp_act(r.at("action"), r.value("errnoRet", 1u));
        std::vector<scmp_arg_cmp> cmps;
        for (const auto& c : r.value("args", json::array()))
            cmps.push_back(scmp_arg_cmp{c.at("index").get<unsigned>(), scmp_op(c.at("op")), c.at("value").get<uint64_t>(),
                                        c.value("valueTwo", uint64_t{0})});
        for (const auto& n : r.at("names")) {
            const int nr = seccomp_syscall_resolve_name(n.get<std::string>().c_str());
            REQUIRE(nr != __NR_SCMP_ERROR);
            const int rc = seccomp_rule_add_array(ctx.get(), act, nr, static_cast<unsigned>(cmps.size()),
                                                        cmps.empty() ? nullptr : cmps.data());
            INFO(n << ": " << r.dump());
            REQUIRE(rc == 0);
        }
    }
    const int fd = memfd_create("oci-seccomp", MFD_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(seccomp_export_bpf(ctx.get(), fd) == 0);
    const off_t size = lseek(fd, 0, SEEK_END);
    std::vector<sock_filter> prog(static_cast<size_t>(size) / sizeof(sock_filter));
    REQUIRE(pread(fd, prog.data(), static_cast<size_t>(size), 0) == size);
    ::close(fd);
    return prog;
}

void check_export(const SeccompSpec& spec) {
    auto oci = export_oci_seccomp(spec);
    INFO((oci ? "" : oci.error().message));
    REQUIRE(oci);
    const auto prog = load_like_runc(*oci);
    REQUIRE(check_seccomp_filter(prog));
    const auto baseline = spec.baseline == SeccompSpec::Baseline::Default ? docker_default_rules()
                                                                          : std::vector<SyscallRule>{};
    bulwark::test::Model model{spec, baseline};
    size_t checked = 0, mismatches = 0;
    for (int nr = 0; nr < 1100; ++nr) {
        std::vector<std::vector<uint64_t>> samples{{0, 0, 0, 0, 0, 0}};
        if (auto name = bulwark::test::name_of(SCMP_ARCH_X86_64, nr)) {
            std::vector<const std::vector<SyscallRule>*> lists{&spec.allow, &spec.deny, &baseline};
            samples = bulwark::test::arg_samples(*name, lists);
            bulwark::test::add_family_samples(spec, *name, samples);
        }
        for (const auto& s : samples) {
            uint64_t args[6];
            std::copy(s.begin(), s.end(), args);
            seccomp_data d{};
            d.nr = nr;
            d.arch = AUDIT_ARCH_X86_64;
            for (int i = 0; i < 6; ++i) d.args[i] = args[i];
            const uint32_t got = run_seccomp_filter(prog, d);
            const uint32_t want = model.expect(AUDIT_ARCH_X86_64, nr, args);
            ++checked;
            if (got != want && ++mismatches <= 10)
                FAIL_CHECK("nr " << nr << " (" << bulwark::test::name_of(SCMP_ARCH_X86_64, nr).value_or("?")
                                 << ") arg0 " << args[0] << ": got " << std::hex << got << " want " << want);
        }
    }
    CHECK(mismatches == 0);
    CHECK(checked > 1000);
}

SyscallRule oci_rule(std::string name, uint32_t id, std::vector<SyscallArgCond> args = {},
                 SeccompAction action = SeccompAction::Allow, uint16_t err = 0) {
    return SyscallRule{std::move(name), std::move(args), action, err, id};
}

}  // namespace

TEST_CASE("OCI export: the Docker baseline decides as the rule language says", "[seccomp][oci]") {
    SeccompSpec spec;
    check_export(spec);
    auto oci = export_oci_seccomp(spec);
    REQUIRE(oci);
    CHECK((*oci)["defaultAction"] == "SCMP_ACT_ERRNO");
    CHECK((*oci)["defaultErrnoRet"] == ENOSYS);
    CHECK((*oci)["architectures"] == json::array({"SCMP_ARCH_X86_64"}));
}

TEST_CASE("OCI export: denies with conditions over allows, kill and log actions", "[seccomp][oci]") {
    using Op = SyscallArgCond::Op;
    SeccompSpec spec;
    spec.deny = {oci_rule("ptrace", 2, {}, SeccompAction::Errno, EPERM),
                 oci_rule("bpf", 3, {}, SeccompAction::Kill),
                 oci_rule("socket", 4, {{0, Op::Eq, AF_PACKET, 0}}, SeccompAction::Errno, EACCES),
                 oci_rule("chmod", 5, {{1, Op::MaskedEq, 04000, 04000}}, SeccompAction::Errno, EPERM),
                 oci_rule("bind", 6, {}, SeccompAction::Errno, EPERM)};
    spec.violation = SeccompAction::Errno;
    spec.violation_errno = EPERM;
    check_export(spec);
    SECTION("baseline none, an allow list, log on violation") {
        spec.baseline = SeccompSpec::Baseline::None;
        spec.allow = {oci_rule("read", 7), oci_rule("write", 8), oci_rule("exit_group", 9),
                      oci_rule("openat", 10, {{2, Op::MaskedEq, 0, 3}})};
        spec.violation = SeccompAction::Log;
        check_export(spec);
    }
    SECTION("network.families: socket(2) narrowed to the list in the runtime's filter too") {
        spec.socket_families = std::vector<int>{AF_UNIX, AF_INET};
        check_export(spec);
        auto oci = export_oci_seccomp(spec);
        REQUIRE(oci);
        const uint64_t netlink[6] = {AF_NETLINK, SOCK_RAW, 0, 0, 0, 0};
        seccomp_data d{};
        d.nr = __NR_socket;
        d.arch = AUDIT_ARCH_X86_64;
        std::copy(std::begin(netlink), std::end(netlink), d.args);
        CHECK(run_seccomp_filter(load_like_runc(*oci), d) == (SECCOMP_RET_ERRNO | EPERM));
        // ... and i386, whose socketcall hides the family, is an error, not a wider filter.
        spec.compat_arches = {"i386"};
        spec.socket_families_rule_id = 12;
        auto refused = export_oci_seccomp(spec);
        REQUIRE_FALSE(refused);
        CHECK(refused.error().rule_id == 12);
    }
    SECTION("i386 accepted: listed") {
        spec.compat_arches = {"i386"};
        auto oci = export_oci_seccomp(spec);
        REQUIRE(oci);
        CHECK((*oci)["architectures"] == json::array({"SCMP_ARCH_X86_64", "SCMP_ARCH_X86"}));
    }
}

TEST_CASE("OCI export: a spec the compiler refuses is refused", "[seccomp][oci]") {
    SeccompSpec spec;
    spec.violation = SeccompAction::Allow;
    CHECK_FALSE(export_oci_seccomp(spec));
}

TEST_CASE("OCI export: rule mixes libseccomp builds wrongly as written reach the runtime cut apart", "[seccomp][oci]") {
    // Control: the first mix's socket rules as precedence alone settles them
    // (families narrowed, the refusal below them), reduced to four: the
    // runtime's libseccomp drops the last, so socket(AF_VSOCK, SOCK_DGRAM)
    // gets the default instead of the family refusal.
    const json precedence_form = json::parse(R"({
        "defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 38, "architectures": ["SCMP_ARCH_X86_64"],
        "syscalls": [
          {"names": ["socket"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 2, "op": "SCMP_CMP_EQ"}]},
          {"names": ["socket"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 10, "op": "SCMP_CMP_EQ"}]},
          {"names": ["socket"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
           "args": [{"index": 0, "value": 41, "op": "SCMP_CMP_GE"}]},
          {"names": ["socket"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
           "args": [{"index": 0, "value": 11, "op": "SCMP_CMP_GE"}, {"index": 1, "value": 2, "op": "SCMP_CMP_EQ"}]}
        ]})");
    seccomp_data d{};
    d.nr = __NR_socket;
    d.arch = AUDIT_ARCH_X86_64;
    d.args[0] = AF_VSOCK;
    d.args[1] = SOCK_DGRAM;
    CHECK(run_seccomp_filter(load_like_runc(precedence_form), d) == (SECCOMP_RET_ERRNO | ENOSYS));
    for (const auto& [what, spec] : bulwark::test::libseccomp_trouble_specs()) {
        INFO(what);
        check_export(spec);
    }
    auto oci = export_oci_seccomp(bulwark::test::libseccomp_trouble_specs().front().spec);
    REQUIRE(oci);
    CHECK(run_seccomp_filter(load_like_runc(*oci), d) == (SECCOMP_RET_ERRNO | EPERM));
}
