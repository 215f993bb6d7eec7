// Per-rule coverage: which layers can hold each rule, and the
// `unenforceable: run` opt-out (rule, file, extends, bundle JSON).
#include "compiler_support.h"

#include <linux/netlink.h>
#include <sys/socket.h>

#include <filesystem>
#include <fstream>

#include "bulwark/policy/cbpf.h"
#include "bulwark/policy/compiler.h"
#include "bulwark/policy/coverage.h"
#include "bulwark/policy/grants.h"
#include "bulwark/policy/instantiate.h"

using namespace bulwark::test;

namespace {

const RuleCoverage* find_rule(const std::vector<RuleCoverage>& cov, const Bundle& b, std::string_view text) {
    for (const auto& c : cov)
        if (b.rule(c.rule_id) && b.rule(c.rule_id)->text == text) return &c;
    return nullptr;
}

std::vector<std::string> layer_names(const RuleCoverage& c) {
    std::vector<std::string> out;
    for (const auto& l : c.layers) out.push_back(l.layer);
    return out;
}

// Compiled by the real seccomp compiler (compile() records the spec instead).
Bundle compiled_with_seccomp(const char* text) {
    auto compiled = compile_string(text, "t.yaml", {});
    INFO(render_diagnostics(compiled));
    REQUIRE(compiled.ok());
    return *compiled.bundle;
}

}  // namespace

TEST_CASE("a deny below an allowed subtree is held by the BPF LSM and the mount layer, not Landlock",
          "[compiler][coverage]") {
    auto b = require_ok(
        "tool: t\nfiles:\n  read: [\"${workdir}\"]\n  write: [\"${workdir}\"]\n"
        "  deny:\n    - \"${workdir}/secret\"\n    - { path: \"${workdir}/.git\", rights: [write] }\n"
        "    - { path: /etc/shadow, rights: [read] }\n");
    auto cov = rule_coverage(b);
    const auto* secret = find_rule(cov, b, "files.deny: ${workdir}/secret");
    REQUIRE(secret);
    CHECK(layer_names(*secret) == std::vector<std::string>{"bpf_lsm", "mount"});
    CHECK(secret->deny_below_allow == (BW_FS_READ | BW_FS_WRITE));
    CHECK(secret->layers[1].how.find("inaccessible") != std::string::npos);
    // Landlock still takes away what no allow above grants.
    CHECK(secret->layers[1].how.find("Landlock also refuses create,remove,exec") != std::string::npos);
    const auto* git = find_rule(cov, b, "files.deny: {path: ${workdir}/.git, rights: [write]}");
    REQUIRE(git);
    CHECK(layer_names(*git) == std::vector<std::string>{"bpf_lsm", "mount"});
    CHECK(git->layers[1].how.find("read-only") != std::string::npos);
    // Nothing above /etc/shadow is allowed: Landlock simply grants nothing there.
    const auto* shadow = find_rule(cov, b, "files.deny: {path: /etc/shadow, rights: [read]}");
    REQUIRE(shadow);
    CHECK(layer_names(*shadow) == std::vector<std::string>{"bpf_lsm", "landlock"});
    CHECK(shadow->deny_below_allow == 0);
    const auto* read = find_rule(cov, b, "files.read: ${workdir}");
    REQUIRE(read);
    CHECK(layer_names(*read) == std::vector<std::string>{"bpf_lsm", "landlock"});
    CHECK(read->rights == BW_FS_READ);
}

