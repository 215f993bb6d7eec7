// flatten_rule_file + rule_file_text: a rule file with its bases merged in,
// written back as one file, compiles to the bundle the original compiles to.
//
// What is compared: the two trees value by value (the flattened original and
// the printed text read back), and the two bundles' canonical JSON with
// three things set aside, each because the text cannot keep it:
//  - rule ids. A compile numbers rules in the order it reads them: the tool's
//    own file first, then each base. The flat text holds the same rules in
//    the merged order (bases first, each list in its place), so its ids are
//    another numbering of the same rules. Walking the two trees side by side
//    pairs each id of the text with the original's, and the text's bundle is
//    renumbered with those pairs before the JSON is compared; a rule of the
//    text that pairs with none, or with two, fails the test.
//  - where and how rules are written: Bundle::rules (file, line, column and
//    text; its section and `unenforceable: run` are compared per paired
//    rule), and the text and place by which a Landlock gap names a rule
//    (replaced by the rule's id). A rule's text is its entry as written:
//    `{ name: x }` and `x` are one rule, printed the one way.
//    Rules only a base wrote that the merge overrode (a base's `mode:`)
//    exist in the original's table alone and are not compared; nor is rule
//    0, the defaults of each compile (the original's is marked by a tool
//    file's `unenforceable: run` when it extends something, no one holds it).
//  - `extends` (the chain the original read; the flat text extends nothing)
//    and `hash` (of the whole JSON, rules table and chain included).
#include <catch2/catch.hpp>

#include "compiler_support.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "bulwark/policy/compiler.h"
#include "bulwark/policy/rule_file_text.h"

namespace fs = std::filesystem;
using namespace bulwark::policy;
using nlohmann::json;

namespace {

const fs::path kShippedRules = fs::path(BULWARK_SOURCE_DIR) / "rules";

// The two trees side by side: every value equal, every rule id of the text
// paired with the original's.
struct TreePairing {
    std::map<uint32_t, uint32_t> text_to_original;
    std::vector<std::string> problems;

    void id(uint32_t original, uint32_t text, const std::string& what) {
        auto [it, fresh] = text_to_original.emplace(text, original);
        if (!fresh && it->second != original)
            problems.push_back(what + ": rule " + std::to_string(text) + " of the text pairs with rules " +
                               std::to_string(it->second) + " and " + std::to_string(original));
    }
    template <class T>
    void same(const T& a, const T& b, const std::string& what) {
        if (!(a == b)) problems.push_back(what + " differs");
    }
    void scalar(const ast::Scalar& a, const ast::Scalar& b, const std::string& what) {
        if (a.value != b.value) problems.push_back(what + ": \"" + a.value + "\" became \"" + b.value + "\"");
        id(a.rule_id, b.rule_id, what);
    }
    void scalar(const std::optional<ast::Scalar>& a, const std::optional<ast::Scalar>& b, const std::string& what) {
        if (a.has_value() != b.has_value()) return problems.push_back(what + ": present in one tree only");
        if (a) scalar(*a, *b, what);
    }
    template <class T, class F>
    void list(const std::vector<T>& a, const std::vector<T>& b, const std::string& what, F&& each) {
        if (a.size() != b.size())
            return problems.push_back(what + ": " + std::to_string(a.size()) + " entries became " +
                                      std::to_string(b.size()));
        for (size_t i = 0; i < a.size(); ++i) each(a[i], b[i], what + "[" + std::to_string(i) + "]");
    }
    void scalars(const std::vector<ast::Scalar>& a, const std::vector<ast::Scalar>& b, const std::string& what) {
        list(a, b, what, [&](const auto& x, const auto& y, const std::string& w) { scalar(x, y, w); });
    }
    void keyed(const std::vector<std::pair<std::string, ast::Scalar>>& a,
               const std::vector<std::pair<std::string, ast::Scalar>>& b, const std::string& what) {
        list(a, b, what, [&](const auto& x, const auto& y, const std::string& w) {
            same(x.first, y.first, w + " key");
            scalar(x.second, y.second, w + "." + x.first);
        });
    }
    void paths(const std::vector<ast::PathItem>& a, const std::vector<ast::PathItem>& b, const std::string& what) {
        list(a, b, what, [&](const auto& x, const auto& y, const std::string& w) {
            scalar(x.path, y.path, w);
            same(x.rights, y.rights, w + " rights");
            same(x.unenforceable_run, y.unenforceable_run, w + " unenforceable");
            id(x.rule_id, y.rule_id, w);
        });
    }
    void net(const std::vector<ast::NetItem>& a, const std::vector<ast::NetItem>& b, const std::string& what) {
        list(a, b, what, [&](const auto& x, const auto& y, const std::string& w) {
            scalar(x.host, y.host, w + ".host");
            scalar(x.cidr, y.cidr, w + ".cidr");
            scalar(x.proto, y.proto, w + ".proto");
            scalars(x.ports, y.ports, w + ".ports");
            same(x.unenforceable_run, y.unenforceable_run, w + " unenforceable");
            id(x.rule_id, y.rule_id, w);
        });
    }
    void calls(const std::vector<ast::SyscallItem>& a, const std::vector<ast::SyscallItem>& b,
               const std::string& what) {
        list(a, b, what, [&](const auto& x, const auto& y, const std::string& w) {
            scalar(x.name, y.name, w + ".name");
            list(x.args, y.args, w + ".args", [&](const auto& p, const auto& q, const std::string& aw) {
                scalar(p.index, q.index, aw + ".index");
                scalar(p.op, q.op, aw + ".op");
                scalar(p.value, q.value, aw + ".value");
                scalar(p.mask, q.mask, aw + ".mask");
            });
            scalar(x.action, y.action, w + ".action");
            scalar(x.errno_value, y.errno_value, w + ".errno");
            id(x.rule_id, y.rule_id, w);
        });
    }

