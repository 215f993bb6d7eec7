// policy/rule_writer: the rule file agentd proposes, written from its parts.
// The text is pinned (clients show it to people, who edit and commit it):
// rule_file_text's, as for every rule file agentd writes; and what it writes
// compiles to the rules it names.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "bulwark/policy/compiler.h"
#include "bulwark/policy/evaluator.h"
#include "bulwark/policy/rule_writer.h"

using namespace bulwark::policy;

TEST_CASE("a draft is written block by block, entries in first-seen order, without repeats", "[rule_writer]") {
    RuleFileWriter w("cat", "cat", "Proposed by agentd: rules for 4 recorded operation(s) of cat.");
    CHECK(w.empty());
    w.add_path(DraftSection::FilesRead, "/etc/passwd");
    w.add_net(DraftSection::NetworkConnect, {"10.1.2.3/32", 443, "tcp"});
    w.add_path(DraftSection::FilesWrite, "${workdir}/out.txt");
    w.add_path(DraftSection::FilesRead, "/etc/passwd");
    w.add_name(DraftSection::SyscallsAllow, "getppid");
    w.add_path(DraftSection::FilesRead, "/etc/group");
    w.add_net(DraftSection::NetworkConnect, {"10.1.2.3/32", 443, "tcp"});
    CHECK_FALSE(w.empty());
    // files.write comes after network in the calls, but with its block; a
    // task variable is quoted, a plain path is not.
    CHECK(w.text() ==
          "# Proposed by agentd: rules for 4 recorded operation(s) of cat.\n"
          "tool: cat\n"
          "extends: cat\n"
          "files:\n"
          "  read:\n"
          "    - /etc/passwd\n"
          "    - /etc/group\n"
          "  write:\n"
          "    - \"${workdir}/out.txt\"\n"
          "network:\n"
          "  connect:\n"
          "    - {cidr: 10.1.2.3/32, ports: [443], proto: tcp}\n"
          "syscalls:\n"
          "  allow:\n"
          "    - getppid\n");
}

TEST_CASE("a path YAML would misread is quoted and escaped", "[rule_writer]") {
    RuleFileWriter w("t", "", "");
    w.add_path(DraftSection::FilesRead, "/tmp/a \"b\": #c");
    CHECK(w.text() == "tool: t\nfiles:\n  read:\n    - \"/tmp/a \\\"b\\\": #c\"\n");
}

TEST_CASE("what the writer writes compiles to the rules it names", "[rule_writer]") {
    RuleFileWriter w("probe", "", "a draft");
    w.add_path(DraftSection::ExecAllow, "/usr/bin/cat");
    w.add_path(DraftSection::FilesRead, "/etc/hostname");
    w.add_name(DraftSection::SyscallsAllow, "getppid");
    CompileOptions opts;
    auto r = compile_string(w.text(), "draft.yaml", opts);
    INFO(w.text());
    INFO(render_diagnostics(r));
    REQUIRE(r.ok());
    CHECK(r.bundle->tool == "probe");
    Operation open{};
    open.kind = OpKind::Open;
    open.path = "/etc/hostname";
    open.access = FileAccess::Read;
    CHECK(evaluate(*r.bundle, open).verdict == Verdict::Allow);
    open.path = "/etc/shadow";
    CHECK(evaluate(*r.bundle, open).verdict != Verdict::Allow);
}

TEST_CASE("unix sockets are written under network.unix, after the IP rules, and compile", "[rule_writer]") {
    RuleFileWriter w("srv", "", "");
    w.add_path(DraftSection::FilesCreate, "/srv/own");
    w.add_path(DraftSection::NetworkUnixBind, "/srv/own/ctl.sock");
    w.add_net(DraftSection::NetworkConnect, {"10.0.0.1/32", 443, "tcp"});
    w.add_path(DraftSection::NetworkUnixConnect, "@bus");
    w.add_path(DraftSection::NetworkUnixBind, "/srv/own/ctl.sock");  // no repeat
    CHECK(w.text() == "tool: srv\nfiles:\n  create:\n    - /srv/own\nnetwork:\n"
                      "  connect:\n    - {cidr: 10.0.0.1/32, ports: [443], proto: tcp}\n"
                      "  unix:\n    connect:\n      - \"@bus\"\n    bind:\n      - /srv/own/ctl.sock\n");
    auto r = compile_string(w.text(), "draft.yaml", CompileOptions{});
    INFO(w.text());
    INFO(render_diagnostics(r));
    REQUIRE(r.ok());
    Operation bind{};
    bind.kind = OpKind::Bind;
    bind.unix_addr = "/srv/own/ctl.sock";
    CHECK(evaluate(*r.bundle, bind).verdict == Verdict::Allow);
    bind.unix_addr = "/srv/own/other.sock";
    CHECK(evaluate(*r.bundle, bind).verdict == Verdict::Deny);
}

TEST_CASE("each entry may carry the refusal it comes from as a comment; a repeat keeps the first", "[rule_writer]") {
    RuleFileWriter w("cat.learned", "cat", "Learned.");
    w.add_path(DraftSection::FilesRead, "/etc/passwd", "deny landlock file_open /etc/passwd");
    w.add_path(DraftSection::FilesRead, "/etc/passwd", "a second refusal of it");
    w.add_name(DraftSection::SyscallsAllow, "getppid", "deny seccomp syscall getppid");
    w.add_net(DraftSection::NetworkConnect, {"10.1.2.3/32", 443, "tcp"}, "deny sock_addr connect 10.1.2.3:443");
    w.add_path(DraftSection::FilesCreate, "${workdir}");
    CHECK(w.size() == 4u);
    CHECK(w.has(DraftSection::FilesRead, "/etc/passwd"));
    CHECK_FALSE(w.has(DraftSection::FilesWrite, "/etc/passwd"));
    CHECK(w.has(DraftSection::FilesCreate, "${workdir}"));
    const std::string text = w.text();
    CHECK(text ==
          "# Learned.\n"
          "tool: cat.learned\n"
          "extends: cat\n"
          "files:\n"
          "  read:\n"
          "    - /etc/passwd  # deny landlock file_open /etc/passwd\n"
          "  create:\n"
          "    - \"${workdir}\"\n"
          "network:\n"
          "  connect:\n"
          "    - {cidr: 10.1.2.3/32, ports: [443], proto: tcp}  # deny sock_addr connect 10.1.2.3:443\n"
          "syscalls:\n"
          "  allow:\n"
          "    - getppid  # deny seccomp syscall getppid\n");
    // the comments are YAML's: the file compiles, each entry a rule
    char dir[] = "/tmp/bulwark-writer-XXXXXX";
    REQUIRE(::mkdtemp(dir));
    { std::ofstream(std::string(dir) + "/cat.yaml") << "tool: cat\n"; }
    CompileOptions opts;
    opts.rules_dirs = {dir};
    auto r = compile_string(text, "cat.learned.yaml", opts);
    std::filesystem::remove_all(dir);
    INFO(render_diagnostics(r));
    REQUIRE(r.ok());
    CHECK(r.bundle->tool == "cat.learned");
    CHECK(r.bundle->syscalls.allow.size() == 1u);
}
