// Each pass: what a section compiles to.
#include "compiler_support.h"

#include <sys/socket.h>

#include <filesystem>
#include <fstream>

#include "bulwark/policy/values.h"

using namespace bulwark::test;

TEST_CASE("metadata: tool, mode, mandatory layers, binaries", "[compiler][passes]") {
    auto b = require_ok(
        "tool: curl\ndescription: fetch\nmode: audit\nmandatory: [seccomp, landlock, seccomp]\n"
        "binaries:\n  - /usr/bin//curl\n  - { path: /usr/bin/curl, sha256: "
        "3B1FD1E2C0A94F5E8C7D6B5A4F3E2D1C0B9A8F7E6D5C4B3A2F1E0D9C8B7A6E9F }\n");
    CHECK(b.tool == "curl");
    CHECK(b.description == "fetch");
    CHECK(b.mode == Mode::Audit);
    CHECK(b.bpf.header.mode == BW_MODE_AUDIT);
    CHECK(b.mandatory_layers == std::vector<std::string>{"landlock", "seccomp"});
    REQUIRE(b.binaries.size() == 2);
    CHECK(b.binaries[0].path == "/usr/bin/curl");
    CHECK(b.binaries[1].sha256.value() == "3b1fd1e2c0a94f5e8c7d6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6e9f");
    require_error("tool: Curl\n", "bad-tool");
    require_error("tool: curl\nmandatory: [seccmp]\n", "unknown-layer");
    require_error("tool: curl\nbinaries: [{ path: /bin/x, sha256: abc }]\n", "bad-sha256");
}

TEST_CASE("files: rights bitmasks per rule; deny rights", "[compiler][passes]") {
    auto b = require_ok(
        "tool: t\nfiles:\n  read: [/etc/ssl]\n  write: [\"${workdir}\"]\n  create: [\"${workdir}\"]\n"
        "  remove: [\"${workdir}\"]\n  exec: [/usr/bin/curl]\n"
        "  deny:\n    - \"${home}/.ssh\"\n    - { path: \"${workdir}/.git/hooks\", rights: [write, create] }\n");
    REQUIRE(b.files.size() == 7);
    CHECK(b.files[0].allow == BW_FS_READ);
    CHECK(b.files[1].allow == BW_FS_WRITE);
    CHECK(b.files[2].allow == BW_FS_CREATE);
    CHECK(b.files[3].allow == BW_FS_REMOVE);
    CHECK(b.files[4].allow == BW_FS_EXEC);
    CHECK(b.files[5].deny == BW_FS_ALL);
    CHECK(b.files[6].deny == (BW_FS_WRITE | BW_FS_CREATE));
    CHECK(b.files[6].path == "${workdir}/.git/hooks");
    CHECK((b.bpf.header.flags & BW_POL_FILES_ENFORCED));
    CHECK_FALSE((b.bpf.header.flags & BW_POL_EXEC_ENFORCED));
    // Each rule id points back at its source line.
    const RuleRef* r = b.rule(b.files[6].rule_id);
    REQUIRE(r != nullptr);
    CHECK(r->loc.line == 10);
    CHECK(r->section == "files");
    CHECK(r->text == "files.deny: {path: ${workdir}/.git/hooks, rights: [write, create]}");
    require_error("tool: t\nfiles: { deny: [{ path: /x, rights: [wirte] }] }\n", "unknown-right");
}

TEST_CASE("exec allow-list adds exec rights and enforces exec", "[compiler][passes]") {
    auto b = require_ok("tool: t\nbinaries: [/usr/bin/curl]\nexec: { allow: [/usr/bin/curl, /bin/sh] }\n");
    REQUIRE(b.files.size() == 2);
    CHECK(b.files[0].allow == BW_FS_EXEC);
    CHECK((b.bpf.header.flags & BW_POL_EXEC_ENFORCED));
    CHECK_FALSE((b.bpf.header.flags & BW_POL_FILES_ENFORCED));
    auto r = compile("tool: t\nbinaries: [/usr/bin/wget]\nexec: { allow: [/usr/bin/curl] }\n");
    CHECK(r.ok());
    CHECK(has_code(r, "binary-not-executable"));
}

