#include <catch2/catch.hpp>

#include "bulwark/policy/compiler.h"
#include "bulwark/policy/coverage.h"
#include "bulwark/policy/grants.h"
#include "policy_fixtures.h"

using namespace bulwark::test;
using namespace std::chrono_literals;

namespace {
const Clock::time_point kNow = Clock::time_point{} + 1000h;

Bundle tool() {
    BundleBuilder bb;
    bb.allow("/srv", BW_FS_READ | BW_FS_WRITE | BW_FS_CREATE)
        .allow("/usr", BW_FS_READ | BW_FS_EXEC)
        .deny("/srv/keys")
        .net_rule("0.0.0.0/0", 443, 443)
        .net_rule("169.254.169.254/32", 0, 65535, BW_NET_CONNECT | BW_NET_SEND, BW_NET_ACTION_DENY)
        .net_rule("127.0.0.53/32", 53, 53, BW_NET_SEND, BW_NET_ACTION_ALLOW, BW_PROTO_UDP)
        .families({AF_UNIX, AF_INET, AF_INET6});
    bb.b.limits.memory_bytes = 256u << 20;
    bb.b.limits.timeout_ms = 60'000;
    bb.b.limits.rule_ids = {{"memory", bb.rule("limits", "limits.memory: 256MiB")}};
    bb.b.landlock.handled_fs = (1ull << 15) - 1;
    bb.b.landlock.paths = {{"/srv", (1ull << 2) | (1ull << 3) | (1ull << 1) | (1ull << 8), 0}};
    return bb.build();
}

NetGrant connect_to(std::string cidr, uint16_t port) {
    NetGrant g;
    auto c = parse_cidr(cidr);
    g.addr = c->addr;
    g.prefix = c->prefix;
    g.port_lo = g.port_hi = port;
    g.proto_mask = BW_PROTO_TCP;
    return g;
}
}  // namespace

TEST_CASE("a files grant confines only the rights it names", "[grants]") {
    Grant g;
    g.name = "t42";
    g.files = std::vector<FileGrant>{{"/srv/t42", BW_FS_WRITE | BW_FS_CREATE}};
    auto r = apply_grant(tool(), g, kNow);
    REQUIRE(r);
    const Bundle& n = r->bundle;
    CHECK(evaluate(n, open_op("/srv/t42/out", FileAccess::Write)).verdict == Verdict::Allow);
    auto d = evaluate(n, open_op("/srv/other/out", FileAccess::Write));
    CHECK(d.verdict == Verdict::Deny);
    CHECK(evaluate(n, file_op(OpKind::Create, "/srv/x")).verdict == Verdict::Deny);
    // read is not named: unchanged
    CHECK(evaluate(n, open_op("/srv/other/in")).verdict == Verdict::Allow);
    CHECK(evaluate(n, file_op(OpKind::Exec, "/usr/bin/git")).verdict == Verdict::Allow);
    // the tool's deny survives
    CHECK(evaluate(n, open_op("/srv/keys/k")).verdict == Verdict::Deny);
    // the allow names the grant
    d = evaluate(n, open_op("/srv/t42/out", FileAccess::Write));
    CHECK_THAT(d.explanation, Catch::Contains("grant:t42:1:1 grant files.write|create: /srv/t42"));
    // Landlock: write bits left /srv and came back on /srv/t42 only
    for (const auto& p : n.landlock.paths) {
        if (p.path == "/srv") CHECK_FALSE(p.access & (1ull << 1));
        if (p.path == "/srv/t42") CHECK(p.access & (1ull << 1));
    }
}

