// network.unix: parser, validation, bundle JSON, tables and the reference
// evaluator (rules and tables paths must agree).
#include "compiler_support.h"

#include <cstring>

#include "bulwark/policy/bpf_tables.h"
#include "bulwark/policy/evaluator.h"
#include "bulwark/policy/explain.h"
#include "bulwark/policy/instantiate.h"
#include "bulwark/policy/landlock_abi.h"

using namespace bulwark::test;

namespace {

const char* kTool = R"(tool: app
files:
  read: [/run/app, /srv/data]
  write: [/srv/data]
  create: ["${workdir}"]
network:
  families: [unix]
  unix:
    connect: [/run/app/api.sock, /run/app/workers/, "@app-bus", "${home}/.app/ctl.sock"]
    send: [/run/app/log.sock, /run/app/workers/]
)";

Operation unix_op(OpKind k, std::string a) {
    Operation op;
    op.kind = k;
    op.unix_addr = std::move(a);
    return op;
}

// One unix operation and what both evaluation paths must decide: allowed or
// not, and by which rule (an index into the bundle's unix_rules, -1: none).
struct UnixCase {
    OpKind op;
    const char* addr;
    bool allow;
    int rule;
};

// The layer that judges: the cgroup unix programs for connect and send, the
// BPF LSM's socket_bind for a bind (no cgroup hook sees one).
void check_unix_cases(const Bundle& b, std::initializer_list<UnixCase> cases) {
    for (const auto& c : cases) {
        for (auto eval : {&evaluate, &evaluate_tables}) {
            auto d = eval(b, unix_op(c.op, c.addr));
            INFO(c.addr << " " << to_string(c.op) << ": " << d.explanation);
            CHECK((d.verdict == Verdict::Allow) == c.allow);
            CHECK(d.layer == (c.op == OpKind::Bind ? BW_LAYER_BPF_LSM : BW_LAYER_SOCK_UNIX));
            CHECK(d.rule_id == (c.rule < 0 ? BW_NO_RULE : b.network.unix_rules[size_t(c.rule)].rule_id));
        }
    }
}

Bundle instantiated(const Bundle& b) {
    auto i = instantiate(b, {{"workdir", "/srv/t1"}, {"home", "/home/agent"}, {"tmp", "/tmp/t1"}, {"task_id", "t1"}},
                         nullptr);
    INFO((i ? "" : i.error().message));
    REQUIRE(i);
    return *i;
}

}  // namespace

TEST_CASE("network.unix compiles to unix rules, a header flag and LPM keys", "[compiler][unix]") {
    Bundle b = require_ok(kTool);
    REQUIRE(b.network.unix_rules.size() == 6);
    CHECK(b.network.unix_rules[0].address == "/run/app/api.sock");
    CHECK(b.network.unix_rules[0].op_mask == BW_NET_CONNECT);
    CHECK(b.network.unix_rules[1].address == "/run/app/workers/");
    CHECK(b.network.unix_rules[2].address == "@app-bus");
    CHECK(b.network.unix_rules[3].address == "${home}/.app/ctl.sock");
    CHECK(b.network.unix_rules[4].op_mask == BW_NET_SEND);
    CHECK((b.bpf.header.flags & BW_POL_UNIX_RULES));
    // variable-rooted rules wait for instantiate(); the others are in the tables
    CHECK(b.bpf.unix_sockets.size() == 4);
    // the rule allowing an abstract name leaves Landlock's abstract scope out, and says so
    CHECK_FALSE((b.landlock.scoped & 1u /* LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET */));
    bool gap = false;
    for (const auto& g : b.landlock.gaps) gap = gap || g.find("abstract unix scope not applied") != std::string::npos;
    CHECK(gap);

    Bundle i = instantiated(b);
    CHECK(i.network.unix_rules[3].address == "/home/agent/.app/ctl.sock");
    CHECK(i.bpf.unix_sockets.size() == 5);
    CHECK(is_instantiated(i));
    CHECK_FALSE(is_instantiated(b));

    // JSON round trip keeps rules and entries (and the compiled hash holds)
    auto back = bundle_from_json(bundle_to_json(b));
    INFO((back ? "" : back.error()));
    REQUIRE(back);
    REQUIRE(back->network.unix_rules.size() == 6);
    CHECK(back->network.unix_rules[3].address == "${home}/.app/ctl.sock");
    REQUIRE(back->bpf.unix_sockets.size() == 4);
    CHECK(std::memcmp(&back->bpf.unix_sockets[0], &b.bpf.unix_sockets[0], sizeof(BpfUnixEntry)) == 0);

    std::string text = explain_text(i);
    CHECK_THAT(text, Catch::Contains("every socket below /run/app/workers/"));
    CHECK_THAT(text, Catch::Contains("connect abstract name @app-bus"));
}