TEST_CASE("network: modes, families, CIDRs in v6 space, ports, protos, ops", "[compiler][passes]") {
    auto none = require_ok("tool: t\n");
    CHECK(none.network.mode == NetMode::None);
    CHECK(none.network.af_allow == (1ull << AF_UNIX));
    CHECK((none.bpf.header.flags & BW_POL_NET_NONE));
    auto lo = require_ok("tool: t\nnetwork: loopback\n");
    CHECK(lo.network.mode == NetMode::Loopback);
    CHECK((lo.bpf.header.flags & BW_POL_NET_LOOPBACK));
    require_error("tool: t\nnetwork: loopbak\n", "bad-network");

    auto b = require_ok(
        "tool: t\nnetwork:\n  families: [inet, inet6]\n  connect:\n"
        "    - { host: API.github.com, ports: [443] }\n"
        "    - { cidr: 10.20.0.0/16, ports: [80, 443], proto: tcp }\n"
        "    - { cidr: \"2001:db8::/32\", ports: [\"8000-8080\"] }\n"
        "  bind: [{ cidr: 127.0.0.1/32, ports: [8080] }]\n"
        "  send: [{ cidr: 127.0.0.53/32, ports: [53], proto: udp }]\n"
        "  deny: [{ cidr: 169.254.169.254/32 }]\n"
        "  dns: [127.0.0.53]\n");
    const auto& n = b.network;
    CHECK(n.mode == NetMode::Rules);
    CHECK(n.af_allow == ((1ull << AF_INET) | (1ull << AF_INET6)));
    CHECK((n.sock_type_allow & (1u << SOCK_STREAM)));
    CHECK((n.sock_type_allow & (1u << SOCK_DGRAM)));
    CHECK_FALSE((n.sock_type_allow & (1u << SOCK_RAW)));
    REQUIRE(n.rules.size() == 8);
    CHECK(n.rules[0].host.value() == "api.github.com");
    CHECK(n.rules[0].port_lo == 443);
    CHECK(n.rules[1].prefix == 112);
    CHECK(n.rules[1].proto_mask == BW_PROTO_TCP);
    CHECK(n.rules[1].port_lo == 80);
    CHECK(n.rules[2].port_lo == 443);
    CHECK(n.rules[3].prefix == 32);
    CHECK((n.rules[3].port_lo == 8000 && n.rules[3].port_hi == 8080));
    CHECK(n.rules[3].proto_mask == (BW_PROTO_TCP | BW_PROTO_UDP));
    CHECK(n.rules[4].op_mask == BW_NET_BIND);
    CHECK(n.rules[5].op_mask == BW_NET_SEND);
    CHECK(n.rules[6].action == BW_NET_ACTION_DENY);
    CHECK(n.rules[6].op_mask == (BW_NET_CONNECT | BW_NET_BIND | BW_NET_SEND));
    CHECK((n.rules[6].port_lo == 0 && n.rules[6].port_hi == 65535));
    CHECK(n.rules[7].port_lo == 53);
    CHECK(n.dns == std::vector<std::string>{"127.0.0.53"});
    require_error("tool: t\nnetwork: { families: [inet7] }\n", "unknown-family");
    require_error("tool: t\nnetwork: { connect: [{ cidr: 10.0.0.0/8, proto: tcpp }] }\n", "bad-proto");
    auto raw = require_ok("tool: t\nnetwork: { families: [netlink] }\n");
    CHECK((raw.network.sock_type_allow & (1u << SOCK_RAW)));
}

TEST_CASE("limits", "[compiler][passes]") {
    auto b = require_ok(
        "tool: t\nlimits: { memory: 256MiB, pids: 64, cpu: 50%, timeout: 30s, output: 1MiB, file_size: 64MB, "
        "open_files: 256 }\n");
    CHECK(b.limits.memory_bytes == 256ull << 20);
    CHECK(b.limits.pids == 64u);
    CHECK(b.limits.cpu_percent == 50u);
    CHECK(b.limits.timeout_ms == 30000u);
    CHECK(b.limits.output_bytes == 1ull << 20);
    CHECK(b.limits.file_size_bytes == 64000000u);
    CHECK(b.limits.open_files == 256u);
    CHECK(b.limits.rule_ids.size() == 7);
}

TEST_CASE("hardening", "[compiler][passes]") {
    auto b = require_ok(
        "tool: t\nhardening:\n  mte: sync\n  require: [pie, relro, nx]\n  warn: [bind-now, cet-ibt]\n"
        "  speculation: { store_bypass: disable, indirect_branch: disable }\n");
    CHECK(b.hardening.mte == MteMode::Sync);
    CHECK(b.hardening.properties.size() == 5);
    CHECK(b.hardening.disable_store_bypass);
    CHECK(b.hardening.disable_indirect_branch);
    require_error("tool: t\nhardening: { require: [pei] }\n", "bad-value");
    auto r = compile("tool: t\nhardening: { require: [pie], warn: [pie] }\n");
    CHECK(r.ok());
    CHECK(has_code(r, "require-and-warn"));
}