TEST_CASE("a grant that would widen is refused, every part listed with the tool rule", "[grants]") {
    Grant g;
    g.files = std::vector<FileGrant>{{"/etc", BW_FS_READ}, {"/srv/keys/a", BW_FS_READ}, {"/srv/ok", BW_FS_WRITE}};
    g.network = std::vector<NetGrant>{connect_to("169.254.169.254/32", 443), connect_to("10.0.0.1/32", 80),
                                      connect_to("10.0.0.1/32", 443)};
    g.limits.memory_bytes = 1ull << 30;
    g.limits.pids = 0;
    auto r = apply_grant(tool(), g, kNow);
    REQUIRE_FALSE(r);
    const auto& why = r.error().reasons;
    REQUIRE(why.size() == 6);
    CHECK_THAT(why[0], Catch::Contains("files.read /etc would widen the tool"));
    CHECK_THAT(why[1], Catch::Contains("files.deny: /srv/keys"));
    CHECK_THAT(why[2], Catch::Contains("169.254.169.254/32") && Catch::Contains("rules/t.yaml:5:5"));
    CHECK_THAT(why[3], Catch::Contains("no tool network rule allows connect tcp to all of 10.0.0.1/32 ports 80"));
    CHECK_THAT(why[4], Catch::Contains("limits.memory 1073741824 exceeds") &&
                           Catch::Contains("limits.memory: 256MiB"));
    CHECK_THAT(why[5], Catch::Contains("limits.pids 0 would disable the limit"));
}

TEST_CASE("a network grant confines the operations it names, by host", "[grants]") {
    Resolver dns = [](std::string_view h) -> std::expected<std::vector<std::string>, std::string> {
        if (h == "api.github.com") return std::vector<std::string>{"140.82.112.5"};
        return std::unexpected(std::string("NXDOMAIN"));
    };
    Grant g;
    NetGrant gh = connect_to("0.0.0.0/0", 443);
    gh.host = "api.github.com";
    g.network = std::vector<NetGrant>{gh};
    auto r = apply_grant(tool(), g, kNow, dns);
    REQUIRE(r);
    for (auto eval : {&evaluate, &evaluate_tables}) {
        CHECK(eval(r->bundle, net_op(OpKind::Connect, "140.82.112.5", 443)).verdict == Verdict::Allow);
        CHECK(eval(r->bundle, net_op(OpKind::Connect, "140.82.112.6", 443)).verdict == Verdict::Deny);
        CHECK(eval(r->bundle, net_op(OpKind::Connect, "140.82.112.5", 443, BW_PROTO_UDP)).verdict ==
              Verdict::Deny);
        // send was not named: the tool's dns send rule stays
        CHECK(eval(r->bundle, net_op(OpKind::Send, "127.0.0.53", 53, BW_PROTO_UDP)).verdict == Verdict::Allow);
    }
    gh.host = "nowhere.example";
    g.network = std::vector<NetGrant>{gh};
    auto bad = apply_grant(tool(), g, kNow, dns);
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().reasons[0], Catch::Contains("nowhere.example did not resolve: NXDOMAIN"));
}