TEST_CASE("a bundle without unix rules keeps its JSON: no unix keys, every named socket refused", "[compiler][unix]") {
    Bundle b = require_ok("tool: t\nfiles: { read: [/etc] }\nnetwork: none\n");
    auto j = bundle_to_json(b);
    CHECK_FALSE(j["network"].contains("unix"));
    CHECK_FALSE(j["bpf"].contains("unix"));
    CHECK_FALSE((b.bpf.header.flags & BW_POL_UNIX_RULES));
    for (auto eval : {&evaluate, &evaluate_tables}) {
        auto d = eval(b, unix_op(OpKind::Connect, "/run/docker.sock"));
        CHECK(d.verdict == Verdict::Deny);
        CHECK(d.layer == BW_LAYER_SOCK_UNIX);
        CHECK(d.rule_id == BW_NO_RULE);
        CHECK_THAT(d.explanation, Catch::Contains("network.unix.connect: [/run/docker.sock]"));
    }
}

TEST_CASE("unix rules: one socket, a directory's sockets, abstract names; rules and tables agree", "[evaluator][unix]") {
    Bundle b = instantiated(require_ok(kTool));
    check_unix_cases(b, {
        {OpKind::Connect, "/run/app/api.sock", true, 0},
        {OpKind::Send, "/run/app/api.sock", false, -1},      // connect only
        {OpKind::Connect, "/run/app/other.sock", false, -1}, // same granted dir, another socket
        {OpKind::Connect, "/run/app/api.sock2", false, -1},
        {OpKind::Connect, "/run/app/api.soc", false, -1},
        {OpKind::Connect, "/run/app/workers/w1.sock", true, 1},
        {OpKind::Connect, "/run/app/workers/deep/w2.sock", true, 1},
        {OpKind::Send, "/run/app/workers/w1.sock", true, 5},
        {OpKind::Connect, "/run/app/workers", false, -1},    // the directory's own name
        {OpKind::Connect, "/run/app/workers/../api.sock", false, -1},
        {OpKind::Connect, "/run/app/workers/../../docker.sock", false, -1},
        {OpKind::Connect, "/run/app/./api.sock", false, -1}, // other spelling
        {OpKind::Connect, "//run/app/api.sock", false, -1},
        {OpKind::Connect, "api.sock", false, -1},            // relative
        {OpKind::Connect, "@app-bus", true, 2},
        {OpKind::Connect, "@app-bus2", false, -1},
        {OpKind::Connect, "@app-bu", false, -1},
        {OpKind::Send, "@app-bus", false, -1},
        {OpKind::Send, "/run/app/log.sock", true, 4},
        {OpKind::Connect, "/run/app/log.sock", false, -1},
        {OpKind::Connect, "/home/agent/.app/ctl.sock", true, 3},
        {OpKind::Connect, "/srv/data/x.sock", false, -1},    // files read+write on the dir: no connect
    });
}

TEST_CASE("unix rules: audit mode allows what it would refuse", "[evaluator][unix]") {
    Bundle b = require_ok("tool: t\nmode: audit\nfiles: { read: [/etc] }\nnetwork: { unix: { connect: [/run/a.sock] } }\n");
    for (auto eval : {&evaluate, &evaluate_tables}) {
        CHECK(eval(b, unix_op(OpKind::Connect, "/run/b.sock")).verdict == Verdict::Audit);
        CHECK(eval(b, unix_op(OpKind::Connect, "/run/a.sock")).verdict == Verdict::Allow);
    }
}