TEST_CASE("every rule kind names the layers that hold it", "[compiler][coverage]") {
    auto b = require_ok(
        "tool: t\nbinaries: [/usr/bin/curl]\nexec: { allow: [/usr/bin/curl] }\n"
        "network:\n  connect: [{ cidr: 10.0.0.0/8, ports: [443] }]\n  deny: [{ cidr: 10.1.0.0/16 }]\n"
        "syscalls: { deny: [ptrace] }\nlimits: { memory: 64MiB, pids: 4, timeout: 5s, open_files: 64 }\n"
        "environment: { set: { A: b } }\n");
    auto cov = rule_coverage(b);
    auto layers_of = [&](std::string_view text) {
        const auto* c = find_rule(cov, b, text);
        INFO(text);
        REQUIRE(c);
        return layer_names(*c);
    };
    using V = std::vector<std::string>;
    CHECK(layers_of("binaries: /usr/bin/curl") == V{"supervisor"});
    CHECK(layers_of("exec.allow: /usr/bin/curl") == V{"bpf_lsm", "landlock"});
    CHECK(layers_of("network.connect: {cidr: 10.0.0.0/8, ports: [443]}") == V{"sock_addr"});
    CHECK(layers_of("network.deny: {cidr: 10.1.0.0/16}") == V{"sock_addr"});
    CHECK(layers_of("syscalls.deny: ptrace") == V{"seccomp"});
    CHECK(layers_of("limits.memory: 64MiB") == V{"cgroup"});
    CHECK(layers_of("limits.pids: 4") == V{"cgroup", "rlimit"});
    CHECK(layers_of("limits.timeout: 5s") == V{"supervisor"});
    CHECK(layers_of("limits.open_files: 64") == V{"rlimit"});
    CHECK(layers_of("environment.set.A: b") == V{"supervisor"});
    // The tool's name needs no enforcement and is not listed.
    CHECK_FALSE(find_rule(cov, b, "tool: t"));
    auto none = require_ok("tool: t\nnetwork: none\n");
    auto nc = rule_coverage(none);
    REQUIRE(find_rule(nc, none, "network: none"));
    CHECK(layer_names(*find_rule(nc, none, "network: none")) == V{"netns"});
}

TEST_CASE("unenforceable: run marks a rule, a file, or a tool with what it extends", "[compiler][coverage]") {
    auto b = require_ok(
        "tool: t\nfiles:\n  read: [/data]\n  deny:\n    - { path: /data/a, unenforceable: run }\n    - /data/b\n"
        "network:\n  connect: [{ cidr: 10.0.0.0/8, unenforceable: refuse }]\n");
    auto cov = rule_coverage(b);
    CHECK(find_rule(cov, b, "files.deny: {path: /data/a, unenforceable: run}")->unenforceable_run);
    CHECK_FALSE(find_rule(cov, b, "files.deny: /data/b")->unenforceable_run);
    CHECK_FALSE(find_rule(cov, b, "network.connect: {cidr: 10.0.0.0/8, unenforceable: refuse}")->unenforceable_run);
    // The flag travels with the bundle and is part of its hash.
    auto j = bundle_to_json(b);
    auto back = bundle_from_json(j);
    REQUIRE(back);
    CHECK(back->rules[find_rule(cov, b, "files.deny: {path: /data/a, unenforceable: run}")->rule_id].unenforceable_run);
    auto plain = require_ok("tool: t\nfiles:\n  read: [/data]\n  deny:\n    - { path: /data/a }\n    - /data/b\n"
                            "network:\n  connect: [{ cidr: 10.0.0.0/8 }]\n");
    CHECK(plain.hash != b.hash);

    auto whole = require_ok("tool: t\nunenforceable: run\nfiles:\n  read: [/data]\n  deny: [/data/a]\n");
    for (const auto& c : rule_coverage(whole)) CHECK(c.unenforceable_run);

    namespace fs = std::filesystem;
    fs::path dir = fs::temp_directory_path() / ("bw-cov-" + std::to_string(::getpid()));
    fs::create_directories(dir / "base");
    std::ofstream(dir / "base" / "b.yaml") << "tool: b\nfiles:\n  read: [/data]\n  deny: [/data/a]\n";
    auto child = compile("tool: t\nextends: base/b\nunenforceable: run\n", {dir.string()});
    REQUIRE(child.ok());
    for (const auto& c : rule_coverage(*child.bundle)) CHECK(c.unenforceable_run);
    // A base's own opt-out covers the base's rules only.
    std::ofstream(dir / "base" / "o.yaml") << "tool: o\nunenforceable: run\nfiles:\n  deny: [/data/x]\n";
    auto mixed = compile("tool: t\nextends: base/o\nfiles:\n  read: [/data]\n  deny: [/data/y]\n", {dir.string()});
    REQUIRE(mixed.ok());
    auto mc = rule_coverage(*mixed.bundle);
    CHECK(find_rule(mc, *mixed.bundle, "files.deny: /data/x")->unenforceable_run);
    CHECK_FALSE(find_rule(mc, *mixed.bundle, "files.deny: /data/y")->unenforceable_run);
    fs::remove_all(dir);
}

