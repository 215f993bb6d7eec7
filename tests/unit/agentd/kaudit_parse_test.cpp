// Kernel audit record parser: the record texts this host's kernel (6.18)
// really sends for a Landlock-denied read after exec and a seccomp errno
// action logged with SECCOMP_FILTER_FLAG_LOG, then malformed input.
#include <catch2/catch.hpp>

#include <cerrno>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <linux/audit.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "bulwark/policy/compiler.h"
#include "bulwark/policy/evaluator.h"
#include "kaudit/kernel_audit.h"
#include "kaudit/kernel_audit_parse.h"
#include "tasks/record_operation.h"
#include "kaudit/run_registry.h"

using namespace bulwark::kaudit;

namespace {

struct Line {
    uint16_t type;
    std::string body;
};

std::vector<Line> load_fixture(const std::string& name) {
    std::ifstream in(std::string(KAUDIT_FIXTURES) + "/" + name);
    REQUIRE(in.good());
    std::vector<Line> out;
    std::string l;
    while (std::getline(in, l)) {
        if (l.empty() || l[0] == '#') continue;
        auto tab = l.find('\t');
        REQUIRE(tab != std::string::npos);
        out.push_back({static_cast<uint16_t>(std::stoul(l.substr(0, tab))), l.substr(tab + 1)});
    }
    return out;
}

std::vector<KernelDenial> feed_all(EventAssembler& a, const std::vector<Line>& lines) {
    std::vector<KernelDenial> out;
    int64_t t = 0;
    for (const auto& l : lines) a.feed(l.type, l.body, t++, out);
    return out;
}

}  // namespace

TEST_CASE("record header, quoted, hex and (null) values") {
    auto r = parse_record(rtype::kLandlockAccess,
                          "audit(1796284273.871:1172646): domain=1063ac54c blockers=fs.read_file "
                          "path=2F746D702F6B61756469742D70726F62652F737020616365 dev=\"vda\" ino=10953475");
    REQUIRE(r);
    CHECK(r->sec == 1796284273);
    CHECK(r->msec == 871);
    CHECK(r->serial == 1172646);
    CHECK(r->ts_ns() == 1796284273871000000);
    CHECK(*r->get("path") == "/tmp/kaudit-probe/sp ace");
    CHECK(*r->get("dev") == "vda");
    CHECK(r->get_u64("domain", 16) == 0x1063ac54cull);
    CHECK(r->get_u64("ino") == 10953475u);
    CHECK(r->get("missing") == nullptr);

    auto s = parse_record(rtype::kSyscall, "audit(1.002:3): key=(null) tty=(none) comm=\"cat\"");
    REQUIRE(s);
    CHECK(*s->get("key") == "");
    CHECK(*s->get("comm") == "cat");
    // A non-untrusted key keeps hex-looking text as it is.
    CHECK(decode_value("a1", "7fff9f068a7f") == "7fff9f068a7f");
    CHECK(decode_value("proctitle", "636174002F6574632F706173737764") == "cat /etc/passwd");
    // Odd length or non-hex under an untrusted key: unchanged.
    CHECK(decode_value("path", "abc") == "abc");
    CHECK(decode_value("path", "zz") == "zz");
    // EOE has an empty body after the header.
    auto e = parse_record(rtype::kEoe, "audit(1796284273.871:1172646): ");
    REQUIRE(e);
    CHECK(e->fields.empty());
    CHECK(parse_record(rtype::kEoe, "audit(1796284273.871:1172646):"));
}