TEST_CASE("network.unix rejects what it cannot hold, naming file:line:col", "[compiler][unix]") {
    const std::string head = "tool: t\nfiles: { read: [/etc], create: [/tmp/t], remove: [/srv/r] }\n";
    require_error(head + "network: { unix: { connect: [run/app.sock] } }\n", "bad-path");
    require_error(head + "network: { unix: { connect: [/run/../app.sock] } }\n", "bad-path");
    require_error(head + "network: { unix: { connect: [/] } }\n", "unix-too-broad");
    require_error(head + "network: { unix: { connect: [\"@\"] } }\n", "bad-unix-address");
    require_error(head + "network: { unix: { connect: [\"@a\\x01b\"] } }\n", "bad-unix-address");
    require_error(head + "network: { unix: { connect: [/" + std::string(108, 'a') + "] } }\n", "bad-unix-address");
    require_error(head + "network: { unix: { connect: [\"@" + std::string(108, 'a') + "\"] } }\n", "bad-unix-address");
    require_error(head + "network: { unix: { connect: [] } }\n", "empty-list");
    require_error(head + "network: { unix: { listen: [/run/a.sock] } }\n", "unknown-key");
    require_error(head + "network: { unix: [/run/a.sock] }\n", "wrong-type");
    // a socket the tool could replace: create at its directory, remove above it
    require_error(head + "network: { unix: { connect: [/tmp/t/app.sock] } }\n", "unix-rule-unsound");
    require_error(head + "network: { unix: { connect: [/srv/r/x/app.sock] } }\n", "unix-rule-unsound");
    require_error(head + "network: { unix: { connect: [/tmp/t/] } }\n", "unix-rule-unsound");
    // no files: rules at all: file rights are unrestricted
    require_error("tool: t\nnetwork: { unix: { connect: [/run/a.sock] } }\n", "unix-rule-unsound");
    // abstract names have no path to replace
    require_ok("tool: t\nnetwork: { unix: { connect: [\"@bus\"] } }\n");
    // 108 bytes is the most sun_path holds
    require_ok(head + "network: { unix: { connect: [/" + std::string(107, 'a') + "] } }\n");

    require_error_at(head + "network: { unix: { connect: [/tmp/t/app.sock] } }\n", "unix-rule-unsound", 3, 30,
                     "may create at /tmp/t");
}

TEST_CASE("a variable-rooted unix rule is checked again once the variables are known", "[compiler][unix]") {
    // ${workdir} and /srv are unrelated at compile time; at instantiate time the workdir is /srv/t1
    Bundle b = require_ok("tool: t\nfiles: { read: [/etc], create: [\"${workdir}\"] }\n"
                          "network: { unix: { connect: [/srv/t1/app.sock] } }\n");
    auto i = instantiate(b, {{"workdir", "/srv/t1"}, {"home", "/home/a"}, {"tmp", "/tmp/t1"}, {"task_id", "t1"}}, nullptr);
    REQUIRE_FALSE(i);
    CHECK_THAT(i.error().message, Catch::Contains("cannot be held to its socket"));
    auto ok = instantiate(b, {{"workdir", "/srv/t2"}, {"home", "/home/a"}, {"tmp", "/tmp/t1"}, {"task_id", "t1"}}, nullptr);
    CHECK(ok);
}