TEST_CASE("limits only go down; expiry bounds the timeout; expired grants are refused", "[grants]") {
    Grant g;
    g.limits.memory_bytes = 64u << 20;
    g.limits.pids = 8;  // the tool has no pids limit: any value narrows
    g.expires_at = kNow + 30s;
    auto r = apply_grant(tool(), g, kNow);
    REQUIRE(r);
    CHECK(*r->bundle.limits.memory_bytes == 64u << 20);
    CHECK(*r->bundle.limits.pids == 8);
    CHECK(*r->bundle.limits.timeout_ms == 30'000);
    CHECK(r->expires_at == kNow + 30s);

    g.expires_at = kNow + 1h;
    r = apply_grant(tool(), g, kNow);
    REQUIRE(r);
    CHECK(*r->bundle.limits.timeout_ms == 60'000);

    g.expires_at = kNow - 1s;
    auto x = apply_grant(tool(), g, kNow);
    REQUIRE_FALSE(x);
    CHECK_THAT(x.error().reasons[0], Catch::Contains("expired 1000 ms ago"));
}

TEST_CASE("network: none drops all network; grants need an instantiated bundle", "[grants]") {
    Grant g;
    g.network_none = true;
    auto r = apply_grant(tool(), g, kNow);
    REQUIRE(r);
    CHECK(evaluate(r->bundle, net_op(OpKind::Connect, "1.1.1.1", 443)).verdict == Verdict::Deny);
    CHECK(evaluate(r->bundle, socket_op(AF_INET, SOCK_STREAM)).verdict == Verdict::Deny);

    BundleBuilder bb;
    bb.allow("${workdir}", BW_FS_READ);
    auto x = apply_grant(bb.build(), Grant{}, kNow);
    REQUIRE_FALSE(x);
    CHECK_THAT(x.error().reasons[0], Catch::Contains("instantiate it"));
}

TEST_CASE("grant scoping on a tool without file rules keeps the other rights unrestricted", "[grants]") {
    Bundle open_tool = BundleBuilder{}.build();
    Grant g;
    g.files = std::vector<FileGrant>{{"/srv/t1", BW_FS_WRITE}};
    auto r = apply_grant(open_tool, g, kNow);
    REQUIRE(r);
    CHECK(evaluate(r->bundle, open_op("/etc/passwd")).verdict == Verdict::Allow);
    CHECK(evaluate(r->bundle, file_op(OpKind::Exec, "/bin/ls")).verdict == Verdict::Allow);
    CHECK(evaluate(r->bundle, open_op("/etc/passwd", FileAccess::Write)).verdict == Verdict::Deny);
    CHECK(evaluate(r->bundle, open_op("/srv/t1/f", FileAccess::Write)).verdict == Verdict::Allow);
}

TEST_CASE("a grant that takes socket families away narrows the seccomp filter too", "[grants]") {
    auto compiled = compile_string("tool: t\nnetwork:\n  families: [unix, inet, inet6]\n"
                                   "  connect: [{ cidr: 10.0.0.0/8, ports: [443] }]\n",
                                   "t.yaml", {});
    INFO(render_diagnostics(compiled));
    REQUIRE(compiled.ok());
    const Bundle& parent = *compiled.bundle;
    auto call = [](const Bundle& b, const char* name, uint64_t a0 = 0) {
        Operation op;
        op.kind = OpKind::Syscall;
        op.syscall = name;
        op.args = {a0, SOCK_STREAM, 0, 0, 0, 0};
        return evaluate(b, op).verdict;
    };
    // The control: the tool's own filter lets inet6 and unix through.
    CHECK(call(parent, "socket", AF_INET6) == Verdict::Allow);
    CHECK(call(parent, "socketpair", AF_UNIX) == Verdict::Allow);
    CHECK(call(parent, "socket", AF_NETLINK) == Verdict::Deny);
    Grant g;
    g.name = "v4";
    g.families = 1ull << AF_INET;
    auto r = apply_grant(parent, g, kNow);
    REQUIRE(r);
    const Bundle& n = r->bundle;
    CHECK(call(n, "socket", AF_INET) == Verdict::Allow);
    CHECK(call(n, "socket", AF_INET6) == Verdict::Deny);
    CHECK(call(n, "socketpair", AF_UNIX) == Verdict::Deny);
    CHECK(call(n, "socket", (1ull << 32) | AF_INET) == Verdict::Deny);  // the upper half is no family
    CHECK(call(n, "read") == Verdict::Allow);                            // the rest is the tool's filter
    CHECK(call(n, "kexec_load") == Verdict::Deny);
    // ... and the tool's families rule is held by seccomp in the narrowed bundle
    bool seen = false;
    for (const auto& c : rule_coverage(n))
        if (c.kind == "network.families") {
            seen = true;
            CHECK(std::any_of(c.layers.begin(), c.layers.end(), [](const LayerClaim& l) { return l.layer == "seccomp"; }));
        }
    CHECK(seen);
    // network: none keeps unix sockets only, in the filter too
    Grant none;
    none.name = "offline";
    none.network_none = true;
    auto off = apply_grant(parent, none, kNow);
    REQUIRE(off);
    CHECK(call(off->bundle, "socket", AF_INET) == Verdict::Deny);
    CHECK(call(off->bundle, "socketpair", AF_UNIX) == Verdict::Allow);
    // a grant that keeps the families keeps the filter as compiled
    Grant same;
    same.name = "same";
    same.families = parent.network.af_allow;
    auto kept = apply_grant(parent, same, kNow);
    REQUIRE(kept);
    CHECK(kept->bundle.seccomp.program.size() == parent.seccomp.program.size());
}

TEST_CASE("a profile's narrowing keeps what the task's epoch and the profile both allow", "[grants]") {
    // In force: the task may write under /srv/t42 only.
    Grant task;
    task.name = "task 42";
    task.files = std::vector<FileGrant>{{"/srv/t42", BW_FS_WRITE | BW_FS_CREATE}};
    auto current = apply_grant(tool(), task, kNow);
    REQUIRE(current);
    // The profile: reads below /srv/t42/src and /srv/docs, wrote all of /srv
    // (a wider area than the task allows), created nothing; reached
    // 140.82.112.0/24 on 443 only.
    BundleBuilder pb;
    pb.allow("/srv/t42/src", BW_FS_READ)
        .allow("/srv/docs", BW_FS_READ)
        .allow("/srv", BW_FS_WRITE)
        .allow("/usr", BW_FS_READ | BW_FS_EXEC)
        .deny("/srv/keys")
        .net_rule("140.82.112.0/24", 443, 443)
        .families({AF_UNIX, AF_INET, AF_INET6});
    Bundle profile = pb.build();
    const Bundle& c = current->bundle;
    Grant g = intersection_grant(c, profile, "profile of t");
    auto r = apply_grant(c, g, kNow);
    REQUIRE(r);
    const Bundle& n = r->bundle;
    // The controls: the epoch in force allows each of these.
    for (const char* p : {"/srv/t42/x", "/srv/other"})
        CHECK(evaluate(c, open_op(p)).verdict == Verdict::Allow);
    CHECK(evaluate(c, file_op(OpKind::Create, "/srv/t42/new")).verdict == Verdict::Allow);
    CHECK(evaluate(c, net_op(OpKind::Connect, "8.8.8.8", 443)).verdict == Verdict::Allow);

    CHECK(evaluate(n, open_op("/srv/t42/src/a.py")).verdict == Verdict::Allow);
    CHECK(evaluate(n, open_op("/srv/docs/a.md")).verdict == Verdict::Allow);
    CHECK(evaluate(n, open_op("/srv/t42/x")).verdict == Verdict::Deny);
    CHECK(evaluate(n, open_op("/srv/other")).verdict == Verdict::Deny);
    // write: the profile's /srv met the task's /srv/t42: the deeper one
    CHECK(evaluate(n, open_op("/srv/t42/out", FileAccess::Write)).verdict == Verdict::Allow);
    CHECK(evaluate(n, open_op("/srv/docs/a.md", FileAccess::Write)).verdict == Verdict::Deny);
    // create: confined with no path, taken away
    CHECK(evaluate(n, file_op(OpKind::Create, "/srv/t42/new")).verdict == Verdict::Deny);
    CHECK(evaluate(n, file_op(OpKind::Exec, "/usr/bin/git")).verdict == Verdict::Allow);
    CHECK(evaluate(n, open_op("/srv/keys/k")).verdict == Verdict::Deny);
    for (auto eval : {&evaluate, &evaluate_tables}) {
        CHECK(eval(n, net_op(OpKind::Connect, "140.82.112.5", 443)).verdict == Verdict::Allow);
        CHECK(eval(n, net_op(OpKind::Connect, "8.8.8.8", 443)).verdict == Verdict::Deny);
        // the task's dns send the profile never made
        CHECK(eval(n, net_op(OpKind::Send, "127.0.0.53", 53, BW_PROTO_UDP)).verdict == Verdict::Deny);
    }
    // A decision names the narrowing.
    CHECK_THAT(evaluate(n, open_op("/srv/docs/a.md")).explanation, Catch::Contains("grant:profile of t"));
}