TEST_CASE("unenforceable takes run or refuse, with the place of the mistake", "[compiler][coverage]") {
    for (const char* text : {"tool: t\nunenforceable: yes\n",
                             "tool: t\nfiles:\n  read: [/d]\n  deny: [{ path: /d/x, unenforceable: always }]\n",
                             "tool: t\nnetwork:\n  connect: [{ cidr: 10.0.0.0/8, unenforceable: [run] }]\n"}) {
        auto r = compile(text);
        INFO(text << render_diagnostics(r));
        CHECK_FALSE(r.ok());
        bool found = false;
        for (const auto& d : r.diagnostics)
            if (d.severity == Severity::Error && d.loc.line > 1 && d.loc.col > 1) found = true;
        CHECK(found);
    }
    auto r = compile("tool: t\nunenforceable: yes\n");
    CHECK(render_diagnostics(r).find("test.yaml:2:16: error: \"unenforceable\" must be run or refuse") !=
          std::string::npos);
}

TEST_CASE("a grant that narrows a files rule away leaves it held by what holds the default deny",
          "[compiler][coverage]") {
    auto b = require_ok("tool: t\nfiles:\n  read: [/data]\n  write: [/data]\n");
    // As a grant scoping writes does: the rule stays, its entry goes.
    std::erase_if(b.files, [](const FileRule& f) { return f.allow == BW_FS_WRITE; });
    auto cov = rule_coverage(b);
    const auto* w = find_rule(cov, b, "files.write: /data");
    REQUIRE(w);
    CHECK(layer_names(*w) == std::vector<std::string>{"bpf_lsm", "landlock"});
}

TEST_CASE("a tool that may make unix sockets has the unix default deny as a rule of its own", "[compiler][coverage]") {
    using V = std::vector<std::string>;
    auto row = [](const std::vector<RuleCoverage>& cov) -> const RuleCoverage* {
        for (const auto& c : cov)
            if (c.kind == "network.unix.default_deny") return &c;
        return nullptr;
    };
    // files grants alone: every named unix socket is refused, by either unix layer
    auto files_only = require_ok("tool: t\nfiles:\n  read: [/run]\n");
    auto cov = rule_coverage(files_only);
    const auto* d = row(cov);
    REQUIRE(d);
    CHECK(layer_names(*d) == V{"sock_unix", "bpf_lsm"});
    CHECK(d->rule_id == BW_NO_RULE);
    CHECK(d->text.find("a file grant is not a connect right") != std::string::npos);
    CHECK_FALSE(d->unenforceable_run);
    // the unix rules themselves: the same two layers
    auto rules = require_ok(
        "tool: t\nfiles:\n  read: [/run]\nnetwork:\n  families: [unix]\n  unix: { connect: [/run/app.sock] }\n");
    auto rc = rule_coverage(rules);
    REQUIRE(find_rule(rc, rules, "network.unix.connect: /run/app.sock"));
    CHECK(layer_names(*find_rule(rc, rules, "network.unix.connect: /run/app.sock")) == V{"sock_unix", "bpf_lsm"});
    REQUIRE(row(rc));
    // no unix family: no unix socket at all, no row
    auto inet = require_ok("tool: t\nnetwork:\n  families: [inet]\n  connect: [{ cidr: 10.0.0.0/8 }]\n");
    CHECK_FALSE(row(rule_coverage(inet)));
    // the tool's file opts out for it
    auto opted = require_ok("tool: t\nunenforceable: run\nfiles:\n  read: [/run]\n");
    REQUIRE(row(rule_coverage(opted)));
    CHECK(row(rule_coverage(opted))->unenforceable_run);
}