TEST_CASE("unix_rule_key: exact sockets end in NUL, directories do not, abstract names carry their length", "[tables][unix]") {
    auto k = unix_rule_key("/run/a.sock");
    REQUIRE(k);
    CHECK(k->kind == BW_UNIX_PATH);
    CHECK(k->prefixlen == 32 + 8 + 8 * 12);
    CHECK(std::memcmp(k->name, "/run/a.sock\0", 12) == 0);
    k = unix_rule_key("/run/app/");
    REQUIRE(k);
    CHECK(k->prefixlen == 32 + 8 + 8 * 9);
    k = unix_rule_key("@bus");
    REQUIRE(k);
    CHECK(k->kind == BW_UNIX_ABSTRACT);
    CHECK(k->name[0] == 3);
    CHECK(std::memcmp(k->name + 1, "bus", 3) == 0);
    CHECK(k->prefixlen == 32 + 8 + 8 * 4);
    CHECK_FALSE(unix_rule_key("relative.sock"));
    CHECK_FALSE(unix_rule_key("/" + std::string(108, 'x')));
    CHECK(unix_rule_key("/" + std::string(107, 'x')));
    CHECK_FALSE(unix_rule_key("@" + std::string(108, 'x')));
    CHECK(unix_rule_key("@" + std::string(107, 'x')));
}

TEST_CASE("tables: a socket entry carries the ops of the directory rules above it", "[tables][unix]") {
    std::vector<UnixRule> rules = {{"/run/app/", BW_NET_CONNECT, 1}, {"/run/app/x.sock", BW_NET_SEND, 2},
                                   {"/run/app/sub/", BW_NET_SEND, 3}};
    auto e = build_unix_entries(rules);
    REQUIRE(e);
    REQUIRE(e->size() == 3);
    // sorted by address: /run/app/, /run/app/sub/, /run/app/x.sock
    CHECK((*e)[0].value.op_mask == BW_NET_CONNECT);
    CHECK((*e)[1].value.op_mask == (BW_NET_CONNECT | BW_NET_SEND));
    CHECK((*e)[1].value.connect_rule_id == 1);
    CHECK((*e)[1].value.send_rule_id == 3);
    CHECK((*e)[2].value.op_mask == (BW_NET_CONNECT | BW_NET_SEND));
    CHECK((*e)[2].value.send_rule_id == 2);
    std::vector<UnixRule> unresolved = {{"${home}/a.sock", BW_NET_CONNECT, 1}};
    CHECK_FALSE(build_unix_entries(unresolved));
}

// ---------------------------------------------------------------- bind

namespace {

const char* kBinder = R"(tool: srv
files:
  read: [/etc]
  create: ["${workdir}", /srv/own]
network:
  families: [unix]
  unix:
    bind: ["${workdir}/sockets/", /srv/own/ctl.sock, "@srv-worker"]
    connect: [/run/app.sock]
)";

}  // namespace

TEST_CASE("network.unix.bind: rules, tables, and Landlock make_sock only where a bind rule says", "[compiler][unix]") {
    Bundle b = require_ok(kBinder);
    REQUIRE(b.network.unix_rules.size() == 4);  // connect, then bind
    CHECK(b.network.unix_rules[1].op_mask == BW_NET_BIND);
    CHECK(b.network.unix_rules[1].address == "${workdir}/sockets/");
    // a create right makes files, directories, symlinks, fifos, never a socket
    constexpr uint64_t kMakeSock = LANDLOCK_ACCESS_FS_MAKE_SOCK;
    CHECK_FALSE((landlock_fs_access(BW_FS_ALL) & kMakeSock));
    uint64_t at_workdir = 0, at_sockets = 0, at_own = 0;
    for (const auto& p : b.landlock.paths) {
        if (p.path == "${workdir}") at_workdir |= p.access;
        if (p.path == "${workdir}/sockets") at_sockets |= p.access;
        if (p.path == "/srv/own") at_own |= p.access;
    }
    CHECK(at_workdir != 0);
    CHECK_FALSE((at_workdir & kMakeSock));
    CHECK(at_sockets == kMakeSock);
    CHECK((at_own & kMakeSock));  // the one-socket rule's directory: the BPF LSM holds the name
    bool gap = false;
    for (const auto& g : b.landlock.gaps) gap = gap || g.find("any socket in /srv/own") != std::string::npos;
    CHECK(gap);

    // the JSON round trip keeps each entry's bind rule (the compiled hash holds)
    auto back = bundle_from_json(bundle_to_json(b));
    INFO((back ? "" : back.error()));
    REQUIRE(back);
    REQUIRE(back->bpf.unix_sockets.size() == 3);
    for (size_t k = 0; k < b.bpf.unix_sockets.size(); ++k)
        CHECK(std::memcmp(&back->bpf.unix_sockets[k], &b.bpf.unix_sockets[k], sizeof(BpfUnixEntry)) == 0);
    Bundle i = instantiated(b);
    CHECK_THAT(explain_text(i), Catch::Contains("bind every socket below /srv/t1/sockets/"));
}