    void file(const ast::RuleFile& a, const ast::RuleFile& b) {
        scalar(a.tool, b.tool, "tool");
        scalar(a.description, b.description, "description");
        scalar(a.mode, b.mode, "mode");
        scalars(a.extends, b.extends, "extends");
        scalars(a.mandatory, b.mandatory, "mandatory");
        scalar(a.unenforceable, b.unenforceable, "unenforceable");
        list(a.binaries, b.binaries, "binaries", [&](const auto& x, const auto& y, const std::string& w) {
            scalar(x.path, y.path, w + ".path");
            scalar(x.sha256, y.sha256, w + ".sha256");
            scalar(x.libraries, y.libraries, w + ".libraries");
            id(x.rule_id, y.rule_id, w);
        });
        same(a.files.present, b.files.present, "files");
        paths(a.files.read, b.files.read, "files.read");
        paths(a.files.write, b.files.write, "files.write");
        paths(a.files.create, b.files.create, "files.create");
        paths(a.files.remove, b.files.remove, "files.remove");
        paths(a.files.exec, b.files.exec, "files.exec");
        paths(a.files.deny, b.files.deny, "files.deny");
        same(a.exec.present, b.exec.present, "exec");
        paths(a.exec.allow, b.exec.allow, "exec.allow");
        const auto &n = a.network, &m = b.network;
        same(n.present, m.present, "network");
        same(n.mapping, m.mapping, "network mapping");
        scalar(n.mode, m.mode, "network mode");
        id(n.rule_id, m.rule_id, "network");
        scalars(n.families, m.families, "network.families");
        scalars(n.netlink, m.netlink, "network.netlink");
        net(n.connect, m.connect, "network.connect");
        net(n.bind, m.bind, "network.bind");
        net(n.send, m.send, "network.send");
        net(n.deny, m.deny, "network.deny");
        scalars(n.dns, m.dns, "network.dns");
        scalars(n.unix_connect, m.unix_connect, "network.unix.connect");
        scalars(n.unix_send, m.unix_send, "network.unix.send");
        scalars(n.unix_bind, m.unix_bind, "network.unix.bind");
        scalar(n.unix_unenforceable, m.unix_unenforceable, "network.unix.unenforceable");
        const auto &s = a.syscalls, &t = b.syscalls;
        same(s.present, t.present, "syscalls");
        scalar(s.baseline, t.baseline, "syscalls.baseline");
        scalar(s.import, t.import, "syscalls.baseline.import");
        calls(s.allow, t.allow, "syscalls.allow");
        calls(s.deny, t.deny, "syscalls.deny");
        same(s.on_violation.has_value(), t.on_violation.has_value(), "syscalls.on_violation");
        if (s.on_violation && t.on_violation) {
            scalar(s.on_violation->action, t.on_violation->action, "syscalls.on_violation.action");
            scalar(s.on_violation->errno_value, t.on_violation->errno_value, "syscalls.on_violation.errno");
            id(s.on_violation->rule_id, t.on_violation->rule_id, "syscalls.on_violation");
        }
        same(s.has_architectures, t.has_architectures, "syscalls.architectures");
        scalars(s.architectures, t.architectures, "syscalls.architectures");
        keyed(a.limits, b.limits, "limits");
        keyed(a.microvm, b.microvm, "microvm");
        keyed(a.profile, b.profile, "profile");
        const auto &h = a.hardening, &k = b.hardening;
        same(h.present, k.present, "hardening");
        id(h.rule_id, k.rule_id, "hardening");
        scalar(h.mte, k.mte, "hardening.mte");
        scalars(h.require, k.require, "hardening.require");
        scalars(h.warn, k.warn, "hardening.warn");
        scalar(h.store_bypass, k.store_bypass, "hardening.speculation.store_bypass");
        scalar(h.indirect_branch, k.indirect_branch, "hardening.speculation.indirect_branch");
        const auto &e = a.environment, &f = b.environment;
        same(e.present, f.present, "environment");
        scalars(e.pass, f.pass, "environment.pass");
        list(e.set, f.set, "environment.set", [&](const auto& x, const auto& y, const std::string& w) {
            scalar(x.first, y.first, w + " name");
            scalar(x.second, y.second, w + " value");
        });
        scalar(e.clear, f.clear, "environment.clear");
    }
};

// The keys of the bundle JSON that hold rule ids: single ids, and the second
// element of [name, id] pairs.
bool is_rule_id_key(const std::string& k) { return k == "rule_id" || k.ends_with("_rule_id"); }
bool is_rule_pairs_key(const std::string& k) {
    return k == "syscall_rules" || k == "rule_ids" || k == "allow" || k == "deny" || k == "architectures";
}

// Every rule id of the text's bundle JSON renumbered as the original's; an
// id the trees do not pair becomes a string naming it, which no original
// holds.
void renumber_rule_ids(json& j, const std::map<uint32_t, uint32_t>& to_original) {
    auto renumber = [&](json& id) {
        if (!id.is_number_unsigned()) return;
        uint32_t v = id.get<uint32_t>();
        if (v == 0 || v == BW_NO_RULE) return;
        auto it = to_original.find(v);
        id = it == to_original.end() ? json("unpaired rule " + std::to_string(v)) : json(it->second);
    };
    if (j.is_array()) {
        for (auto& e : j) renumber_rule_ids(e, to_original);
        return;
    }
    if (!j.is_object()) return;
    for (auto& [k, v] : j.items()) {
        if (is_rule_id_key(k)) {
            renumber(v);
        } else if (is_rule_pairs_key(k) && v.is_array()) {
            for (auto& pair : v)
                if (pair.is_array() && pair.size() == 2 && pair[0].is_string()) renumber(pair[1]);
        } else {
            renumber_rule_ids(v, to_original);
        }
    }
}

// The bundle JSON without what the text cannot keep (the comment at the
// top). A Landlock gap names a rule by its text and place; each is replaced
// by "rule #<id>", the id renumbered by `to_original` when given.
json comparable_bundle(const Bundle& b, const std::map<uint32_t, uint32_t>* to_original = nullptr) {
    json j = bundle_to_json(b);
    for (auto& gap_json : j["landlock"]["gaps"]) {
        std::string gap = gap_json.get<std::string>();
        for (const auto& r : b.rules) {
            const std::string named = r.text + " (" + r.loc.file + ":" + std::to_string(r.loc.line) + ":" +
                                      std::to_string(r.loc.col) + ")";
            uint32_t id = r.id;
            if (to_original)
                if (auto it = to_original->find(r.id); it != to_original->end()) id = it->second;
            for (size_t at = gap.find(named); at != std::string::npos; at = gap.find(named, at))
                gap.replace(at, named.size(), "rule #" + std::to_string(id));
        }
        gap_json = gap;
    }
    if (to_original) renumber_rule_ids(j, *to_original);
    j.erase("rules");
    j.erase("hash");
    j.erase("extends");
    return j;
}

std::string first_difference(const json& a, const json& b) {
    json patch = json::diff(a, b);
    return patch.empty() ? "" : patch.dump(1).substr(0, 4000);
}

struct RoundTrip {
    std::string text;        // the flattened original, printed
    Bundle original, again;  // compiled from the original file and from the text
};

// Compiles `path` and its printed flat text and requires the two to agree
// (see the top of this file); returns both for further checks.
RoundTrip require_round_trip(const std::string& path, const CompileOptions& opts) {
    auto original = compile_file(path, opts);
    INFO(render_diagnostics(original));
    REQUIRE(original.ok());
    auto flat = flatten_rule_file(path, opts);
    if (!flat) FAIL(render_diagnostics(flat.error(), {}));
    REQUIRE(flat);
    CHECK(flat->ast.extends.empty());
    // the flattened tree's ids are the compile's: the same rule table
    REQUIRE(flat->rules.size() == original.bundle->rules.size());
    for (size_t i = 0; i < flat->rules.size(); ++i) CHECK(flat->rules[i].text == original.bundle->rules[i].text);

    const std::string text = rule_file_text(flat->ast);
    INFO("printed:\n" << text);
    CHECK(text.find("extends") == std::string::npos);
    const std::string name = fs::path(path).stem().string() + ".flat.yaml";
    auto again = compile_string(text, name, opts);
    INFO(render_diagnostics(again));
    REQUIRE(again.ok());
    auto reread = flatten_rule_string(text, name, opts);
    REQUIRE(reread);
    // printing is a fixed point: the text read back prints as itself
    CHECK(rule_file_text(reread->ast) == text);

    TreePairing pairing;
    pairing.file(flat->ast, reread->ast);
    for (const auto& p : pairing.problems) FAIL_CHECK(p);
    REQUIRE(pairing.problems.empty());
    const auto& rules_again = again.bundle->rules;
    const auto& rules_original = original.bundle->rules;
    for (const auto& r : rules_again) {
        if (r.id == 0) continue;
        auto it = pairing.text_to_original.find(r.id);
        INFO("rule " << r.id << " of the text: " << r.text);
        REQUIRE(it != pairing.text_to_original.end());
        REQUIRE(it->second < rules_original.size());
        CHECK(rules_original[it->second].section == r.section);
        CHECK(rules_original[it->second].unenforceable_run == r.unenforceable_run);
    }

    json want = comparable_bundle(*original.bundle);
    json got = comparable_bundle(*again.bundle, &pairing.text_to_original);
    INFO("JSON patch from the original's bundle to the text's:\n" << first_difference(want, got));
    CHECK(want == got);
    return {text, *original.bundle, *again.bundle};
}

CompileOptions shipped_options() {
    CompileOptions o;
    o.rules_dirs = {kShippedRules.string()};
    return o;
}


// Every key of the language (docs/rule-language.md), values a compile on any
// host accepts: no binary is looked at (libraries: none), host names are
// resolved only when a task is made.
constexpr const char* kEveryKey = R"(tool: kitchen-sink
description: "every key of the rule language: a test"
binaries:
  - /usr/bin/curl
  - { path: /usr/bin/curl, sha256: 3b1fd1e2c0a94f5e8c7d6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6e9f }
  - { path: /usr/bin/wget, libraries: none }
mode: audit
mandatory: [seccomp, landlock]
unenforceable: refuse
files:
  read:   [/etc/ssl, /usr/share/ca-certificates, /etc/resolv.conf, "${home}/.config/kitchen"]
  write:  ["${workdir}"]
  create: ["${workdir}", "${tmp}"]
  remove: ["${workdir}"]
  exec:   [/usr/bin/curl, /usr/bin/wget]
  deny:
    - "${home}/.ssh"
    - { path: "${workdir}/.git/hooks", rights: [write, create] }
    - { path: "${workdir}/cache", unenforceable: run }
    - { path: /etc/ssl/private, rights: [read, exec], unenforceable: refuse }
exec:
  allow: [/usr/bin/curl]
network:
  families: [unix, inet, inet6, netlink]
  netlink: [route, audit]
  connect:
    - { host: api.example.com, ports: [443] }
    - { cidr: 10.20.0.0/16, ports: [80, 443], proto: tcp }
    - { cidr: "2001:db8::/32", ports: ["8000-8080"], unenforceable: run }
  bind:    [{ cidr: 127.0.0.1/32, ports: [8080] }]
  send:    [{ cidr: 127.0.0.53/32, ports: [53], proto: udp }]
  deny:    [{ cidr: 169.254.169.254/32 }, { cidr: "fe80::/10", proto: any }]
  dns:     [127.0.0.53, "::1"]
  unix:
    connect: [/run/app.sock, /run/app-workers/, "@app-bus"]
    send:    [/run/app-log.sock]
    bind:    ["${workdir}/sockets/", "@app-worker"]
    unenforceable: run
syscalls:
  baseline: default
  allow:
    - personality
    - { name: socket, args: [{ index: 0, op: eq, value: 2 }] }
    - { name: ioctl, args: [{ index: 1, op: masked_eq, value: 0x5400, mask: 0xff00 }, { index: 0, op: le, value: 2 }] }
  deny:
    - ptrace
    - { name: bpf, action: kill }
    - { name: io_uring_setup, action: errno, errno: ENOSYS }
  on_violation: { action: errno, errno: ENOSYS }
  architectures: [native, i386]
limits:
  memory: 256MiB
  pids: 64
  cpu: 50%
  timeout: 30s
  output: 1MiB
  file_size: 64MiB
  open_files: 256
microvm:
  mode: required
  memory: 512MiB
  vcpus: 2
  confidential: required
profile:
  learn: 50
  task_learn: 10
  respond: stop
hardening:
  mte: sync
  require: [pie, relro, nx]
  warn: [bind-now, cet-ibt]
  speculation: { store_bypass: disable, indirect_branch: disable }
environment:
  pass: [PATH, LANG, TERM]
  set: { HOME: "${workdir}", TMPDIR: "${tmp}", GREETING: "a: b # c" }
  clear: false
)";

}  // namespace