namespace {

const RuleCoverage* find_kind(const std::vector<RuleCoverage>& cov, std::string_view kind) {
    for (const auto& c : cov)
        if (c.kind == kind) return &c;
    return nullptr;
}

}  // namespace

TEST_CASE("unix binds: the two defaults and each bind rule, with the layers that hold them", "[compiler][coverage]") {
    using V = std::vector<std::string>;
    // own network namespace (network: none), files under Landlock
    auto own = require_ok("tool: t\nfiles: { read: [/etc], create: [/srv] }\nnetwork: none\n");
    auto cov = rule_coverage(own);
    REQUIRE(find_kind(cov, "network.unix.path_bind_default_deny"));
    CHECK(layer_names(*find_kind(cov, "network.unix.path_bind_default_deny")) == V{"bpf_lsm", "landlock"});
    CHECK(layer_names(*find_kind(cov, "network.unix.abstract_bind_default_deny")) == V{"bpf_lsm", "netns"});
    // no files: rules: Landlock does not handle the file system
    auto open = require_ok("tool: t\nnetwork: none\n");
    CHECK(layer_names(*find_kind(rule_coverage(open), "network.unix.path_bind_default_deny")) == V{"bpf_lsm"});

    // network rules share the host's network namespace: an abstract name there is the host's
    auto host = require_ok("tool: t\nfiles: { read: [/etc], create: [/srv] }\n"
                           "network: { connect: [{ cidr: 10.0.0.0/8 }], unix: { bind: [/srv/s/, /srv/one.sock, \"@n\"] } }\n");
    auto hc = rule_coverage(host);
    CHECK(layer_names(*find_kind(hc, "network.unix.abstract_bind_default_deny")) == V{"bpf_lsm"});
    CHECK(layer_names(*find_rule(hc, host, "network.unix.bind: /srv/s/")) == V{"bpf_lsm", "landlock"});
    CHECK(layer_names(*find_rule(hc, host, "network.unix.bind: /srv/one.sock")) == V{"bpf_lsm"});
    CHECK(layer_names(*find_rule(hc, host, "network.unix.bind: @n")) == V{"bpf_lsm"});
    // ... unless bind(2) is refused altogether (the shipped curl); the real
    // seccomp compiler, since the claim runs the filter
    auto real = [](const std::string& text) {
        auto r = bulwark::policy::compile_string(text, "test.yaml", bulwark::policy::CompileOptions{});
        REQUIRE(r.ok());
        return *r.bundle;
    };
    const std::string hostnet = "tool: t\nfiles: { read: [/etc] }\nnetwork: { connect: [{ cidr: 10.0.0.0/8 }] }\n";
    auto nc = rule_coverage(real(hostnet + "syscalls: { deny: [bind] }\n"));
    CHECK(layer_names(*find_kind(nc, "network.unix.abstract_bind_default_deny")) == V{"bpf_lsm", "seccomp"});
    CHECK(layer_names(*find_kind(nc, "network.unix.path_bind_default_deny")) == V{"bpf_lsm", "landlock", "seccomp"});
    // a deny that only logs refuses nothing, nor does audit mode
    auto logged = rule_coverage(real(hostnet + "syscalls: { deny: [{ name: bind, action: log }] }\n"));
    CHECK(layer_names(*find_kind(logged, "network.unix.abstract_bind_default_deny")) == V{"bpf_lsm"});
    auto audit = rule_coverage(real(hostnet + "mode: audit\nsyscalls: { deny: [bind] }\n"));
    CHECK(layer_names(*find_kind(audit, "network.unix.abstract_bind_default_deny")) == V{"bpf_lsm"});
    // no unix family: no unix rows
    auto inet = require_ok("tool: t\nfiles: { read: [/etc] }\nnetwork: { families: [inet], connect: [{ cidr: 10.0.0.0/8 }] }\n");
    CHECK_FALSE(find_kind(rule_coverage(inet), "network.unix.abstract_bind_default_deny"));
}