TEST_CASE("unix bind: only where a bind rule says (or the private /tmp); rules and tables agree", "[evaluator][unix]") {
    Bundle b = instantiated(require_ok(kBinder));
    check_unix_cases(b, {
        {OpKind::Bind, "/srv/t1/sockets/a.sock", true, 1},
        {OpKind::Bind, "/srv/t1/sockets/deep/b.sock", true, 1},
        {OpKind::Bind, "/srv/t1/a.sock", false, -1},           // create right on the workdir: no bind right
        {OpKind::Bind, "/srv/t1/sockets/../a.sock", false, -1},
        {OpKind::Bind, "/srv/own/ctl.sock", true, 2},
        {OpKind::Bind, "/srv/own/other.sock", false, -1},      // the one name only
        {OpKind::Bind, "@srv-worker", true, 3},
        {OpKind::Bind, "@srv-worker2", false, -1},
        {OpKind::Bind, "@/tmp/.X11-unix/X0", false, -1},       // squatting a host name
        {OpKind::Bind, "/run/app.sock", false, -1},            // a connect rule is no bind right
        {OpKind::Connect, "/srv/t1/sockets/a.sock", false, -1},// nor the reverse
        {OpKind::Connect, "@srv-worker", false, -1},
        {OpKind::Bind, "/tmp/x.sock", true, -1},               // the sandbox's private /tmp
        {OpKind::Bind, "/tmp/../etc/x.sock", false, -1},
        {OpKind::Bind, "/tmpx/a.sock", false, -1},
        {OpKind::Bind, "x.sock", false, -1},                   // relative: judged as written
    });
    auto d = evaluate(b, unix_op(OpKind::Bind, "/srv/t1/a.sock"));
    CHECK_THAT(d.explanation, Catch::Contains("a create right on the directory is no bind right"));
    CHECK_THAT(d.explanation, Catch::Contains("network.unix.bind: [/srv/t1/a.sock]"));
}

TEST_CASE("network.unix.bind needs a place the tool may create in, named at file:line:col", "[compiler][unix]") {
    const std::string head = "tool: t\nfiles: { read: [/etc], create: [/srv/c] }\n";
    require_ok(head + "network: { unix: { bind: [/srv/c/a.sock, /srv/c/d/, \"@x\"] } }\n");
    require_ok(head + "network: { unix: { bind: [\"${tmp}/s/\", /tmp/x.sock] } }\n");  // the private /tmp
    require_ok("tool: t\nnetwork: { unix: { bind: [/srv/a.sock] } }\n");  // no files: rules: unrestricted
    require_error(head + "network: { unix: { bind: [/etc/a.sock] } }\n", "unix-bind-uncreatable");
    require_error("tool: t\nfiles: { create: [/srv/c], deny: [{ path: /srv/c/no, rights: [create] }] }\n"
                  "network: { unix: { bind: [/srv/c/no/a.sock] } }\n",
                  "unix-bind-uncreatable");
    require_error_at(head + "network:\n  unix:\n    bind: [/srv/c/ok.sock, /run/x.sock]\n", "unix-bind-uncreatable", 5,
                     28, "no files rule lets it create at /run/x.sock");
    // a variable-rooted bind rule is checked again at instantiate
    Bundle v = require_ok("tool: t\nfiles: { read: [/etc], create: [\"${workdir}\"] }\n"
                          "network: { unix: { bind: [\"${workdir}/s/\"] } }\n");
    CHECK(instantiate(v, {{"workdir", "/srv/t1"}, {"home", "/h"}, {"tmp", "/tmp/t1"}, {"task_id", "t1"}}, nullptr));
}
