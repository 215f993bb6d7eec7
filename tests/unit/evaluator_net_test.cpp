#include <catch2/catch.hpp>

#include "policy_fixtures.h"

using namespace bulwark::test;

TEST_CASE("addresses and prefixes live in the v6 space", "[match]") {
    auto c = parse_cidr("10.0.0.0/8");
    REQUIRE(c);
    CHECK(c->prefix == 104);
    CHECK(prefix_contains(c->addr, c->prefix, *parse_ip("10.200.1.1")));
    CHECK_FALSE(prefix_contains(c->addr, c->prefix, *parse_ip("11.0.0.1")));
    CHECK_FALSE(parse_cidr("10.0.0.1/8"));  // host bits set
    CHECK_FALSE(parse_cidr("10.0.0.0/33"));
    CHECK_FALSE(parse_cidr("nonsense"));
    CHECK(format_cidr(c->addr, c->prefix) == "10.0.0.0/8");
    auto any6 = parse_cidr("::/0");
    REQUIRE(any6);
    CHECK(prefix_contains(any6->addr, any6->prefix, *parse_ip("1.2.3.4")));  // v4-mapped
}

TEST_CASE("network rules: deny wins over allow over all matching prefixes", "[evaluator]") {
    BundleBuilder bb;
    bb.net_rule("10.0.0.0/8", 443, 443)
        .net_rule("10.1.0.0/16", 0, 65535, BW_NET_CONNECT, BW_NET_ACTION_DENY)
        .net_rule("10.1.2.3/32", 443, 443)
        .net_rule("2001:db8::/32", 8000, 8080, BW_NET_CONNECT, BW_NET_ACTION_ALLOW, BW_PROTO_TCP)
        .net_rule("127.0.0.53/32", 53, 53, BW_NET_SEND, BW_NET_ACTION_ALLOW, BW_PROTO_UDP);
    Bundle b = bb.build();

    for (auto eval : {&evaluate, &evaluate_tables}) {
        auto d = eval(b, net_op(OpKind::Connect, "10.9.9.9", 443));
        CHECK(d.verdict == Verdict::Allow);
        CHECK(d.rule_id == 0);
        CHECK(d.layer == BW_LAYER_SOCK_ADDR);
        // the /16 deny reaches the more specific /32 allow
        d = eval(b, net_op(OpKind::Connect, "10.1.2.3", 443));
        CHECK(d.verdict == Verdict::Deny);
        CHECK(d.rule_id == 1);
        CHECK(eval(b, net_op(OpKind::Connect, "10.9.9.9", 80)).verdict == Verdict::Deny);
        CHECK(eval(b, net_op(OpKind::Connect, "10.9.9.9", 80)).rule_id == BW_NO_RULE);
        CHECK(eval(b, net_op(OpKind::Connect, "2001:db8::5", 8080)).verdict == Verdict::Allow);
        CHECK(eval(b, net_op(OpKind::Connect, "2001:db8::5", 8080, BW_PROTO_UDP)).verdict ==
              Verdict::Deny);
        CHECK(eval(b, net_op(OpKind::Connect, "2001:db9::5", 8080)).verdict == Verdict::Deny);
        // op mask: a send rule does not allow connect, and vice versa
        CHECK(eval(b, net_op(OpKind::Send, "127.0.0.53", 53, BW_PROTO_UDP)).verdict == Verdict::Allow);
        CHECK(eval(b, net_op(OpKind::Connect, "127.0.0.53", 53, BW_PROTO_UDP)).verdict == Verdict::Deny);
        CHECK(eval(b, net_op(OpKind::Send, "10.9.9.9", 443, BW_PROTO_UDP)).verdict == Verdict::Deny);
    }
    auto d = evaluate(b, net_op(OpKind::Connect, "8.8.8.8", 53));
    CHECK_THAT(d.explanation, Catch::Contains("cidr: 8.8.8.8/32, ports: [53], proto: tcp"));
}

