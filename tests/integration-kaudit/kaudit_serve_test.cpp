// The kernel audit source in `agentd serve`: an exec whose tool Landlock
// denies has that denial among the response's decisions and in /v1/audit,
// committed before the response; an allowed exec has none; health reports
// the source. A seccomp denial is explained with the rule and errno the run's filter
// gives for it.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cerrno>
#include <fstream>

#include <nlohmann/json.hpp>

#include "daemon.h"

using namespace bulwark::test;
using nlohmann::json;

TEST_CASE("agentd serve: exec decisions include the run's Landlock denial", "[kaudit][serve]") {
    Daemon d;
    auto health = d.call("GET", "/v1/health");
    REQUIRE(health.status == 200);
    INFO(health.raw);
    CHECK(health.body["host"]["kernel_audit"]["audit"].get<std::string>().starts_with("on"));

    uint64_t id = create_task(d, {{"tools", {"cat"}}});
    std::string workdir = d.call("GET", "/v1/tasks/" + std::to_string(id)).body["workdir"];
    write_file(workdir + "/notes.txt", "notes\n");

    // A live stream of Landlock decisions, subscribed before the exec.
    int sse = connect_unix(d.sock);
    REQUIRE(sse >= 0);
    REQUIRE(send_all(sse, "GET /v1/events?layer=landlock&tool=cat HTTP/1.1\r\nHost: agentd\r\n\r\n"));
    std::string stream;
    read_until(sse, ": subscribed", std::chrono::milliseconds(5000), &stream);
    REQUIRE(stream.find(": subscribed") != std::string::npos);

    // Control: unconfined the file is readable.
    REQUIRE(::access("/etc/passwd", R_OK) == 0);
    auto denied = d.exec(id, {{"tool", "cat"}, {"argv", {"cat", "/etc/passwd"}}});
    INFO(denied.raw);
    REQUIRE(denied.status == 200);
    CHECK(denied.body["exit_status"] == 1);
    uint64_t run = denied.body["run_id"];
    int landlock = 0;
    for (auto& r : denied.body["decisions"])
        if (r["layer"] == "landlock") {
            ++landlock;
            CHECK(r["decision"] == "deny");
            CHECK(r["op"] == "file_open");
            CHECK(r["object"] == "/etc/passwd");
            CHECK(r["run_id"] == run);
            CHECK(r["task_id"] == id);
            CHECK(r["tool"] == "cat");
            CHECK(r["detail"]["source"] == "kernel_audit");
        }
    CHECK(landlock == 1);
    bool explained = false;
    for (auto& e : denied.body["denials"])
        if (e["layer"] == "landlock" && e["object"] == "/etc/passwd") explained = true;
    CHECK(explained);

    // ... on the event stream ...
    read_until(sse, "/etc/passwd", std::chrono::milliseconds(5000), &stream);
    ::close(sse);
    auto at = stream.find("event: record\ndata: ");
    REQUIRE(at != std::string::npos);
    auto ev = json::parse(stream.substr(at + 20, stream.find('\n', at + 20) - at - 20));
    CHECK(ev["layer"] == "landlock");
    CHECK(ev["object"] == "/etc/passwd");
    CHECK(ev["run_id"] == run);

    // ... and through the audit query API.
    auto rows = d.call("GET", "/v1/audit?run=" + std::to_string(run) + "&layer=landlock");
    REQUIRE(rows.status == 200);
    REQUIRE(rows.body["rows"].size() == 1);
    CHECK(rows.body["rows"][0]["object"] == "/etc/passwd");

    // Allowed by the rules: no kernel decision.
    auto ok = d.exec(id, {{"tool", "cat"}, {"argv", {"cat", "notes.txt"}}});
    REQUIRE(ok.status == 200);
    CHECK(ok.body["stdout"] == "notes\n");
    for (auto& r : ok.body["decisions"]) CHECK(r["layer"] != "landlock");
    for (auto& r : ok.body["decisions"]) CHECK(r["layer"] != "seccomp");
}

namespace {

// A rules directory (the shipped bases) with probe tools: each reads only
// `read` (its work directory unless told) and runs kaudit_probe; `syscalls`
// ends its syscalls section.
struct ProbeRules {
    TempDir dir;
    ProbeRules() {
        REQUIRE(::symlink((std::string(BULWARK_RULES_DIR) + "/base").c_str(), (dir.path / "base").c_str()) == 0);
    }
    void tool(const std::string& name, const std::string& syscalls, const std::string& read = "${workdir}") const {
        std::ofstream(dir.path / (name + ".yaml"))
            << "tool: " << name << "\ndescription: kernel audit probe\nextends: base/minimal\n"
            << "binaries: [" << KAUDIT_PROBE << "]\nfiles:\n  read: [\"" << read << "\"]\n"
            << "exec:\n  allow: [" << KAUDIT_PROBE << "]\nsyscalls:\n  baseline: default\n" << syscalls;
    }
};

}  // namespace