TEST_CASE("every shipped rule file, flattened and printed, compiles to its own bundle", "[rule_file_text]") {
    const CompileOptions opts = shipped_options();
    size_t tools = 0;
    for (const auto& e : fs::recursive_directory_iterator(kShippedRules)) {
        const auto rel = fs::relative(e.path(), kShippedRules).string();
        if (e.path().extension() != ".yaml" || rel.starts_with("base/") || rel.starts_with("tests/")) continue;
        SECTION(rel) {
            auto trip = require_round_trip(e.path().string(), opts);
            CHECK(trip.again.tool == trip.original.tool);
        }
        ++tools;
    }
    CHECK(tools >= 18);
}

TEST_CASE("a file with every key of the language round-trips", "[rule_file_text]") {
    bulwark::test::RulesDir t;
    const std::string path = t.write("kitchen-sink.yaml", kEveryKey);
    CompileOptions opts;
    opts.rules_dirs = {t.path.string()};
    auto trip = require_round_trip(path, opts);
    // spot checks that the keys reached the bundle at all
    CHECK(trip.again.mode == Mode::Audit);
    CHECK(trip.again.microvm.confidential);
    CHECK(trip.again.profile.task_learn_runs == 10u);
    CHECK(trip.again.syscalls.architectures.size() == 2u);
    CHECK(trip.again.network.unix_rules.size() == 6u);
    CHECK_FALSE(trip.again.env.clear_all);
    size_t unenforceable = 0;
    for (const auto& r : trip.again.rules) unenforceable += r.unenforceable_run;
    CHECK(unenforceable >= 2u + 6u);  // two entries, the unix rules
}

