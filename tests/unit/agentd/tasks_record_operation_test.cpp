// agentd/tasks/record_operation.cpp: a decision record turned back into the
// operation it describes, judged again by the reference evaluator, and
// explained (what exec tells an agent about each denial, and what replay and
// proposals re-judge). Records that cannot be judged by path or address have
// no operation, rather than a guessed one.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "bulwark/policy/compiler.h"
#include "tasks/learning.h"
#include "tasks/record_operation.h"

using namespace bulwark;
using nlohmann::json;

namespace {

audit::AuditRecord decision(uint8_t op, std::string object, std::string detail = "") {
    audit::AuditRecord r;
    r.kind = audit::RecordKind::Decision;
    r.op = op;
    r.object = std::move(object);
    r.detail = std::move(detail);
    r.decision = BW_DECISION_DENY;
    return r;
}

policy::Bundle compiled(const std::string& text) {
    policy::CompileOptions opts;
    auto r = policy::compile_string(text, "t.yaml", opts);
    INFO(policy::render_diagnostics(r));
    REQUIRE(r.ok());
    return *r.bundle;
}

}  // namespace

TEST_CASE("file, exec and network records become the operations they describe") {
    auto open_w = operation_of(decision(BW_OP_FILE_OPEN, "/etc/passwd", json{{"rights", BW_FS_WRITE}}.dump()));
    REQUIRE(open_w);
    CHECK(open_w->kind == policy::OpKind::Open);
    CHECK(open_w->access == policy::FileAccess::Write);
    CHECK(open_w->path == "/etc/passwd");
    auto open_r = operation_of(decision(BW_OP_FILE_OPEN, "/etc/passwd"));
    REQUIRE(open_r);
    CHECK(open_r->access == policy::FileAccess::Read);
    CHECK(operation_of(decision(BW_OP_FILE_TRUNCATE, "/srv/a"))->access == policy::FileAccess::Write);
    CHECK(operation_of(decision(BW_OP_MKDIR, "/srv/d"))->kind == policy::OpKind::Create);
    CHECK(operation_of(decision(BW_OP_FILE_UNLINK, "/srv/a"))->kind == policy::OpKind::Remove);
    CHECK(operation_of(decision(BW_OP_MMAP_EXEC, "/usr/lib/x.so"))->kind == policy::OpKind::Exec);

    auto c4 = operation_of(decision(BW_OP_CONNECT, "tcp 10.0.0.1:443"));
    REQUIRE(c4);
    CHECK(c4->kind == policy::OpKind::Connect);
    CHECK(c4->proto == BW_PROTO_TCP);
    CHECK(c4->port == 443);
    CHECK(c4->addr == *policy::parse_ip("10.0.0.1"));
    auto s6 = operation_of(decision(BW_OP_SENDMSG, "udp [2001:db8::1]:53 af 10"));
    REQUIRE(s6);
    CHECK(s6->kind == policy::OpKind::Send);
    CHECK(s6->proto == BW_PROTO_UDP);
    CHECK(s6->port == 53);
    CHECK(s6->addr == *policy::parse_ip("2001:db8::1"));
}

TEST_CASE("a Landlock record of a new entry that names its directory drafts files.create on that directory") {
    char tmpl[] = "/tmp/bulwark-recop-XXXXXX";
    REQUIRE(mkdtemp(tmpl));
    const std::string dir = tmpl;
    auto rec = decision(BW_OP_FILE_CREATE, dir);
    rec.layer = BW_LAYER_LANDLOCK;
    auto op = operation_of(rec);
    REQUIRE(op);
    CHECK(op->path == dir);  // as recorded: explanations and suggested grants name the directory
    auto site = creation_site(rec, *op);
    CHECK(site.path == dir + "/(new entry)");
    using S = policy::DraftSection;
    auto current = compiled("tool: t\ndescription: x\n");
    policy::RuleFileWriter draft("t2", "t", "x");
    draft_rule(draft, site, current, std::nullopt);
    CHECK(draft.has(S::FilesCreate, dir));
    CHECK_FALSE(draft.has(S::FilesCreate, "/tmp"));  // not one level up
    // A BPF LSM record names the new entry itself, as does one that is not a directory: kept.
    auto lsm = rec;
    lsm.layer = BW_LAYER_BPF_LSM;
    CHECK(creation_site(lsm, *op).path == dir);
    auto entry = decision(BW_OP_FILE_CREATE, dir + "/new.txt");
    entry.layer = BW_LAYER_LANDLOCK;
    CHECK(creation_site(entry, *operation_of(entry)).path == dir + "/new.txt");
    ::rmdir(tmpl);
}