TEST_CASE("Landlock denials after exec, grouped with their SYSCALL and PROCTITLE records") {
    auto lines = load_fixture("host-6.18.txt");
    EventAssembler a;
    auto out = feed_all(a, lines);
    std::vector<KernelDenial> ll, sc;
    for (auto& d : out) (d.layer == KernelDenial::Layer::Landlock ? ll : sc).push_back(d);
    REQUIRE(ll.size() == 4);
    CHECK(ll[0].object == "/etc/ld.so.cache");
    CHECK(ll[1].object == "/etc/locale.alias");
    CHECK(ll[2].object == "/etc/passwd");
    CHECK(ll[3].object == "/tmp/kaudit-probe/sp ace");  // hex-encoded in the record
    for (const auto& d : ll) {
        CHECK(d.blockers == "fs.read_file");
        CHECK(d.domain == 0x1063ac54cull);
        CHECK(d.domain_creator_pid == 1149);  // from the "allocated" record
        CHECK(d.pid == 1149);
        CHECK(d.ppid == 1147);
        CHECK(d.syscall == 257);  // openat
        CHECK(d.arch == 0xc000003eu);
        REQUIRE(d.exit);
        CHECK(*d.exit == -13);
        CHECK(d.comm == "cat");
        CHECK(d.exe == "/usr/bin/cat");
        CHECK(d.proctitle == "cat /etc/passwd /etc/hostname /tmp/kaudit-probe/sp ace");
    }
    CHECK(ll[2].serial == 1172645);
    CHECK(ll[2].ts_ns == 1796284273871000000);
    // The domain's own count, from its "deallocated" record.
    CHECK(a.stats().landlock_domain_denials == 4);
    CHECK(a.stats().landlock_domains == 1);
    CHECK(a.stats().malformed == 0);
    CHECK(a.stats().incomplete == 0);
    CHECK(a.pending() == 0);  // every event ended with its EOE

    REQUIRE(sc.size() == 3);
    for (const auto& d : sc) {
        CHECK(d.pid == 1204);
        CHECK(d.syscall == 110);  // getppid
        CHECK(d.arch == 0xc000003eu);
        CHECK(seccomp_action_name(d.action) == "errno");
        CHECK(d.comm == "probe");
        CHECK(d.exe == "/tmp/kaudit-probe/probe");
        CHECK(d.signal == 0);
    }
    CHECK(sc[0].serial != sc[1].serial);
    CHECK(a.stats().denials == 7);
}

TEST_CASE("an event whose EOE never comes is completed by age and counted") {
    EventAssembler a;
    std::vector<KernelDenial> out;
    a.feed(rtype::kLandlockAccess, "audit(5.000:9): domain=1a blockers=fs.write_file path=\"/x\" dev=\"vda\" ino=1", 100, out);
    a.feed(rtype::kSyscall, "audit(5.000:9): arch=c000003e syscall=2 exit=-13 ppid=1 pid=7 comm=\"w\" exe=\"/w\"", 100, out);
    CHECK(out.empty());
    a.flush_older(50, out);
    CHECK(out.empty());
    a.flush_older(100, out);
    REQUIRE(out.size() == 1);
    CHECK(out[0].pid == 7);
    CHECK(out[0].blockers == "fs.write_file");
    CHECK(a.stats().incomplete == 1);
}

TEST_CASE("records interleaved from two events stay apart") {
    EventAssembler a;
    std::vector<KernelDenial> out;
    a.feed(rtype::kLandlockAccess, "audit(5.000:10): domain=1a blockers=fs.read_file path=\"/a\" dev=\"vda\" ino=1", 0, out);
    a.feed(rtype::kLandlockAccess, "audit(5.000:11): domain=1b blockers=fs.read_file path=\"/b\" dev=\"vda\" ino=2", 0, out);
    a.feed(rtype::kSyscall, "audit(5.000:11): arch=c000003e syscall=257 exit=-13 ppid=1 pid=22 comm=\"b\" exe=\"/b\"", 0, out);
    a.feed(rtype::kSyscall, "audit(5.000:10): arch=c000003e syscall=257 exit=-13 ppid=1 pid=11 comm=\"a\" exe=\"/a\"", 0, out);
    a.feed(rtype::kEoe, "audit(5.000:11): ", 0, out);
    REQUIRE(out.size() == 1);
    CHECK(out[0].object == "/b");
    CHECK(out[0].pid == 22);
    a.feed(rtype::kEoe, "audit(5.000:10): ", 0, out);
    REQUIRE(out.size() == 2);
    CHECK(out[1].object == "/a");
    CHECK(out[1].pid == 11);
}