TEST_CASE("agentd serve: a seccomp denial is explained with its rule and errno; the same run unfiltered has none",
          "[kaudit][serve]") {
    ProbeRules rules;
    rules.tool("denies", "  deny:\n    - name: getppid\n      errno: EACCES\n");
    rules.tool("allows", "");
    Daemon d({}, rules.dir.path.string());
    uint64_t id = create_task(d, {{"tools", {"denies", "allows"}}});

    auto denied = d.exec(id, {{"tool", "denies"}, {"argv", {KAUDIT_PROBE, "getppid", "2"}}});
    INFO(denied.raw);
    REQUIRE(denied.status == 200);
    CHECK(denied.body["stdout"] == "failed 2\n");
    int explained = 0;
    for (auto& e : denied.body["denials"])
        if (e["layer"] == "seccomp") {
            ++explained;
            CHECK(e["object"] == "getppid");
            CHECK(e["errno"] == EACCES);  // the filter's answer: the kernel's record masks it
            CHECK(e["rule"].get<std::string>().find("/denies.yaml:12 syscalls.deny: {name: getppid") != std::string::npos);
            std::string why = e["explanation"];
            CHECK(why.find("getppid is denied by") != std::string::npos);
            CHECK(why.find("judged by name") != std::string::npos);
            CHECK(e["grant_would_allow"].is_null());
        }
    CHECK(explained == 2);

    // Control: the same calls where no rule denies them.
    auto allowed = d.exec(id, {{"tool", "allows"}, {"argv", {KAUDIT_PROBE, "getppid", "2"}}});
    INFO(allowed.raw);
    REQUIRE(allowed.status == 200);
    CHECK(allowed.body["stdout"] == "failed 0\n");
    for (auto& r : allowed.body["decisions"]) CHECK(r["layer"] != "seccomp");
}

TEST_CASE("agentd serve: a proposal adds the narrowest rules for what runs were refused, checked under them",
          "[kaudit][serve][propose]") {
    ProbeRules rules;
    rules.tool("prober", "  deny:\n    - name: getppid\n      errno: EACCES\n");
    Daemon d({}, rules.dir.path.string());
    uint64_t id = create_task(d, {{"tools", {"prober"}}});

    // Control: nothing refused yet, nothing proposed.
    auto none = d.call("POST", "/v1/propose", json{{"tool", "prober"}, {"task", id}});
    INFO(none.raw);
    REQUIRE(none.status == 200);
    CHECK(none.body["operations"] == 0);
    CHECK(none.body["rules"].get<std::string>().find("files:") == std::string::npos);

    // Unconfined the file is readable; the tool's rules refuse it (Landlock)
    // and deny getppid by an explicit rule (seccomp).
    REQUIRE(::access("/etc/passwd", R_OK) == 0);
    auto read = d.exec(id, {{"tool", "prober"}, {"argv", {KAUDIT_PROBE, "read", "/etc/passwd"}}});
    REQUIRE(read.status == 200);
    CHECK(read.body["exit_status"] == 1);
    auto sys = d.exec(id, {{"tool", "prober"}, {"argv", {KAUDIT_PROBE, "getppid", "1"}}});
    REQUIRE(sys.status == 200);
    CHECK(sys.body["stdout"] == "failed 1\n");

    auto p = d.call("POST", "/v1/propose", json{{"tool", "prober"}, {"task", id}});
    INFO(p.raw);
    REQUIRE(p.status == 200);
    std::string text = p.body["rules"];
    CHECK(text.find("tool: prober\nextends: prober\n") != std::string::npos);
    CHECK(text.find("files:\n  read:\n    - /etc/passwd\n") != std::string::npos);
    CHECK(text.find("syscalls:\n  allow:\n    - getppid\n") != std::string::npos);
    CHECK(p.body["operations"] == 2);
    // Under the proposal the read is allowed; getppid stays refused, since
    // the tool's deny rule wins over any allow (and the compiler says so).
    CHECK(p.body["allowed_by_proposal"] == 1);
    REQUIRE(p.body["still_refused"].size() == 1);
    CHECK(p.body["still_refused"][0]["object"] == "getppid");
    CHECK(p.body["still_refused"][0]["explanation"].get<std::string>().find("is denied by") != std::string::npos);
    bool warned = false;
    for (auto& w : p.body["warnings"]) warned = warned || w.get<std::string>().find("no effect") != std::string::npos;
    CHECK(warned);

    // A file in the task's work directory is proposed as ${workdir}/..., so
    // the rule serves every task.
    rules.tool("outsider", "", "/nonexistent-bulwark");
    Daemon d2({}, rules.dir.path.string());
    uint64_t id2 = create_task(d2, {{"tools", {"outsider"}}});
    std::string workdir = d2.call("GET", "/v1/tasks/" + std::to_string(id2)).body["workdir"];
    write_file(workdir + "/notes.txt", "notes\n");
    auto own = d2.exec(id2, {{"tool", "outsider"}, {"argv", {KAUDIT_PROBE, "read", workdir + "/notes.txt"}}});
    REQUIRE(own.status == 200);
    CHECK(own.body["exit_status"] == 1);
    auto p2 = d2.call("POST", "/v1/propose", json{{"tool", "outsider"}, {"task", id2}});
    INFO(p2.raw);
    REQUIRE(p2.status == 200);
    CHECK(p2.body["rules"].get<std::string>().find("    - \"${workdir}/notes.txt\"\n") != std::string::npos);
    CHECK(p2.body["allowed_by_proposal"].get<uint64_t>() >= 1);
    CHECK(p2.body["still_refused"].empty());

    // The same request for another tool name, and a bad field, are refused.
    CHECK(d.call("POST", "/v1/propose", json{{"tool", "nope"}}).status == 404);
    CHECK(d.call("POST", "/v1/propose", json{{"tool", "prober"}, {"since_ns", -1}}).status == 400);
}