TEST_CASE("LPM entries carry the ranges of every containing prefix, most specific first",
          "[tables]") {
    BundleBuilder bb;
    bb.net_rule("10.0.0.0/8", 443, 443).net_rule("10.1.0.0/16", 22, 22).net_rule("10.1.0.0/16", 80, 80);
    Bundle b = bb.build();
    REQUIRE(b.bpf.net.size() == 2);
    const auto& e = b.bpf.net[1];
    CHECK(e.key.prefixlen == 32 + 96 + 16);
    REQUIRE(e.value.count == 3);
    CHECK(e.value.ranges[0].lo == 22);
    CHECK(e.value.ranges[1].lo == 80);
    CHECK(e.value.ranges[2].lo == 443);
    CHECK(b.bpf.net[0].value.count == 1);
}

TEST_CASE("too many port ranges for one prefix is an error, never truncated", "[tables]") {
    BundleBuilder bb;
    for (uint16_t p = 1; p <= BW_PORT_RANGES_MAX + 1; ++p) bb.net_rule("10.0.0.0/8", p, p);
    Bundle b = bb.b;
    auto r = rebuild_bpf_tables(b);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("10.0.0.0/8 needs 17 port ranges"));
}

TEST_CASE("network none and loopback", "[evaluator]") {
    Bundle none = BundleBuilder{}.net(NetMode::None).build();
    Bundle lo = BundleBuilder{}.net(NetMode::Loopback).build();
    for (auto eval : {&evaluate, &evaluate_tables}) {
        CHECK(eval(none, net_op(OpKind::Connect, "127.0.0.1", 80)).verdict == Verdict::Deny);
        CHECK(eval(lo, net_op(OpKind::Connect, "127.0.0.1", 80)).verdict == Verdict::Allow);
        CHECK(eval(lo, net_op(OpKind::Bind, "::1", 8080)).verdict == Verdict::Allow);
        CHECK(eval(lo, net_op(OpKind::Connect, "10.0.0.1", 80)).verdict == Verdict::Deny);
        CHECK(eval(lo, net_op(OpKind::Connect, "::2", 80)).verdict == Verdict::Deny);
    }
}

TEST_CASE("dns resolvers are reachable on port 53 only", "[evaluator]") {
    BundleBuilder bb;
    bb.net(NetMode::Rules);
    bb.rule("network", "network.dns: [127.0.0.53]");
    bb.b.network.dns = {"127.0.0.53"};
    Bundle b = bb.build();
    for (auto eval : {&evaluate, &evaluate_tables}) {
        auto d = eval(b, net_op(OpKind::Send, "127.0.0.53", 53, BW_PROTO_UDP));
        CHECK(d.verdict == Verdict::Allow);
        CHECK(d.rule_id == 0);
        CHECK(eval(b, net_op(OpKind::Connect, "127.0.0.53", 53)).verdict == Verdict::Allow);
        CHECK(eval(b, net_op(OpKind::Connect, "127.0.0.53", 80)).verdict == Verdict::Deny);
    }
}

TEST_CASE("socket families and types are bitmasks", "[evaluator]") {
    BundleBuilder bb;
    bb.families({AF_UNIX, AF_INET}).types({SOCK_STREAM, SOCK_DGRAM});
    Bundle b = bb.build();
    for (auto eval : {&evaluate, &evaluate_tables}) {
        CHECK(eval(b, socket_op(AF_INET, SOCK_STREAM | SOCK_CLOEXEC)).verdict == Verdict::Allow);
        CHECK(eval(b, socket_op(AF_INET6, SOCK_STREAM)).verdict == Verdict::Deny);
        CHECK(eval(b, socket_op(AF_PACKET, SOCK_RAW)).verdict == Verdict::Deny);
        CHECK(eval(b, socket_op(AF_INET, SOCK_RAW)).verdict == Verdict::Deny);
        CHECK(eval(b, socket_op(200, SOCK_STREAM)).verdict == Verdict::Deny);
        CHECK(eval(b, socket_op(AF_INET, SOCK_RAW)).layer == BW_LAYER_SOCK_CREATE);
    }
    CHECK(*parse_family("packet") == AF_PACKET);
    CHECK(*parse_sock_type("raw") == SOCK_RAW);
    CHECK_FALSE(parse_family("inet7"));
}