TEST_CASE("CWD and PATH records of the event (sent when audit rules make the context non-dummy)") {
    // Layout as the kernel writes them (kernel/auditsc.c audit_log_name);
    // the name is hex because it holds a space.
    EventAssembler a;
    std::vector<KernelDenial> out;
    a.feed(rtype::kLandlockAccess,
           "audit(7.100:50): domain=2b blockers=fs.write_file,fs.truncate path=\"/w/o\" dev=\"vda\" ino=5", 0, out);
    a.feed(rtype::kSyscall,
           "audit(7.100:50): arch=c000003e syscall=257 success=no exit=-13 a0=ffffff9c a1=55 a2=241 a3=1b6 items=1 "
           "ppid=10 pid=11 auid=4294967295 uid=65534 gid=65534 euid=65534 suid=65534 fsuid=65534 egid=65534 "
           "sgid=65534 fsgid=65534 tty=(none) ses=4294967295 comm=\"sh\" exe=\"/usr/bin/dash\" key=(null)",
           0, out);
    a.feed(rtype::kCwd, "audit(7.100:50): cwd=2F776F726B20646972", 0, out);
    a.feed(rtype::kPath,
           "audit(7.100:50): item=0 name=\"o\" inode=5 dev=fe:01 mode=0100644 ouid=65534 ogid=65534 rdev=00:00 "
           "nametype=NORMAL cap_fp=0 cap_fi=0 cap_fe=0 cap_fver=0 cap_frootid=0",
           0, out);
    a.feed(rtype::kProctitle, "audit(7.100:50): proctitle=7368002D63006563686F2061203E206F", 0, out);
    a.feed(rtype::kEoe, "audit(7.100:50): ", 0, out);
    REQUIRE(out.size() == 1);
    CHECK(out[0].cwd == "/work dir");
    REQUIRE(out[0].path_names.size() == 1);
    CHECK(out[0].path_names[0] == "o");
    CHECK(out[0].object == "/w/o");
    CHECK(out[0].blockers == "fs.write_file,fs.truncate");
    CHECK(out[0].proctitle == "sh -c echo a > o");
    CHECK(out[0].exe == "/usr/bin/dash");
    CHECK(out[0].pid == 11);
    CHECK(a.stats().malformed == 0);
}

TEST_CASE("the pending bound evicts the oldest event, counted") {
    EventAssembler a(4);
    std::vector<KernelDenial> out;
    for (int i = 0; i < 10; ++i)
        a.feed(rtype::kLandlockAccess,
               "audit(5.000:" + std::to_string(100 + i) + "): domain=1a blockers=fs.read_file path=\"/p\" dev=\"v\" ino=1", i,
               out);
    CHECK(a.pending() == 4);
    CHECK(out.size() == 6);
    CHECK(a.stats().evicted == 6);
}

TEST_CASE("malformed records are counted and never crash") {
    EventAssembler a;
    std::vector<KernelDenial> out;
    const std::vector<std::string> bad = {
        "",
        "garbage",
        "audit(",
        "audit(1.2:3)",
        "audit(x.y:z): a=b",
        "audit(1.5000:3): a=b",
        "audit(1.002): a=b",
        "audit(1.002:3): =b",
        "audit(1.002:3): a",
        "audit(1.002:3): a=\"unterminated",
        "audit(1.002:3): a='x",
        "audit(99999999999999999999.1:1): a=b",
        std::string("audit(1.002:3): a=b\0c=d", 23),
    };
    for (const auto& b : bad) a.feed(rtype::kLandlockAccess, b, 0, out);
    CHECK(a.stats().malformed == bad.size() - 1);  // "a=b\0c=d": the NUL ends the value, which parses
    // Well-formed records missing a field the decision needs.
    a.feed(rtype::kSeccomp, "audit(1.002:4): pid=1 comm=\"x\"", 0, out);
    a.feed(rtype::kLandlockAccess, "audit(1.002:5): path=\"/x\"", 0, out);
    a.feed(rtype::kEoe, "audit(1.002:5): ", 0, out);
    a.feed(rtype::kLandlockDomain, "audit(1.002:6): domain=zz", 0, out);
    CHECK(a.stats().malformed == bad.size() + 2);
    CHECK(!a.stats().last_error.empty());
    // Unknown types are ignored (counted apart), whatever their text.
    a.feed(1400, "avc:  denied  { read } for", 0, out);
    CHECK(a.stats().ignored == 1);
    CHECK(out.empty());

    // Random bytes and random cuts of real records: counted, no crash.
    auto lines = load_fixture("host-6.18.txt");
    std::mt19937 rng(42);
    for (int i = 0; i < 20000; ++i) {
        const auto& l = lines[rng() % lines.size()];
        std::string s = l.body.substr(0, rng() % (l.body.size() + 1));
        if (!s.empty() && rng() % 2) s[rng() % s.size()] = static_cast<char>(rng() % 256);
        a.feed(l.type, s, i, out);
    }
    a.flush_all(out);
    CHECK(a.pending() == 0);
    CHECK(a.stats().records == a.stats().ignored + 20000 + bad.size() + 4);
}