TEST_CASE("an extends chain is flattened the way the compiler merges it", "[rule_file_text]") {
    bulwark::test::RulesDir t;
    std::ifstream docker(BULWARK_SOURCE_DIR "/policy-compiler/data/docker-default-seccomp.json");
    std::stringstream profile;
    profile << docker.rdbuf();
    t.write("docker.json", profile.str());
    t.write("base/floor.yaml", R"(tool: floor
description: the floor
mode: audit
files:
  read: [/usr/lib]
  deny: [{ path: /etc/shadow, rights: [read] }]
network: none
syscalls:
  baseline: default
  deny: [ptrace]
  architectures: [native]
limits: { memory: 64MiB, pids: 8 }
microvm: { mode: required, memory: 256MiB }
profile: { learn: 30, respond: stop }
hardening: { mte: async, require: [pie] }
environment: { pass: [PATH], set: { A: "1", B: "2" } }
)");
    t.write("base/net.yaml", R"(tool: net
extends: base/floor
network:
  connect: [{ cidr: 10.0.0.0/8, ports: [443] }]
  unix: { connect: [/run/net.sock] }
)");
    const std::string path = t.write("tool.yaml", R"(tool: tool
extends: [base/net]
unenforceable: run
mode: enforce
files:
  read: ["${workdir}"]
  write: ["${workdir}"]
network:
  dns: [127.0.0.53]
  unix: { unenforceable: run }
syscalls:
  baseline: { import: docker.json }
  architectures: [i386, native]
limits: { memory: 128MiB }
microvm: { mode: preferred, memory: 1GiB }
profile: { learn: 40, respond: record }
hardening: { mte: sync }
environment: { set: { A: "3" }, clear: true }
)");
    CompileOptions opts;
    opts.rules_dirs = {t.path.string()};
    auto trip = require_round_trip(path, opts);
    INFO(trip.text);
    // the merge, as written out: bases first, the tool's scalars last
    auto flat = flatten_rule_file(path, opts);
    REQUIRE(flat);
    const auto& a = flat->ast;
    REQUIRE(a.tool);
    CHECK(a.tool->value == "tool");
    CHECK(a.description->value == "the floor");
    CHECK(a.mode->value == "enforce");
    REQUIRE(a.files.read.size() == 2u);
    CHECK(a.files.read[0].path.value == "/usr/lib");
    CHECK(a.network.mapping);
    CHECK_FALSE(a.network.mode);
    CHECK(a.syscalls.import->value == "docker.json");
    CHECK(a.syscalls.architectures.size() == 3u);  // a union, like every list
    // limits: replaced per key; microvm keeps the stricter mode; profile the stronger response
    CHECK(trip.again.limits.memory_bytes == 128ull << 20);
    CHECK(trip.again.limits.pids == 8u);
    CHECK(trip.again.microvm.mode == MicroVmMode::Required);
    CHECK(trip.again.microvm.memory_bytes == 1ull << 30);
    CHECK(trip.again.profile.respond == ProfileResponse::Stop);
    CHECK(trip.again.profile.learn_runs == 40u);
    CHECK(trip.text.find("unenforceable: run") != std::string::npos);
    for (const auto& r : trip.again.rules) CHECK(r.unenforceable_run == (r.id != 0));
    CHECK(trip.original.extends == std::vector<std::string>{"base/floor", "base/net"});
    CHECK(trip.again.extends.empty());
}