TEST_CASE("network.unix.unenforceable: run opts out the unix rules and defaults only, from the tool's own file",
          "[compiler][coverage]") {
    auto b = require_ok("tool: t\nfiles: { read: [/etc], deny: [/etc/shadow] }\n"
                        "network:\n  connect: [{ cidr: 10.0.0.0/8 }]\n  unix:\n    connect: [\"@bus\"]\n"
                        "    unenforceable: run\n");
    auto cov = rule_coverage(b);
    for (auto k : {"network.unix.default_deny", "network.unix.path_bind_default_deny",
                   "network.unix.abstract_bind_default_deny"})
        CHECK(find_kind(cov, k)->unenforceable_run);
    CHECK(find_rule(cov, b, "network.unix.connect: @bus")->unenforceable_run);
    CHECK_FALSE(find_rule(cov, b, "files.deny: /etc/shadow")->unenforceable_run);
    CHECK_FALSE(find_kind(cov, "network.default_deny")->unenforceable_run);
    for (const auto& c : cov) CHECK(c.kind != "network.unix.unenforceable");  // the opt-out is no row
    require_error("tool: t\nnetwork: { unix: { unenforceable: always } }\n", "bad-value");

    namespace fs = std::filesystem;
    fs::path dir = fs::temp_directory_path() / ("bw-cov-unix-" + std::to_string(::getpid()));
    fs::create_directories(dir / "base");
    std::ofstream(dir / "base" / "u.yaml") << "tool: u\nnetwork:\n  unix:\n    unenforceable: run\n";
    auto child = compile("tool: t\nextends: base/u\nfiles: { read: [/etc] }\n", {dir.string()});
    REQUIRE(child.ok());
    CHECK_FALSE(find_kind(rule_coverage(*child.bundle), "network.unix.default_deny")->unenforceable_run);
    fs::remove_all(dir);
}

TEST_CASE("network.families is held by the BPF LSM and the seccomp filter, whatever the family",
          "[compiler][coverage]") {
    using V = std::vector<std::string>;
    const char* text = "tool: t\nnetwork:\n  families: [unix, inet, netlink]\n  connect: [{ cidr: 10.0.0.0/8 }]\n";
    const Bundle b = compiled_with_seccomp(text);
    const auto cov = rule_coverage(b);
    for (const char* rule : {"network.families: unix", "network.families: netlink"}) {
        const auto* row = find_rule(cov, b, rule);
        INFO(rule);
        REQUIRE(row);
        CHECK(layer_names(*row) == V{"bpf_lsm", "seccomp"});  // not sock_addr: sock_create sees inet alone
    }
    // The control: a filter that lets every family through (the recording
    // backend's allow-all) leaves the BPF LSM alone.
    const Bundle open = require_ok(text);
    const auto open_cov = rule_coverage(open);
    const auto* row = find_rule(open_cov, open, "network.families: netlink");
    REQUIRE(row);
    CHECK(layer_names(*row) == V{"bpf_lsm"});
}