TEST_CASE("a timestamp whose nanoseconds do not fit an int64_t is malformed") {
    // fuzz_kaudit: audit(17962842273.x:y) overflowed sec * 10^9 in ts_ns()
    // (undefined behaviour) when the event was emitted.
    auto over = parse_record(rtype::kEoe, "audit(17962842273.871:1172646): ");
    REQUIRE_FALSE(over);
    CHECK(over.error() == "offset 6: timestamp out of range '17962842273.871:1172646'");
    CHECK_FALSE(parse_record(rtype::kEoe, "audit(9223372036.000:1): "));
    CHECK_FALSE(parse_record(rtype::kEoe, "audit(-1.000:1): "));
    // the last second that fits, and an ordinary one
    auto last = parse_record(rtype::kEoe, "audit(9223372035.999:1): ");
    REQUIRE(last);
    CHECK(last->ts_ns() == 9'223'372'035'999'000'000);
    auto now = parse_record(rtype::kEoe, "audit(1796284273.871:1172646): ");
    REQUIRE(now);
    CHECK(now->ts_ns() == 1'796'284'273'871'000'000);
    // fed to the assembler: counted as malformed, no event
    EventAssembler a;
    std::vector<KernelDenial> out;
    a.feed(rtype::kSeccomp, "audit(17962842273.871:9): pid=1 comm=\"x\" syscall=101 code=0x50000", 0, out);
    a.feed(rtype::kEoe, "audit(17962842273.871:9): ", 0, out);
    a.flush_all(out);
    CHECK(a.stats().malformed == 2);
    CHECK(out.empty());
}

TEST_CASE("decision rows: layer, operation, object, syscall name through libseccomp") {
    auto lines = load_fixture("host-6.18.txt");
    EventAssembler a;
    auto out = feed_all(a, lines);
    REQUIRE(out.size() == 7);
    bulwark::RunContext ctx{7, 42, "cat", 3};
    auto ll = bulwark::kernel_decision_record(out[2], ctx);
    CHECK(ll.layer == BW_LAYER_LANDLOCK);
    CHECK(ll.op == BW_OP_FILE_OPEN);
    CHECK(ll.decision == BW_DECISION_DENY);
    CHECK(ll.object == "/etc/passwd");
    CHECK(ll.err == 13);
    CHECK(ll.task_id == 7);
    CHECK(ll.run_id == 42);
    CHECK(ll.tool == "cat");
    CHECK(ll.policy_version == 3);
    CHECK(ll.pid == 1149);
    CHECK(ll.comm == "cat");
    auto d = nlohmann::json::parse(ll.detail);
    CHECK(d["source"] == "kernel_audit");
    CHECK(d["syscall"] == "openat");
    CHECK(d["access"] == "fs.read_file");
    CHECK(d["rights"] == BW_FS_READ);
    CHECK(d["domain"] == "1063ac54c");
    CHECK(bulwark::audit::layer_name(ll.layer) == "landlock");

    auto sc = bulwark::kernel_decision_record(out[4], ctx);
    CHECK(sc.layer == BW_LAYER_SECCOMP);
    CHECK(sc.op == BW_OP_SYSCALL);
    CHECK(sc.object == "getppid");
    CHECK(sc.decision == BW_DECISION_DENY);
    CHECK(nlohmann::json::parse(sc.detail)["action"] == "errno");
    CHECK(bulwark::syscall_name(0xc000003eu, 101) == "ptrace");
    CHECK(bulwark::syscall_name(0xc000003eu, 99999).empty());
}

