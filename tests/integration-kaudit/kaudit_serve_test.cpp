// The kernel audit source in `agentd serve`: an exec whose tool Landlock
// denies has that denial among the response's decisions and in /v1/audit,
// committed before the response; an allowed exec has none; health reports
// the source.
#include <catch2/catch.hpp>

#include <unistd.h>

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

    // The same row through the audit query API.
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
