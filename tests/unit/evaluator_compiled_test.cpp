// The evaluator over bundles the compiler produced: the table builders used
// by instantiate() and grants reproduce the compiler's map entries exactly,
// both evaluation paths agree on compiled bundles, and syscalls are decided
// by running the compiled seccomp program.
#include <cstring>

#include <catch2/catch.hpp>

#include "bulwark/policy/compiler.h"
#include "bulwark/policy/instantiate.h"
#include "policy_fixtures.h"

using namespace bulwark::test;

namespace {

const char* kRules = R"(tool: fetch
files:
  read: [/etc/ssl, /usr/lib/x86_64-linux-gnu, "${workdir}"]
  write: ["${workdir}"]
  create: ["${workdir}"]
  exec: [/usr/lib/x86_64-linux-gnu]
  deny:
    - "${workdir}/.git"
    - { path: /etc/ssl/private, rights: [read] }
exec:
  allow: [/usr/bin/curl]
network:
  families: [unix, inet, inet6]
  connect:
    - { cidr: 10.20.0.0/16, ports: [80, 443], proto: tcp }
    - { cidr: 10.20.30.0/24, ports: ["8000-8080"] }
    - { cidr: "2001:db8::/32", ports: [443] }
    - { host: api.github.com, ports: [443], proto: tcp }
  send: [{ cidr: 10.20.30.40/32, ports: [514], proto: udp }]
  deny:
    - { cidr: 10.20.30.0/24, ports: [443] }
    - { cidr: 169.254.169.254/32 }
  dns: [127.0.0.53]
syscalls:
  baseline: none
  allow:
    - read
    - write
    - exit_group
    - { name: socket, args: [{ index: 0, op: eq, value: 2 }] }
  deny:
    - ptrace
    - { name: bpf, action: kill }
  on_violation: { action: errno, errno: EPERM }
)";

Bundle compiled() {
    bulwark::policy::CompileOptions opts;
    auto r = compile_string(kRules, "rules/fetch.yaml", opts);
    INFO(render_diagnostics(r));
    REQUIRE(r.ok());
    return *r.bundle;
}

TaskVars task() { return {{"workdir", "/srv/t1"}, {"home", "/home/a"}, {"tmp", "/tmp/t1"}, {"task_id", "t1"}}; }

Resolver gh() {
    return [](std::string_view) -> std::expected<std::vector<std::string>, std::string> {
        return std::vector<std::string>{"140.82.112.5", "10.20.30.7"};
    };
}

bool same_entry(const BpfNetEntry& a, const BpfNetEntry& b) {
    return std::memcmp(&a.key, &b.key, sizeof a.key) == 0 &&
           std::memcmp(&a.value, &b.value, sizeof a.value) == 0;
}

Operation syscall(std::string name, std::array<uint64_t, 6> args = {}) {
    Operation op;
    op.kind = OpKind::Syscall;
    op.syscall = std::move(name);
    op.args = args;
    return op;
}

}  // namespace

TEST_CASE("rebuilt map entries equal the compiler's", "[evaluator][tables][compiled]") {
    Bundle b = compiled();
    Bundle r = b;
    // the compiler emits no entries for host rules (resolved at instantiate)
    std::erase_if(r.network.rules, [](const NetRule& n) { return n.host.has_value(); });
    auto ok = rebuild_bpf_tables(r);
    INFO((ok ? std::string() : ok.error()));
    REQUIRE(ok);
    CHECK(r.bpf.header.flags == b.bpf.header.flags);
    CHECK(r.bpf.header.mode == b.bpf.header.mode);
    CHECK(r.bpf.header.af_allow == b.bpf.header.af_allow);
    CHECK(r.bpf.header.sock_type_allow == b.bpf.header.sock_type_allow);
    REQUIRE(r.bpf.files.size() == b.bpf.files.size());
    for (size_t i = 0; i < b.bpf.files.size(); ++i) {
        CHECK(r.bpf.files[i].path == b.bpf.files[i].path);
        CHECK(std::memcmp(&r.bpf.files[i].value, &b.bpf.files[i].value, sizeof(bw_file_rule)) == 0);
    }
    REQUIRE(r.bpf.net.size() == b.bpf.net.size());
    for (size_t i = 0; i < b.bpf.net.size(); ++i) CHECK(same_entry(r.bpf.net[i], b.bpf.net[i]));
}