TEST_CASE("seccomp rows: the run's filter names the deny rule and the errno the kernel's record leaves out") {
    auto lines = load_fixture("host-6.18.txt");
    EventAssembler a;
    auto out = feed_all(a, lines);
    REQUIRE(out.size() == 7);
    const auto& getppid = out[4];  // code=0x50000: errno, data masked
    REQUIRE(getppid.layer == KernelDenial::Layer::Seccomp);
    auto compiled = [](const std::string& text) {
        auto r = bulwark::policy::compile_string(text, "probe.yaml", {});
        INFO(bulwark::policy::render_diagnostics(r));
        REQUIRE(r.ok());
        return std::make_shared<const bulwark::policy::Bundle>(*r.bundle);
    };

    // Control: with no policy at hand the row names neither rule nor errno.
    bulwark::RunContext bare{7, 42, "probe", 3};
    auto unnamed = bulwark::kernel_decision_record(getppid, bare);
    CHECK(unnamed.rule_id == BW_NO_RULE);
    CHECK(unnamed.err == 0);
    CHECK(unnamed.rule_file.empty());

    bulwark::RunContext ctx{7, 42, "probe", 3,
                            compiled("tool: probe\nsyscalls:\n  baseline: default\n  deny:\n    - name: getppid\n"
                                     "      errno: EACCES\n")};
    auto named = bulwark::kernel_decision_record(getppid, ctx);
    CHECK(named.err == EACCES);
    REQUIRE(named.rule_id != BW_NO_RULE);
    CHECK(named.rule_file == "probe.yaml");
    CHECK(named.rule_line == 5);
    CHECK(named.rule_text.find("getppid") != std::string::npos);
    auto detail = nlohmann::json::parse(named.detail);
    CHECK(detail["arch"] == 0xc000003eu);
    CHECK_FALSE(detail.contains("judged"));

    // A filter that allows getppid (the kernel denied it with arguments this
    // question does not have): nothing is borrowed from the filter's answer.
    bulwark::RunContext allows{7, 42, "probe", 3, compiled("tool: probe\nsyscalls:\n  baseline: default\n")};
    auto other = bulwark::kernel_decision_record(getppid, allows);
    CHECK(other.err == 0);
    CHECK(other.rule_id == BW_NO_RULE);
    CHECK(nlohmann::json::parse(other.detail).contains("judged"));

    // An allow that turns on an argument: asked with the arguments unknown the
    // filter answers errno like the kernel did, but for other arguments it
    // allows, so the record's call may have been judged otherwise: nothing is
    // claimed.
    bulwark::RunContext conditional{
        7, 42, "probe", 3,
        compiled("tool: probe\nsyscalls:\n  baseline: none\n  allow:\n    - name: getppid\n"
                 "      args: [{ index: 0, op: eq, value: 1 }]\n"
                 "  on_violation: { action: errno, errno: EPERM }\n")};
    auto cond = bulwark::kernel_decision_record(getppid, conditional);
    CHECK(cond.err == 0);
    CHECK(cond.rule_id == BW_NO_RULE);
    CHECK(nlohmann::json::parse(cond.detail).contains("judged"));

    // The row is re-judgeable by name and arch (replay, exec explanations).
    auto op = bulwark::operation_of(named);
    REQUIRE(op);
    CHECK(op->kind == bulwark::policy::OpKind::Syscall);
    CHECK(op->syscall == "getppid");
    CHECK(op->arch == 0xc000003eu);
    auto verdict = bulwark::policy::evaluate(*ctx.bundle, *op);
    CHECK(verdict.verdict == bulwark::policy::Verdict::Deny);
    CHECK(verdict.rule_id == named.rule_id);
}