TEST_CASE("a seccomp record is judged by name and arch only") {
    auto r = decision(BW_OP_SYSCALL, "ptrace", json{{"arch", 0x40000003u}}.dump());
    r.layer = BW_LAYER_SECCOMP;
    auto op = operation_of(r);
    REQUIRE(op);
    CHECK(op->kind == policy::OpKind::Syscall);
    CHECK(op->syscall == "ptrace");
    CHECK(op->arch == 0x40000003u);
    // Not from seccomp's own log, or only a number: nothing to judge.
    r.layer = BW_LAYER_BPF_LSM;
    CHECK_FALSE(operation_of(r));
    r.layer = BW_LAYER_SECCOMP;
    r.object = "syscall 317";
    CHECK_FALSE(operation_of(r));
}

TEST_CASE("records that cannot be judged by path or address have no operation") {
    CHECK_FALSE(operation_of(decision(BW_OP_FILE_OPEN, "inode 8:3:1234")));  // the path was not readable
    CHECK_FALSE(operation_of(decision(BW_OP_CONNECT, "tcp 10.0.0.1")));      // no port
    CHECK_FALSE(operation_of(decision(BW_OP_CONNECT, "tcp 10.0.0.1:70000")));
    CHECK_FALSE(operation_of(decision(BW_OP_CONNECT, "unix stream")));  // no address
    auto start = decision(BW_OP_EXEC, "/bin/sh");
    start.kind = audit::RecordKind::RunStart;
    CHECK_FALSE(operation_of(start));
}

TEST_CASE("a denial re-judged and explained names the rule, and says when arguments were not recorded") {
    auto b = compiled("tool: t\n"
                      "files:\n"
                      "  read: [\"/srv/data\"]\n"
                      "  deny: [\"/srv/data/secret\"]\n"
                      "syscalls:\n"
                      "  deny:\n"
                      "    - name: ptrace\n");
    auto op = operation_of(decision(BW_OP_FILE_OPEN, "/srv/data/secret/key"));
    REQUIRE(op);
    auto d = policy::evaluate(b, *op);
    CHECK(d.verdict == policy::Verdict::Deny);
    std::string why = explanation_of(*op, d);
    CHECK_THAT(why, Catch::Contains("/srv/data/secret"));
    CHECK_THAT(why, Catch::Contains("t.yaml"));
    CHECK(why.find("judged by name") == std::string::npos);

    auto sc = decision(BW_OP_SYSCALL, "ptrace");
    sc.layer = BW_LAYER_SECCOMP;
    auto sop = operation_of(sc);
    REQUIRE(sop);
    auto sd = policy::evaluate(b, *sop);
    CHECK(sd.verdict == policy::Verdict::Deny);
    CHECK_THAT(explanation_of(*sop, sd),
               Catch::EndsWith("(judged by name: the kernel's record of a seccomp denial carries no arguments)"));
}

TEST_CASE("unix socket records become unix operations, judged and explained as such") {
    auto c = operation_of(decision(BW_OP_CONNECT, "unix stream /run/docker.sock"));
    REQUIRE(c);
    CHECK(c->kind == policy::OpKind::Connect);
    CHECK(c->unix_addr == "/run/docker.sock");
    auto b = operation_of(decision(BW_OP_BIND, "unix stream @name\\x00with\\x5cnul"));
    REQUIRE(b);
    CHECK(b->kind == policy::OpKind::Bind);
    CHECK(b->unix_addr == std::string("@name\0with\\nul", 14));
    auto s = operation_of(decision(BW_OP_SENDMSG, "unix dgram rel.sock"));
    REQUIRE(s);
    CHECK(s->unix_addr == "rel.sock");
    CHECK_FALSE(operation_of(decision(BW_OP_CONNECT, "unix stream (unreadable address)")));
    CHECK(operation_of(decision(BW_OP_BIND, "unix stream /a\\x4"))->unix_addr == "/a\\x4");  // a cut escape stays as written

    auto bundle = compiled("tool: t\nfiles: { read: [/etc], create: [/srv] }\n"
                           "network: { unix: { bind: [/srv/s/] } }\n");
    auto d = policy::evaluate(bundle, *operation_of(decision(BW_OP_BIND, "unix stream /srv/x.sock")));
    CHECK(d.verdict == policy::Verdict::Deny);
    CHECK_THAT(d.explanation, Catch::Contains("network.unix.bind: [/srv/x.sock]"));
    CHECK(policy::evaluate(bundle, *operation_of(decision(BW_OP_BIND, "unix stream /srv/s/a.sock"))).verdict ==
          policy::Verdict::Allow);

    auto j = operation_from_json(json{{"op", "bind"}, {"unix", "@x"}});
    REQUIRE(j);
    CHECK(j->unix_addr == "@x");
    CHECK_FALSE(operation_from_json(json{{"op", "connect"}, {"unix", ""}}));
}