TEST_CASE("both paths agree on an instantiated compiled bundle", "[evaluator][tables][compiled]") {
    auto inst = instantiate(compiled(), task(), gh());
    REQUIRE(inst);
    const Bundle& b = *inst;
    static constexpr const char* addrs[] = {"10.20.1.1", "10.20.30.40", "10.20.30.7", "10.21.0.1",
                                            "140.82.112.5", "2001:db8::9", "169.254.169.254", "127.0.0.53"};
    static constexpr uint16_t ports[] = {53, 80, 443, 514, 8000, 8080, 8081};
    size_t allows = 0, n = 0;
    for (auto a : addrs)
        for (auto p : ports)
            for (auto k : {OpKind::Connect, OpKind::Send, OpKind::Bind})
                for (uint8_t proto : {BW_PROTO_TCP, BW_PROTO_UDP}) {
                    Operation op = net_op(k, a, p, proto);
                    auto x = evaluate(b, op), y = evaluate_tables(b, op);
                    INFO(a << ":" << p << " " << to_string(k) << "\n" << x.explanation << "\n" << y.explanation);
                    REQUIRE(x.verdict == y.verdict);
                    REQUIRE(x.rule_id == y.rule_id);
                    allows += x.verdict == Verdict::Allow;
                    ++n;
                }
    CHECK(allows > 10);
    CHECK(allows < n / 2);
    // the /24 deny on 443 reaches the host rule's address inside it
    CHECK(evaluate(b, net_op(OpKind::Connect, "10.20.30.7", 443)).verdict == Verdict::Deny);
    CHECK(evaluate(b, net_op(OpKind::Connect, "140.82.112.5", 443)).verdict == Verdict::Allow);
    CHECK(evaluate(b, net_op(OpKind::Send, "127.0.0.53", 53, BW_PROTO_UDP)).verdict == Verdict::Allow);
    for (const char* p : {"/srv/t1/a", "/srv/t1/.git/config", "/etc/ssl/private/k", "/etc/ssl/certs/x",
                          "/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/bin/curl", "/usr/bin/wget"})
        for (auto k : {OpKind::Open, OpKind::Create, OpKind::Exec, OpKind::Remove}) {
            Operation op = file_op(k, p);
            auto x = evaluate(b, op), y = evaluate_tables(b, op);
            INFO(p << " " << to_string(k));
            REQUIRE(x.verdict == y.verdict);
            REQUIRE(x.rule_id == y.rule_id);
        }
}

TEST_CASE("syscalls are decided by the compiled seccomp program", "[evaluator][compiled]") {
    Bundle b = compiled();
    REQUIRE_FALSE(b.seccomp.program.empty());
    auto d = evaluate(b, syscall("read"));
    CHECK(d.verdict == Verdict::Allow);
    CHECK(d.layer == BW_LAYER_SECCOMP);
    d = evaluate(b, syscall("ptrace"));
    CHECK(d.verdict == Verdict::Deny);
    REQUIRE(d.rule_id != BW_NO_RULE);
    CHECK_THAT(describe_rule(b, d.rule_id), Catch::Contains("syscalls.deny"));
    d = evaluate(b, syscall("bpf"));
    CHECK(d.verdict == Verdict::Deny);
    CHECK_THAT(d.explanation, Catch::Contains("kill"));
    // argument conditions are evaluated
    CHECK(evaluate(b, syscall("socket", {2, 1, 0, 0, 0, 0})).verdict == Verdict::Allow);
    d = evaluate(b, syscall("socket", {17, 3, 0, 0, 0, 0}));
    CHECK(d.verdict == Verdict::Deny);
    CHECK_THAT(d.explanation, Catch::Contains("only with other arguments"));
    d = evaluate(b, syscall("openat"));
    CHECK(d.verdict == Verdict::Deny);
    CHECK(d.rule_id == BW_NO_RULE);
    CHECK_THAT(d.explanation, Catch::Contains("errno 1"));
    CHECK(evaluate(b, syscall("no_such_call")).verdict == Verdict::Deny);
}

TEST_CASE("rebuilding keeps a present files: section enforcing when no rule is left in it", "[evaluator][tables]") {
    Bundle b = compiled();
    REQUIRE((b.bpf.header.flags & BW_POL_FILES_ENFORCED) != 0);
    Bundle r = b;
    std::erase_if(r.network.rules, [](const NetRule& n) { return n.host.has_value(); });
    r.files.clear();  // e.g. a grant that leaves nothing readable
    REQUIRE(rebuild_bpf_tables(r));
    CHECK(r.bpf.files.empty());
    CHECK((r.bpf.header.flags & BW_POL_FILES_ENFORCED) != 0);  // deny everything, never allow everything
}

TEST_CASE("tables that do not fit are refused with a code, never truncated", "[evaluator][tables]") {
    std::vector<FileRule> many;
    for (uint32_t i = 0; i <= BW_MAX_FILE_RULES; ++i) many.push_back({"/srv/f" + std::to_string(i), BW_FS_READ, 0, i});
    auto entries = build_file_entries(many);
    CHECK(entries.size() == BW_MAX_FILE_RULES + 1);
    auto fit = check_file_capacity(entries);
    REQUIRE_FALSE(fit);
    CHECK(fit.error().code == "too-many-file-rules");

    NetRule host;
    host.host = "example.org";
    host.rule_id = 7;
    auto net = build_net_entries({host});
    REQUIRE_FALSE(net);
    CHECK(net.error().code == "unresolved-host");
    CHECK(net.error().at_rule == 7);
}