TEST_CASE("flatten_rule_file reports the compiler's errors", "[rule_file_text]") {
    bulwark::test::RulesDir t;
    const std::string path = t.write("tool.yaml", "tool: tool\nextends: base/missing\n");
    CompileOptions opts;
    opts.rules_dirs = {t.path.string()};
    auto flat = flatten_rule_file(path, opts);
    REQUIRE_FALSE(flat);
    auto compiled = compile_file(path, opts);
    REQUIRE(flat.error().size() == compiled.diagnostics.size());
    CHECK(flat.error().front().code == "extends-not-found");
    CHECK(flat.error().front().message == compiled.diagnostics.front().message);

    auto bad = flatten_rule_string("tool: x\nfiles: { reed: [/etc] }\n", "x.yaml", opts);
    REQUIRE_FALSE(bad);
    CHECK(bad.error().front().code == "unknown-key");
    auto missing = flatten_rule_file((t.path / "absent.yaml").string(), opts);
    REQUIRE_FALSE(missing);
    CHECK(missing.error().front().code == "unreadable");
}

TEST_CASE("rule_file_text writes a rule's comment on its entry's line", "[rule_file_text]") {
    auto flat = flatten_rule_string(R"(tool: cat
files:
  read: [/etc/passwd, /usr/share]
  deny: [{ path: /etc/shadow, rights: [read] }]
network: { connect: [{ cidr: 10.0.0.0/8, ports: [443] }] }
syscalls: { allow: [getppid], baseline: default }
limits: { memory: 64MiB }
hardening: { require: [pie] }
environment: { set: { HOME: "${workdir}" } }
)",
                                    "cat.yaml", {});
    REQUIRE(flat);
    const auto& a = flat->ast;
    RuleComments comments;
    auto note = [&](uint32_t id, std::string c) {
        REQUIRE(id != 0);
        comments[id] = std::move(c);
    };
    note(a.tool->rule_id, "the tool");
    note(a.files.read[1].rule_id, "shared data");
    note(a.files.deny[0].rule_id, "deny read");
    note(a.network.connect[0].rule_id, "the API");
    note(a.syscalls.allow[0].rule_id, "ps");
    note(a.syscalls.baseline->rule_id, "docker's");
    note(a.limits[0].second.rule_id, "enough");
    note(a.hardening.rule_id, "the block");
    note(a.hardening.require[0].rule_id, "pie");
    note(a.environment.set[0].second.rule_id, "home");
    const std::string text = rule_file_text(a, comments);
    INFO(text);
    auto has_line = [&](const std::string& line) {
        std::istringstream in(text);
        for (std::string l; std::getline(in, l);)
            if (l == line) return true;
        return false;
    };
    CHECK(has_line("tool: cat  # the tool"));
    CHECK(has_line("    - /etc/passwd"));
    CHECK(has_line("    - /usr/share  # shared data"));
    CHECK(has_line("    - {path: /etc/shadow, rights: [read]}  # deny read"));
    CHECK(has_line("    - {cidr: 10.0.0.0/8, ports: [443]}  # the API"));
    CHECK(has_line("  baseline: default  # docker's"));
    CHECK(has_line("    - getppid  # ps"));
    CHECK(has_line("  memory: 64MiB  # enough"));
    CHECK(has_line("hardening:  # the block"));
    CHECK(has_line("    - pie  # pie"));
    CHECK(has_line("    HOME: \"${workdir}\"  # home"));
    // each comment once; none where no rule asked for one
    size_t hashes = 0;
    for (char c : text) hashes += c == '#';
    CHECK(hashes == comments.size());
    // the comments are YAML's: the text reads back as the same tree
    auto again = flatten_rule_string(text, "cat.yaml", {});
    REQUIRE(again);
    CHECK(rule_file_text(again->ast) == rule_file_text(a));
}