TEST_CASE("environment", "[compiler][passes]") {
    auto b = require_ok(
        "tool: t\nenvironment:\n  pass: [PATH, LANG]\n  set: { HOME: \"${workdir}\", TMPDIR: \"${tmp}\" }\n"
        "  clear: false\n");
    CHECK(b.env.pass == std::vector<std::string>{"PATH", "LANG"});
    REQUIRE(b.env.set.size() == 2);
    CHECK(b.env.set[0] == std::pair<std::string, std::string>{"HOME", "${workdir}"});
    CHECK_FALSE(b.env.clear_all);
    CHECK(require_ok("tool: t\n").env.clear_all);
    require_error("tool: t\nenvironment: { pass: [\"1BAD\"] }\n", "bad-env-name");
    require_error("tool: t\nenvironment: { set: { HOME: \"${hom}\" } }\n", "unknown-variable");
    auto r = compile("tool: t\nenvironment: { pass: [LD_PRELOAD] }\n");
    CHECK(has_code(r, "risky-env"));
}

TEST_CASE("syscalls -> SeccompSpec", "[compiler][passes]") {
    auto r = compile(
        "tool: t\nsyscalls:\n  baseline: none\n  allow:\n    - personality\n"
        "    - { name: socket, args: [{ index: 0, op: eq, value: 2 }, { index: 1, op: masked_eq, value: 0x1, mask: 0xf }] }\n"
        "  deny:\n    - ptrace\n    - { name: bpf, action: kill }\n"
        "    - { name: io_uring_setup, action: errno, errno: ENOSYS }\n"
        "  on_violation: { action: errno, errno: EPERM }\n");
    INFO(render_diagnostics(r));
    REQUIRE(r.ok());
    const auto& s = r.seccomp.value();
    CHECK(s.baseline == SeccompSpec::Baseline::None);
    REQUIRE(s.allow.size() == 2);
    CHECK(s.allow[1].args.size() == 2);
    CHECK(s.allow[1].args[1].op == SyscallArgCond::Op::MaskedEq);
    CHECK(s.allow[1].args[1].mask == 0xf);
    REQUIRE(s.deny.size() == 3);
    CHECK(s.deny[0].action == SeccompAction::Errno);
    CHECK(s.deny[0].errno_value == EPERM);  // defaults to on_violation
    CHECK(s.deny[1].action == SeccompAction::Kill);
    CHECK(s.deny[2].errno_value == ENOSYS);
    CHECK(s.violation_errno == EPERM);
    CHECK(r.bundle->syscalls.deny.size() == 3);
    CHECK(r.bundle->syscalls.baseline == "none");
    CHECK((r.bundle->bpf.header.flags & BW_POL_DENY_PTRACE));
    require_error("tool: t\nsyscalls: { allow: [{ name: socket, args: [{ index: 6, op: eq, value: 1 }] }] }\n",
                  "bad-arg-index");
    require_error("tool: t\nsyscalls: { allow: [{ name: socket, args: [{ index: 0, op: masked_eq, value: 1 }] }] }\n",
                  "missing-key");
    require_error("tool: t\nsyscalls: { deny: [{ name: bpf, action: kill, errno: EPERM }] }\n",
                  "errno-without-errno-action");
    require_error("tool: t\nsyscalls: { deny: [{ name: bpf, action: allow }] }\n", "bad-action");
    require_error("tool: t\nsyscalls: { baseline: defualt }\n", "bad-baseline");
    require_error("tool: t\nsyscalls: { on_violation: { action: errno, errno: EWHAT } }\n", "bad-errno");
    require_error("tool: t\nsyscalls: { allow: [{ name: socket, args: [{ index: 0, op: eq, value: -1 }] }] }\n",
                  "bad-arg-value");
}

TEST_CASE("seccomp emitter errors become diagnostics at the rule", "[compiler][passes]") {
    CompileOptions o = options();
    o.seccomp_compiler = [](const SeccompSpec& spec) -> std::expected<SeccompPlan, SeccompError> {
        return std::unexpected(SeccompError{spec.deny.at(0).rule_id, "too many rules"});
    };
    auto r = compile_string("tool: t\nsyscalls:\n  deny: [ptrace]\n", "t.yaml", o);
    CHECK_FALSE(r.ok());
    const auto* d = find_diag(r, "seccomp");
    REQUIRE(d != nullptr);
    CHECK(d->loc.line == 3);
    CHECK(d->message == "seccomp: too many rules");
}

TEST_CASE("the library's own seccomp path fails closed until the emitter is linked", "[compiler][passes]") {
    CompileOptions o;
    auto r = compile_string("tool: t\n", "t.yaml", o);
    auto plan = compile_seccomp(SeccompSpec{});
    if (!plan) {
        CHECK_FALSE(r.ok());
        CHECK(has_code(r, "seccomp"));
    } else {
        CHECK(r.ok());
    }
    CHECK(is_known_syscall("ptrace"));
    CHECK_FALSE(is_known_syscall("ptrce"));
}