TEST_CASE("seccomp rows of an i386 call: named through the i386 table, the refused ABI said, the errno the filter's",
          "[seccomp]") {
    auto lines = load_fixture("host-6.18.txt");
    EventAssembler a;
    auto out = feed_all(a, lines);
    REQUIRE(out.size() == 7);
    KernelDenial i386 = out[4];  // the fixture's errno record, as int $0x80 getpid would give it
    REQUIRE(i386.layer == KernelDenial::Layer::Seccomp);
    i386.arch = AUDIT_ARCH_I386;
    i386.syscall = 20;
    auto compiled = [](const std::string& text) {
        auto r = bulwark::policy::compile_string(text, "probe.yaml", {});
        INFO(bulwark::policy::render_diagnostics(r));
        REQUIRE(r.ok());
        return std::make_shared<const bulwark::policy::Bundle>(*r.bundle);
    };
    const std::string base = "tool: probe\nsyscalls:\n  baseline: default\n  on_violation: { action: errno, errno: EPERM }\n";

    bulwark::RunContext refused{7, 42, "probe", 3, compiled(base)};
    auto row = bulwark::kernel_decision_record(i386, refused);
    CHECK(row.object == "getpid");
    CHECK(row.err == EPERM);
    CHECK(row.rule_id == BW_NO_RULE);
    auto detail = nlohmann::json::parse(row.detail);
    CHECK(detail["abi"] == "i386");
    CHECK(detail["arch"] == AUDIT_ARCH_I386);
    CHECK(detail["abi_refused"].get<std::string>().find("syscalls.architectures") != std::string::npos);
    CHECK_FALSE(detail.contains("judged"));
    auto op = bulwark::operation_of(row);
    REQUIRE(op);
    CHECK(op->arch == AUDIT_ARCH_I386);
    auto verdict = bulwark::policy::evaluate(*refused.bundle, *op);
    CHECK(verdict.verdict == bulwark::policy::Verdict::Deny);
    CHECK_THAT(verdict.explanation, Catch::Contains("architectures: [native, i386]"));
    // Control: the same name on the native ABI is allowed by the baseline.
    op->arch = 0;
    CHECK(bulwark::policy::evaluate(*refused.bundle, *op).verdict == bulwark::policy::Verdict::Allow);

    // A deny rule holds on the refused ABI with its own errno, and is named.
    bulwark::RunContext denied{7, 42, "probe", 3, compiled(base + "  deny: [{ name: getpid, errno: EACCES }]\n")};
    auto named = bulwark::kernel_decision_record(i386, denied);
    CHECK(named.err == EACCES);
    REQUIRE(named.rule_id != BW_NO_RULE);
    CHECK(named.rule_text.find("getpid") != std::string::npos);

    // Accepted: the filter allows i386 getpid, so the kernel's errno came
    // from arguments the record lacks: nothing is claimed, no ABI refusal.
    bulwark::RunContext accepted{7, 42, "probe", 3, compiled(base + "  architectures: [native, i386]\n")};
    auto other = bulwark::kernel_decision_record(i386, accepted);
    CHECK(other.err == 0);
    auto od = nlohmann::json::parse(other.detail);
    CHECK(od["abi"] == "i386");
    CHECK_FALSE(od.contains("abi_refused"));
    CHECK(od.contains("judged"));
}

TEST_CASE("run registry: a live pid by its cgroup, a gone one by the run's first pid, a domain by its creator") {
    bulwark::RunRegistry reg;
    auto self_cg = bulwark::cgroup_v2_of_pid(::getpid());
    REQUIRE(self_cg);
    KernelDenial d;
    d.layer = KernelDenial::Layer::Seccomp;
    d.pid = static_cast<uint32_t>(::getpid());
    CHECK(!reg.resolve(d));
    reg.add("/nonexistent/run-1", 999999999, {1, 1, "a", 1});
    // A live process outside every run's cgroup is not ours, whatever pid.
    CHECK(!reg.resolve(d));
    reg.add(*self_cg, 1, {2, 2, "b", 1});
    auto r = reg.resolve(d);
    REQUIRE(r);
    CHECK(r->run_id == 2);
    // A process that is gone: the run whose first process it was.
    d.pid = 999999999;
    r = reg.resolve(d);
    REQUIRE(r);
    CHECK(r->run_id == 1);
    // Landlock: the domain's creator decides, and the domain is remembered.
    KernelDenial l;
    l.layer = KernelDenial::Layer::Landlock;
    l.domain = 0xabc;
    l.domain_creator_pid = 999999999;
    l.pid = 999999998;  // a short-lived child, gone
    r = reg.resolve(l);
    REQUIRE(r);
    CHECK(r->run_id == 1);
    l.domain_creator_pid = 0;
    r = reg.resolve(l);
    REQUIRE(r);
    CHECK(r->run_id == 1);
    reg.remove("/nonexistent/run-1");
    CHECK(!reg.resolve(l));
    CHECK(reg.size() == 1);
}