constexpr const char* kOddValues = R"(tool: odd
files:
  read: ["/srv/a: b", "/srv/c #d", "/srv/e#f", "${workdir}", "${home}/x y", "/srv/x, y"]
  deny: [{ path: "${workdir}/h: i", rights: [write] }, { path: "/srv/k, l", rights: [read] }]
environment: { set: { X: "${tmp}/j", Y: "null", Z: "" } }
)";

TEST_CASE("rule_file_text quotes what YAML would read otherwise", "[rule_file_text]") {
    auto flat = flatten_rule_string(kOddValues, "odd.yaml", {});
    REQUIRE(flat);
    const std::string text = rule_file_text(flat->ast);
    INFO(text);
    CHECK(text.find("\"/srv/a: b\"") != std::string::npos);
    CHECK(text.find("\"/srv/c #d\"") != std::string::npos);
    CHECK(text.find("\"${workdir}\"") != std::string::npos);
    CHECK(text.find("{path: \"${workdir}/h: i\", rights: [write]}") != std::string::npos);
    CHECK(text.find("{path: \"/srv/k, l\", rights: [read]}") != std::string::npos);
    auto again = flatten_rule_string(text, "odd.yaml", {});
    REQUIRE(again);
    const auto& read = again->ast.files.read;
    REQUIRE(read.size() == 6u);
    CHECK(read[0].path.value == "/srv/a: b");
    CHECK(read[1].path.value == "/srv/c #d");
    CHECK(read[2].path.value == "/srv/e#f");
    CHECK(read[3].path.value == "${workdir}");
    CHECK(read[4].path.value == "${home}/x y");
    CHECK(read[5].path.value == "/srv/x, y");
    CHECK(again->ast.files.deny.at(0).path.value == "${workdir}/h: i");
    CHECK(again->ast.files.deny.at(1).path.value == "/srv/k, l");
    const auto& set = again->ast.environment.set;
    REQUIRE(set.size() == 3u);
    CHECK(set[0].second.value == "${tmp}/j");
    CHECK(set[1].second.value == "null");
    CHECK(set[2].second.value.empty());
    // and they compile to the same bundle
    auto a = compile_string(text, "odd.yaml", {});
    auto b = compile_string(kOddValues, "odd.yaml", {});
    INFO(render_diagnostics(a));
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK(comparable_bundle(*a.bundle) == comparable_bundle(*b.bundle));
}