TEST_CASE("extends: bases first, lists append, scalars override, denies stay", "[compiler][passes]") {
    RulesDir d;
    d.write("base/net.yaml",
            "mode: audit\nfiles:\n  read: [/etc/ssl]\n  deny: [\"${home}/.ssh\"]\nlimits: { pids: 10, memory: 1MiB }\n"
            "network: { connect: [{ cidr: 10.0.0.0/8 }] }\n");
    d.write("base/more.yaml", "extends: base/net\nfiles: { read: [/usr/share] }\nenvironment: { set: { A: base } }\n");
    auto r = compile_string(
        "tool: t\nextends: [base/more, base/net]\nmode: enforce\nfiles: { write: [\"${workdir}\"] }\n"
        "limits: { pids: 20 }\nenvironment: { set: { A: child } }\n",
        "t.yaml", options({d.path.string()}));
    INFO(render_diagnostics(r));
    REQUIRE(r.ok());
    const auto& b = *r.bundle;
    CHECK(b.extends == std::vector<std::string>{"base/net", "base/more"});
    CHECK(b.mode == Mode::Enforce);
    REQUIRE(b.files.size() == 4);
    CHECK(b.files[0].path == "/etc/ssl");
    CHECK(b.files[1].path == "/usr/share");
    CHECK(b.files[2].path == "${workdir}");
    CHECK(b.files[3].deny == BW_FS_ALL);
    CHECK(b.rule(b.files[3].rule_id)->loc.file.ends_with("base/net.yaml"));
    CHECK(b.limits.pids == 20u);
    CHECK(b.limits.memory_bytes == 1u << 20);
    CHECK(b.network.mode == NetMode::Rules);
    REQUIRE(b.env.set.size() == 1);
    CHECK(b.env.set[0].second == "child");
}

TEST_CASE("duplicates: told to the file that repeats, not to a tool extending two bases that both need it",
          "[compiler][passes]") {
    RulesDir d;
    d.write("base/net.yaml", "files: { read: [/etc/hosts] }\nsyscalls: { allow: [ptrace] }\n");
    d.write("base/tls.yaml", "files: { read: [/etc/hosts] }\nsyscalls: { allow: [ptrace] }\n");
    d.write("base/self.yaml", "tool: base-self\nextends: base/net\nfiles: { read: [/etc/hosts] }\n");
    auto o = options({d.path.string()});
    // Two sibling bases: neither repeats itself, and the tool adds nothing twice.
    auto siblings = compile_string("tool: t\nextends: [base/net, base/tls]\n", "t.yaml", o);
    INFO(render_diagnostics(siblings));
    CHECK(count_code(siblings, "duplicate-rule") == 0);
    // The tool repeating a base's entry is told.
    auto child = compile_string("tool: t\nextends: [base/net]\nfiles: { read: [/etc/hosts] }\n", "t.yaml", o);
    CHECK(count_code(child, "duplicate-rule") == 1);
    // A base repeating its own base is told when it is checked itself ...
    auto self = compile_file((d.path / "base/self.yaml").string(), o);
    INFO(render_diagnostics(self));
    CHECK(count_code(self, "duplicate-rule") == 1);
    // ... not in every tool that extends it.
    auto via = compile_string("tool: t\nextends: [base/self]\n", "t.yaml", o);
    CHECK(count_code(via, "duplicate-rule") == 0);
}

TEST_CASE("extends: cycles, depth, missing and malformed names", "[compiler][passes]") {
    RulesDir d;
    d.write("a.yaml", "extends: b\n");
    d.write("b.yaml", "extends: a\n");
    auto r = compile_string("tool: t\nextends: a\n", "t.yaml", options({d.path.string()}));
    REQUIRE(has_code(r, "extends-cycle"));
    CHECK(find_diag(r, "extends-cycle")->message.find("a -> b -> a") != std::string::npos);
    for (int i = 0; i < 12; ++i) d.write("c" + std::to_string(i) + ".yaml", "extends: c" + std::to_string(i + 1) + "\n");
    d.write("c12.yaml", "files: { read: [/x] }\n");
    CHECK(has_code(compile_string("tool: t\nextends: c0\n", "t.yaml", options({d.path.string()})), "extends-too-deep"));
    CHECK(has_code(compile_string("tool: t\nextends: nope\n", "t.yaml", options({d.path.string()})), "extends-not-found"));
    CHECK(has_code(compile_string("tool: t\nextends: ../etc/passwd\n", "t.yaml", options({d.path.string()})),
                   "bad-extends"));
    d.write("bad.yaml", "files: { raed: [/x] }\n");
    auto bad = compile_string("tool: t\nextends: bad\n", "t.yaml", options({d.path.string()}));
    REQUIRE(has_code(bad, "unknown-key"));
    CHECK(find_diag(bad, "unknown-key")->loc.file.ends_with("bad.yaml"));
    // The base's source is available for rendering.
    CHECK(render_diagnostics(bad).find(" 1 | files: { raed: [/x] }") != std::string::npos);
}