TEST_CASE("syscalls decided from the seccomp plan's rule map", "[evaluator]") {
    BundleBuilder bb;
    uint32_t deny = bb.rule("syscalls", "syscalls.deny: ptrace");
    uint32_t allow = bb.rule("syscalls", "syscalls.allow: personality");
    bb.b.seccomp.syscall_rules = {{"ptrace", deny}, {"personality", allow}};
    bb.b.seccomp.default_action = SeccompAction::Errno;
    bb.b.seccomp.default_errno = 38;
    Bundle b = bb.build();
    Operation op;
    op.kind = OpKind::Syscall;
    op.syscall = "ptrace";
    auto d = evaluate(b, op);
    CHECK(d.verdict == Verdict::Deny);
    CHECK(d.rule_id == deny);
    CHECK(d.layer == BW_LAYER_SECCOMP);
    op.syscall = "personality";
    CHECK(evaluate(b, op).verdict == Verdict::Allow);
    op.syscall = "kexec_load";
    d = evaluate(b, op);
    CHECK(d.verdict == Verdict::Deny);
    CHECK(d.rule_id == BW_NO_RULE);
    CHECK_THAT(d.explanation, Catch::Contains("errno 38"));
}

// Regression: the sock_addr programs judge a connect or send to the wildcard
// address as loopback (connecting to it reaches the local host); the evaluator
// did not, so a deny on 127.0.0.1 looked sidestepped through 0.0.0.0 and a
// loopback policy looked stricter than the kernel (integration_bpf_diff
// compares the two on the wildcard targets of its corpus).
TEST_CASE("connect and send to the wildcard address are judged as loopback, bind keeps it", "[evaluator]") {
    BundleBuilder bb;
    bb.net_rule("127.0.0.1/32", 18501, 18501)
        .net_rule("::1/128", 18501, 18501)
        .net_rule("0.0.0.0/32", 18503, 18503, BW_NET_BIND)
        .net_rule("127.0.0.1/32", 18504, 18504, BW_NET_CONNECT, BW_NET_ACTION_DENY)
        .net_rule("0.0.0.0/0", 18504, 18504);
    Bundle b = bb.build();
    for (auto eval : {&evaluate, &evaluate_tables}) {
        CHECK(eval(b, net_op(OpKind::Connect, "0.0.0.0", 18501)).verdict == Verdict::Allow);
        CHECK(eval(b, net_op(OpKind::Connect, "::ffff:0.0.0.0", 18501)).verdict == Verdict::Allow);
        CHECK(eval(b, net_op(OpKind::Connect, "::", 18501)).verdict == Verdict::Allow);
        CHECK(eval(b, net_op(OpKind::Connect, "::", 18501)).rule_id == 1);
        CHECK(eval(b, net_op(OpKind::Bind, "0.0.0.0", 18503)).verdict == Verdict::Allow);
        CHECK(eval(b, net_op(OpKind::Bind, "127.0.0.1", 18503)).verdict == Verdict::Deny);
        // the deny on 127.0.0.1 holds for 0.0.0.0 too
        CHECK(eval(b, net_op(OpKind::Connect, "0.0.0.0", 18504)).verdict == Verdict::Deny);
        CHECK(eval(b, net_op(OpKind::Connect, "0.0.0.0", 18504)).rule_id == 3);
        CHECK(eval(b, net_op(OpKind::Connect, "10.0.0.1", 18504)).verdict == Verdict::Allow);
    }
    b.network.mode = NetMode::Loopback;
    b.bpf.header.flags = (b.bpf.header.flags & ~BW_POL_NET_RULES) | BW_POL_NET_LOOPBACK;
    for (auto eval : {&evaluate, &evaluate_tables}) {
        CHECK(eval(b, net_op(OpKind::Send, "0.0.0.0", 9, BW_PROTO_UDP)).verdict == Verdict::Allow);
        CHECK(eval(b, net_op(OpKind::Bind, "0.0.0.0", 9)).verdict == Verdict::Deny);
    }
}