TEST_CASE("network.netlink narrows netlink sockets to the listed protocols, held by the BPF LSM and the seccomp filter",
          "[compiler][coverage][netlink]") {
    using V = std::vector<std::string>;
    const char* text = "tool: t\nnetwork:\n  families: [unix, netlink]\n  netlink: [route, sock_diag]\n";
    const Bundle b = compiled_with_seccomp(text);
    REQUIRE(b.network.netlink_allow);
    CHECK(*b.network.netlink_allow == ((1u << NETLINK_ROUTE) | (1u << NETLINK_SOCK_DIAG)));
    // The filter: route and sock_diag open, every other protocol refused.
    CHECK(netlink_protocols_through(b.seccomp.program) == *b.network.netlink_allow);
    CHECK(socket_families_through(b.seccomp.program, "socket") == ((1ull << AF_UNIX) | (1ull << AF_NETLINK)));
    const auto cov = rule_coverage(b);
    for (const char* rule : {"network.netlink: route", "network.netlink: sock_diag"}) {
        const auto* row = find_rule(cov, b, rule);
        INFO(rule);
        REQUIRE(row);
        CHECK(layer_names(*row) == V{"bpf_lsm", "seccomp"});
    }
    // The LSM's policy map entry carries the list behind its flag.
    CHECK((b.bpf.header.flags & BW_POL_NETLINK_LIST));
    CHECK(b.bpf.header.netlink_allow == *b.network.netlink_allow);
    // The list survives the bundle's JSON; a bundle without it has none.
    auto back = bundle_from_json(bundle_to_json(b));
    REQUIRE(back);
    CHECK(back->network.netlink_allow == b.network.netlink_allow);
    CHECK(back->bpf.header.netlink_allow == b.bpf.header.netlink_allow);
    CHECK(back->hash == b.hash);

    // The control: netlink without a list opens every protocol, and the
    // compiler says so at the family's entry.
    auto open = compile_string("tool: t\nnetwork:\n  families: [unix, netlink]\n", "t.yaml", {});
    INFO(render_diagnostics(open));
    REQUIRE(open.ok());
    CHECK_FALSE(open.bundle->network.netlink_allow);
    CHECK(netlink_protocols_through(open.bundle->seccomp.program) & (1u << NETLINK_AUDIT));
    const Diagnostic* w = find_diag(open, "netlink-every-protocol");
    REQUIRE(w);
    CHECK(w->severity == Severity::Warning);
    CHECK(w->loc.line == 3);
    CHECK(w->loc.col == 20);
    CHECK_FALSE(bundle_to_json(*open.bundle)["network"].contains("netlink_allow"));
    CHECK_FALSE((open.bundle->bpf.header.flags & BW_POL_NETLINK_LIST));
    CHECK_FALSE(bundle_to_json(*open.bundle)["bpf"]["header"].contains("netlink_allow"));

    // A grant narrowing the families keeps the protocol list behind its check.
    Grant g;
    g.families = (1ull << AF_NETLINK);
    auto inst = instantiate(b, TaskVars{}, {});
    REQUIRE(inst);
    auto narrowed = apply_grant(*inst, g, std::chrono::system_clock::now());
    REQUIRE(narrowed);
    CHECK(netlink_protocols_through(narrowed->bundle.seccomp.program) == *b.network.netlink_allow);
    CHECK(socket_families_through(narrowed->bundle.seccomp.program, "socket") == (1ull << AF_NETLINK));
}

TEST_CASE("network.netlink: unknown protocols and a list without the family are errors", "[compiler][netlink]") {
    require_error_at("tool: t\nnetwork:\n  families: [netlink]\n  netlink: [rout]\n", "unknown-netlink-protocol", 4, 13,
                     "unknown netlink protocol \"rout\"");
    auto r = compile("tool: t\nnetwork:\n  families: [netlink]\n  netlink: [rout]\n");
    const Diagnostic* d = find_diag(r, "unknown-netlink-protocol");
    REQUIRE(d);
    REQUIRE_FALSE(d->hints.empty());
    CHECK(d->hints[0] == "did you mean \"route\"?");
    require_error_at("tool: t\nnetwork:\n  families: [unix, inet]\n  netlink: [route]\n", "family-missing", 4, 13,
                     "network.families leaves netlink out");
}
