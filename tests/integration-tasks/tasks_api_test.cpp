// Tasks, exec, tools and replay through the real `agentd serve` binary on
// its unix socket: the way an agent framework uses Bulwark. Runs real tools
// (the shipped rule files) in real sandboxes, so it needs root.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "daemon.h"

using namespace bulwark::test;
using namespace std::chrono_literals;
using nlohmann::json;

TEST_CASE("tools: list, show, explain in words and judge one operation", "[tasks][tools]") {
    Daemon d;
    auto list = d.call("GET", "/v1/tools");
    REQUIRE(list.status == 200);
    std::set<std::string> names;
    for (auto& t : list.body["tools"]) names.insert(t["name"].get<std::string>());
    CHECK(names.count("cat"));
    CHECK(names.count("curl"));
    CHECK_FALSE(names.count("minimal"));  // bases are not tools

    auto show = d.call("GET", "/v1/tools/curl");
    REQUIRE(show.status == 200);
    CHECK(show.body["network"] == true);
    CHECK(show.body["bundle"]["hash"] == show.body["hash"]);

    auto text = d.call("GET", "/v1/tools/cat/explain");
    REQUIRE(text.status == 200);
    CHECK_THAT(text.body["text"].get<std::string>(), Catch::Contains("policy cat"));

    auto deny = d.call("POST", "/v1/tools/cat/explain",
                       json{{"operation", {{"op", "open"}, {"path", "/etc/shadow"}, {"access", "read"}}}});
    REQUIRE(deny.status == 200);
    CHECK(deny.body["verdict"] == "deny");
    CHECK_THAT(deny.body["rule"].get<std::string>(), Catch::Contains("base/minimal.yaml:"));

    auto allow = d.call("POST", "/v1/tools/cat/explain",
                        json{{"operation", {{"op", "open"}, {"path", "/workdir/notes.txt"}, {"access", "read"}}}});
    CHECK(allow.body["verdict"] == "allow");

    auto bad = d.call("POST", "/v1/tools/cat/explain", json{{"operation", {{"op", "open"}, {"path", "relative"}}}});
    CHECK(bad.status == 400);
    CHECK_THAT(bad.body["error"]["message"].get<std::string>(), Catch::Contains("operation.path"));
    CHECK(d.call("GET", "/v1/tools/nosuch").status == 404);
}

TEST_CASE("tasks: bad and widening grants are refused with the field or the rule", "[tasks][grants]") {
    Daemon d;
    auto bad = d.call("POST", "/v1/tasks",
                      json{{"tools", {"cat"}}, {"grant", {{"files", {{{"path", "${workdir}"}, {"rights", {"wrte"}}}}}}}});
    CHECK(bad.status == 400);
    CHECK_THAT(bad.raw, Catch::Contains("grant.files[0].rights[0]: unknown right 'wrte'"));

    auto widen = d.call("POST", "/v1/tasks",
                        json{{"tools", {"cat"}}, {"grant", {{"files", {{{"path", "/etc"}, {"rights", {"read"}}}}}}}});
    CHECK(widen.status == 403);
    CHECK(widen.body["error"]["code"] == "grant_widens");
    REQUIRE(widen.body["error"]["reasons"].size() >= 1);
    CHECK_THAT(widen.body["error"]["reasons"][0].get<std::string>(), Catch::Contains("cat: "));

    CHECK(d.call("POST", "/v1/tasks", json{{"tools", {"nosuch"}}}).status == 404);
    CHECK(d.call("POST", "/v1/tasks", json{{"tools", {"cat"}}, {"colour", "red"}}).status == 400);
    CHECK(d.call("GET", "/v1/tasks/999").status == 404);
    CHECK(d.call("GET", "/v1/tasks/abc").status == 400);
}

TEST_CASE("exec: a run in the task's sandbox, its records, stdin and a denial", "[tasks][exec]") {
    Daemon d;
    uint64_t id = create_task(d, {{"tools", {"cat", "sh"}}, {"label", "exec test"}});
    auto task = d.call("GET", "/v1/tasks/" + std::to_string(id)).body;
    std::string workdir = task["workdir"];
    write_file(workdir + "/notes.txt", "hello from the workdir\n");

    auto ok = d.exec(id, {{"tool", "cat"}, {"argv", {"cat", "notes.txt"}}});
    INFO(ok.raw);
    REQUIRE(ok.status == 200);
    CHECK(ok.body["exit_status"] == 0);
    CHECK(ok.body["stdout"] == "hello from the workdir\n");
    uint64_t run = ok.body["run_id"];
    // every layer the report names is accounted for
    bool seccomp = false;
    for (auto& l : ok.body["report"]["layers"])
        if (l["name"] == "seccomp") seccomp = l["state"] == "enforcing";
    CHECK(seccomp);

    // The run's start and exit are committed records.
    auto rows = d.call("GET", "/v1/audit?run=" + std::to_string(run));
    REQUIRE(rows.status == 200);
    std::set<std::string> kinds;
    for (auto& r : rows.body["rows"]) kinds.insert(r["kind"].get<std::string>());
    CHECK(kinds.count("run_start"));
    CHECK(kinds.count("run_exit"));

    auto in = d.exec(id, {{"tool", "cat"}, {"argv", {"cat", "-"}}, {"stdin", "through stdin\n"}});
    CHECK(in.body["stdout"] == "through stdin\n");

    // Control: the host's /etc/passwd is readable unconfined; the tool's rules
    // do not grant it, so inside the sandbox the read fails.
    REQUIRE(::access("/etc/passwd", R_OK) == 0);
    auto denied = d.exec(id, {{"tool", "cat"}, {"argv", {"cat", "/etc/passwd"}}});
    CHECK(denied.body["exit_status"] == 1);
    CHECK(denied.body["stdout"] == "");
    CHECK_THAT(denied.body["stderr"].get<std::string>(), Catch::Contains("Permission denied"));

    // The runs are counted in /metrics.
    auto m = get(d.sock, 0, "/metrics");
    CHECK_THAT(m.body, Catch::Contains("bulwark_runs_total{outcome=\"exited\"} 3"));
    CHECK_THAT(m.body, Catch::Contains("bulwark_tasks_open 1"));

    // A tool the task does not hold, and a closed task.
    CHECK(d.exec(id, {{"tool", "curl"}, {"argv", {"curl", "http://127.0.0.1/"}}}).status == 404);
    auto closed = d.call("DELETE", "/v1/tasks/" + std::to_string(id));
    CHECK(closed.body["state"] == "closed");
    CHECK(d.exec(id, {{"tool", "cat"}, {"argv", {"cat", "notes.txt"}}}).status == 409);
}

TEST_CASE("grants narrow the tools' rules, and an update switches the epoch", "[tasks][grants]") {
    Daemon d;
    // sh may create anywhere in the workdir by its rules; the task's grant
    // confines creation to ${workdir}/out.
    uint64_t id = create_task(
        d, {{"tools", {"sh"}},
            {"grant", {{"files", {{{"path", "${workdir}/out"}, {"rights", {"create", "write"}}}}}}}});
    std::string workdir = d.call("GET", "/v1/tasks/" + std::to_string(id)).body["workdir"];
    REQUIRE(::mkdir((workdir + "/out").c_str(), 0755) == 0);
    REQUIRE(::chown((workdir + "/out").c_str(), 65534, 65534) == 0);

    auto inside = d.exec(id, {{"tool", "sh"}, {"argv", {"sh", "-c", "echo a > out/a.txt"}}});
    INFO(inside.raw);
    CHECK(inside.body["exit_status"] == 0);
    CHECK(std::filesystem::exists(workdir + "/out/a.txt"));

    auto outside = d.exec(id, {{"tool", "sh"}, {"argv", {"sh", "-c", "echo b > b.txt"}}});
    CHECK(outside.body["exit_status"] != 0);
    CHECK_FALSE(std::filesystem::exists(workdir + "/b.txt"));

    // Control for the attempt above: with the grant lifted (the tool's rules
    // as they are) the same command creates the file.
    auto up = d.call("PUT", "/v1/tasks/" + std::to_string(id) + "/grant", json{{"grant", nullptr}});
    REQUIRE(up.status == 200);
    CHECK(up.body["epoch"] == 2);
    auto again = d.exec(id, {{"tool", "sh"}, {"argv", {"sh", "-c", "echo b > b.txt"}}});
    CHECK(again.body["exit_status"] == 0);
    CHECK(std::filesystem::exists(workdir + "/b.txt"));
    CHECK(again.body["epoch"] == 2);

    // Epoch records name the task.
    auto ep = d.call("GET", "/v1/audit?kind=policy_epoch&task=" + std::to_string(id));
    CHECK(ep.body["rows"].size() >= 2);
}

TEST_CASE("a time-boxed grant ends by itself and cuts the runs started under it", "[tasks][timebox]") {
    Daemon d;
    uint64_t id = create_task(d, {{"tools", {"sh"}}});
    auto box = d.call("PUT", "/v1/tasks/" + std::to_string(id) + "/grant",
                      json{{"grant", {{"limits", {{"pids", 8}}}}}, {"expires_in_ms", 1500}});
    INFO(box.raw);
    REQUIRE(box.status == 200);
    CHECK(box.body["epoch"] == 2);
    CHECK(box.body["expires_ns"].is_number());

    auto t0 = std::chrono::steady_clock::now();
    auto spin = d.exec(id, {{"tool", "sh"}, {"argv", {"sh", "-c", "while :; do :; done"}}});
    auto took = std::chrono::steady_clock::now() - t0;
    CHECK(spin.body["exit_status"] == 124);  // the wall-clock limit: the grant's end
    CHECK(took < 10s);

    std::this_thread::sleep_for(500ms);
    auto t = d.call("GET", "/v1/tasks/" + std::to_string(id)).body;
    CHECK(t["epoch"] == 3);
    CHECK(t["grant"].is_null());
    REQUIRE(t["epochs"].size() == 3);
    CHECK(t["epochs"][1]["reason"] == "timebox");
    CHECK(t["epochs"][2]["reason"] == "expiry");
}

TEST_CASE("closing a task kills its running tools", "[tasks][close]") {
    Daemon d;
    uint64_t id = create_task(d, {{"tools", {"sh"}}});
    auto fut = std::async(std::launch::async, [&] {
        return d.exec(id, {{"tool", "sh"}, {"argv", {"sh", "-c", "while :; do :; done"}}});
    });
    // wait until the run is running
    for (int i = 0; i < 100; ++i) {
        auto t = d.call("GET", "/v1/tasks/" + std::to_string(id)).body;
        if (t["running"] == 1) break;
        std::this_thread::sleep_for(50ms);
    }
    auto c = d.call("DELETE", "/v1/tasks/" + std::to_string(id));
    CHECK(c.body["cancelled_runs"] == 1);
    REQUIRE(fut.wait_for(10s) == std::future_status::ready);
    auto r = fut.get();
    CHECK(r.body["outcome"] == "signaled");
    CHECK_THAT(r.raw, Catch::Contains("run cancelled"));
}

TEST_CASE("cancel by client_ref ends only the runs that named it", "[tasks][cancel]") {
    Daemon d;
    uint64_t id = create_task(d, {{"tools", {"sh"}}});
    const std::string base = "/v1/tasks/" + std::to_string(id);
    auto spin = [&](const char* ref) {
        return std::async(std::launch::async, [&d, id, ref] {
            return d.exec(id, {{"tool", "sh"}, {"argv", {"sh", "-c", "while :; do :; done"}}, {"timeout_ms", 4000},
                               {"client_ref", ref}});
        });
    };
    auto a = spin("call-a");
    auto b = spin("call-b");
    for (int i = 0; i < 100; ++i) {
        if (d.call("GET", base).body["running"] == 2) break;
        std::this_thread::sleep_for(50ms);
    }
    auto none = d.call("POST", base + "/cancel", json{{"client_ref", "call-z"}});
    CHECK(none.status == 200);
    CHECK(none.body["cancelled_runs"].empty());
    auto c = d.call("POST", base + "/cancel", json{{"client_ref", "call-a"}});
    CHECK(c.status == 200);
    CHECK(c.body["cancelled_runs"].size() == 1);
    REQUIRE(a.wait_for(3s) == std::future_status::ready);
    auto ra = a.get();
    CHECK(ra.body["client_ref"] == "call-a");
    CHECK(ra.body["outcome"] == "signaled");
    CHECK_THAT(ra.raw, Catch::Contains("run cancelled"));
    // The audit trail names the call that started the run.
    auto starts = d.call("GET", "/v1/audit?kind=run_start&run=" + std::to_string(ra.body["run_id"].get<uint64_t>()));
    REQUIRE(starts.body["rows"].size() == 1);
    auto detail = starts.body["rows"][0]["detail"];
    if (detail.is_string()) detail = json::parse(detail.get<std::string>());
    CHECK(detail["client_ref"] == "call-a");
    // The control: the other run went on to its time limit.
    auto rb = b.get();
    CHECK(rb.body["report"]["timed_out"] == true);
    CHECK(d.call("POST", base + "/cancel", json{{"ref", "x"}}).status == 400);
    CHECK(d.call("POST", "/v1/tasks/999999/cancel", json{{"client_ref", "x"}}).status == 404);
    CHECK(d.exec(id, {{"tool", "sh"}, {"argv", {"true"}}, {"client_ref", ""}}).status == 400);
}

TEST_CASE("streamed exec sends the run, its output as it comes, then the result", "[tasks][stream]") {
    Daemon d;
    uint64_t id = create_task(d, {{"tools", {"sh"}}});
    int fd = connect_unix(d.sock);
    REQUIRE(fd >= 0);
    std::string body = json{{"tool", "sh"}, {"argv", {"sh", "-c", "echo one; echo two >&2"}}}.dump();
    std::string raw = "POST /v1/tasks/" + std::to_string(id) +
                      "/exec/stream HTTP/1.1\r\nHost: agentd\r\nContent-Type: application/json\r\nContent-Length: " +
                      std::to_string(body.size()) + "\r\n\r\n" + body;
    REQUIRE(send_all(fd, raw));
    std::string all = read_until(fd, "event: exit", 20s);
    all += read_until(fd, "\n\n", 2s);
    CHECK(closed_within(fd, 3s));  // the response ends after the last event
    ::close(fd);
    auto p_run = all.find("event: run");
    auto p_out = all.find("event: stdout");
    auto p_err = all.find("event: stderr");
    auto p_exit = all.find("event: exit");
    REQUIRE(p_run != std::string::npos);
    REQUIRE(p_out != std::string::npos);
    REQUIRE(p_err != std::string::npos);
    REQUIRE(p_exit != std::string::npos);
    CHECK(p_run < p_out);
    CHECK(p_out < p_exit);
    CHECK(p_err < p_exit);
    CHECK_THAT(all, Catch::Contains("one\\n"));
}

TEST_CASE("replay judges recorded operations under a candidate rule file", "[tasks][replay]") {
    Daemon d;
    uint64_t id = create_task(d, {{"tools", {"cat"}}});
    std::string workdir = d.call("GET", "/v1/tasks/" + std::to_string(id)).body["workdir"];
    write_file(workdir + "/notes.txt", "x\n");
    REQUIRE(d.exec(id, {{"tool", "cat"}, {"argv", {"cat", "notes.txt"}}}).status == 200);

    std::ifstream in(std::string(BULWARK_RULES_DIR) + "/cat.yaml");
    std::string rules((std::istreambuf_iterator<char>(in)), {});
    auto same = d.call("POST", "/v1/replay", json{{"tool", "cat"}, {"rules", rules}});
    INFO(same.raw);
    REQUIRE(same.status == 200);
    CHECK(same.body["changed"].empty());

    auto broken = d.call("POST", "/v1/replay", json{{"tool", "cat"}, {"rules", "tool: cat\nfiles:\n  read: [relative]\n"}});
    CHECK(broken.status == 422);
    CHECK_THAT(broken.raw, Catch::Contains("candidate:cat.yaml:3:"));
}

TEST_CASE("kill -9 of agentd during a run: the tool dies, a restart leaves nothing behind", "[tasks][crash]") {
    // Its own pin root and cgroup parent: the leaf the killed daemon leaves
    // is reaped by the restart below, not by a daemon of a parallel tier.
    PrivateBpf bpf("tasks-kill9");
    auto d = std::make_unique<Daemon>(bpf.args());
    uint64_t id = create_task(*d, {{"tools", {"sh"}}});
    pid_t daemon_pid = d->child->pid;
    std::jthread runner([&] { d->exec(id, {{"tool", "sh"}, {"argv", {"sh", "-c", "while :; do :; done"}}}); });
    // A failed REQUIRE below must not leave the daemon and its tool running.
    struct KillOnExit {
        pid_t pid;
        ~KillOnExit() { ::kill(pid, SIGKILL); }
    } guard{daemon_pid};
    uint64_t run = 0;
    // Generous waits: the machine may be loaded by parallel tiers.
    for (int i = 0; i < 400 && !run; ++i) {
        auto t = d->call("GET", "/v1/tasks/" + std::to_string(id)).body;
        if (t["running"] == 1) run = t["runs"][0]["run_id"];
        std::this_thread::sleep_for(50ms);
    }
    REQUIRE(run != 0);
    std::string prefix = "bulwark-run-" + std::to_string(daemon_pid) + "-";
    auto leaves = [&] { return run_leaves(prefix).count; };
    // "running" is set when the exec starts; the leaf follows a moment later.
    for (int i = 0; i < 200 && leaves() == 0; ++i) std::this_thread::sleep_for(25ms);
    REQUIRE(leaves() >= 1);

    REQUIRE(::kill(daemon_pid, SIGKILL) == 0);
    CHECK(d->child->wait_exit() == 128 + SIGKILL);
    runner.join();  // its connection ended with the daemon
    // The tool died with its supervisor (parent-death signal; it was pid 1 of
    // its pid namespace): within a moment no process is left in any leaf.
    bool empty = false;
    for (int i = 0; i < 400 && !empty; ++i) {
        empty = run_leaves(prefix).processes == 0;
        if (!empty) std::this_thread::sleep_for(50ms);
    }
    CHECK(empty);

    // Restart on the same state: the leaves are reaped before it serves, the
    // store is intact and holds the acknowledged start of the killed run,
    // now closed by an exit record that says what was found of it.
    auto state = d->state;
    d->start("agentd2.log");
    CHECK(leaves() == 0);
    auto db = std::filesystem::path(state) / "audit.db";
    CHECK(sql_value(db, "PRAGMA integrity_check") == "ok");
    CHECK(sql_value(db, "SELECT count(*) FROM records WHERE kind = 2 AND run_id = " + std::to_string(run)) == "1");
    CHECK(sql_value(db, "SELECT json_extract(detail, '$.outcome') FROM records WHERE kind = 3 AND run_id = " +
                            std::to_string(run)) == "abandoned");
    CHECK(sql_value(db, "SELECT count(*) FROM records r WHERE kind = 2 AND NOT EXISTS (SELECT 1 FROM records e "
                        "WHERE e.kind = 3 AND e.run_id = r.run_id)") == "0");
    auto health = d->call("GET", "/v1/health");
    REQUIRE(health.status == 200);
    const auto& rec = health.body["host"]["reconciliation"];
    INFO(rec.dump(2));
    REQUIRE(rec["runs_closed"].size() == 1);
    CHECK(rec["runs_closed"][0]["run_id"] == run);
    // The run's own leaf, found by its label, with the tool's process gone already.
    CHECK(rec["runs_closed"][0]["found"]["cgroup"]["removed"] == true);
    CHECK_THAT(rec["runs_closed"][0]["found"]["cgroup"]["path"].get<std::string>(),
               Catch::Contains("-r" + std::to_string(run)));
    CHECK(rec["bpf"]["bindings_removed"].get<int>() >= 1);
    CHECK_THAT(rec["summary"].get<std::string>(), Catch::Contains("1 run(s) without an exit record"));
    auto reconciled = d->call("GET", "/v1/audit?kind=host_status");
    CHECK_THAT(reconciled.raw, Catch::Contains("reconciled"));
    // After a clean stop, a restart finds nothing.
    d->child.reset();
    d->start("agentd3.log");
    CHECK(d->call("GET", "/v1/health").body["host"]["reconciliation"]["summary"] == "nothing left by a previous agentd");
}

TEST_CASE("exec files: working files land in the workdir; a planted symlink, `..` and absolute paths are refused",
          "[tasks][files]") {
    Daemon d;
    uint64_t id = create_task(d, {{"tools", {"cat", "tar"}}});
    std::string workdir = d.call("GET", "/v1/tasks/" + std::to_string(id)).body["workdir"];

    // Control: a normal file (and its parent directory) lands and the tool reads it.
    auto ok = d.exec(id, {{"tool", "cat"}, {"argv", {"cat", "src/notes.txt"}}, {"files", {{"src/notes.txt", "carried in\n"}}}});
    INFO(ok.raw);
    REQUIRE(ok.status == 200);
    CHECK(ok.body["exit_status"] == 0);
    CHECK(ok.body["stdout"] == "carried in\n");
    CHECK(ok.body["files"][0]["path"] == "src/notes.txt");
    struct stat st{};
    REQUIRE(::stat((workdir + "/src/notes.txt").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0644);
    CHECK(st.st_uid == 65534);
    REQUIRE(::stat((workdir + "/src").c_str(), &st) == 0);  // the parent created for it
    CHECK(S_ISDIR(st.st_mode));
    CHECK((st.st_mode & 07777) == 0755);
    CHECK(st.st_uid == 65534);
    // The run's start record lists the files.
    auto rows = d.call("GET", "/v1/audit?kind=run_start&run=" + ok.body["run_id"].dump());
    CHECK_THAT(rows.raw, Catch::Contains("src/notes.txt"));

    // An earlier run of the task plants symlinks that lead out of the work
    // directory (tar extracts them from an archive the task was handed).
    TempDir outside, staging;
    std::string out_dir = outside.path.string();
    std::filesystem::create_directory_symlink(out_dir, staging.path / "escape");
    std::filesystem::create_symlink(out_dir + "/target", staging.path / "link");
    REQUIRE(std::system(("tar -C " + staging.path.string() + " -cf " + workdir + "/plant.tar escape link").c_str()) == 0);
    REQUIRE(::chown((workdir + "/plant.tar").c_str(), 65534, 65534) == 0);
    auto plant = d.exec(id, {{"tool", "tar"}, {"argv", {"tar", "-xf", "plant.tar"}}});
    INFO(plant.raw);
    REQUIRE(plant.body["exit_status"] == 0);
    // Control: followed, the links do lead outside (a plain write through them lands there).
    REQUIRE(std::filesystem::read_symlink(workdir + "/escape") == out_dir);
    { std::ofstream(workdir + "/escape/probe") << "x"; }
    REQUIRE(std::filesystem::exists(out_dir + "/probe"));
    std::filesystem::remove(out_dir + "/probe");

    // The attempts: through the planted directory link, and onto the planted file link.
    auto via_dir = d.exec(id, {{"tool", "cat"}, {"argv", {"cat", "escape/x"}}, {"files", {{"escape/x", "pwned"}}}});
    INFO(via_dir.raw);
    CHECK(via_dir.status == 422);
    CHECK(via_dir.body["error"]["code"] == "file_refused");
    CHECK_THAT(via_dir.body["error"]["message"].get<std::string>(), Catch::StartsWith("files.escape/x: "));
    CHECK_FALSE(std::filesystem::exists(out_dir + "/x"));

    auto via_link = d.exec(id, {{"tool", "cat"}, {"argv", {"cat", "link"}}, {"files", {{"link", "pwned"}}}});
    CHECK(via_link.status == 422);
    CHECK_THAT(via_link.body["error"]["message"].get<std::string>(), Catch::StartsWith("files.link: "));
    CHECK_FALSE(std::filesystem::exists(out_dir + "/target"));

    auto abs = d.exec(id, {{"tool", "cat"}, {"argv", {"cat", "x"}}, {"files", {{"/etc/x", "pwned"}}}});
    CHECK(abs.status == 422);
    CHECK_THAT(abs.body["error"]["message"].get<std::string>(), Catch::StartsWith("files./etc/x: "));
    auto dotdot = d.exec(id, {{"tool", "cat"}, {"argv", {"cat", "x"}}, {"files", {{"src/../../x", "pwned"}}}});
    CHECK(dotdot.status == 422);
    CHECK_THAT(dotdot.body["error"]["message"].get<std::string>(), Catch::Contains("`..`"));
    CHECK_FALSE(std::filesystem::exists(std::filesystem::path(workdir).parent_path() / "x"));
    auto not_string = d.exec(id, {{"tool", "cat"}, {"argv", {"cat", "x"}}, {"files", {{"n", 1}}}});
    CHECK(not_string.status == 422);
    CHECK_THAT(not_string.raw, Catch::Contains("files.n: the content must be a string"));

    // No run was started for any refused request: only the two runs above exist.
    auto t = d.call("GET", "/v1/tasks/" + std::to_string(id)).body;
    CHECK(t["runs"].size() == 2);
}

TEST_CASE("exec refuses a tool with a rule no layer in force holds: 422 rule_unenforced, on record",
          "[tasks][coverage]") {
    // Without the BPF layer nothing holds curl-proxy's network rules here, nor
    // the refusal of unix sockets no rule names for any tool that may make one.
    Daemon d({"--no-bpf"});
    auto health = d.call("GET", "/v1/health");
    REQUIRE(health.status == 200);
    const auto& tools = health.body["host"]["tools"];
    INFO(tools.dump(2));
    CHECK(tools["curl-proxy"]["refused"] == true);
    CHECK_THAT(tools["curl-proxy"]["error"].get<std::string>(), Catch::Contains("sock_addr"));
    CHECK(tools["cat"]["refused"] == true);
    CHECK_THAT(tools["cat"]["error"].get<std::string>(),
               Catch::Contains("network.unix: a connect or addressed send to a unix socket no rule names is refused") &&
                   Catch::Contains("sock_unix: BPF layer switched off") &&
                   Catch::Contains("bpf_lsm: BPF layer switched off"));

    uint64_t id = create_task(d, {{"tools", {"curl-proxy", "cat"}}});
    auto r = d.exec(id, {{"tool", "curl-proxy"}, {"argv", {"curl", "--version"}}});
    INFO(r.raw);
    REQUIRE(r.status == 422);
    CHECK(r.body["error"]["code"] == "rule_unenforced");
    std::string msg = r.body["error"]["message"];
    CHECK_THAT(msg, Catch::Contains("curl-proxy.yaml:") && Catch::Contains("network.connect") &&
                        Catch::Contains("no layer in force here holds it: sock_addr: BPF layer switched off"));
    REQUIRE(r.body["error"]["rules"].size() >= 1);
    for (const auto& row : r.body["error"]["rules"]) CHECK(row["held"] == false);
    // The refused run is on record: a start and an exit saying refused.
    uint64_t run = r.body["error"]["run_id"];
    auto rows = d.call("GET", "/v1/audit?run=" + std::to_string(run));
    REQUIRE(rows.status == 200);
    std::set<std::string> kinds;
    for (const auto& row : rows.body["rows"]) {
        kinds.insert(row["kind"].get<std::string>());
        if (row["kind"] == "run_exit") CHECK(row["detail"]["outcome"] == "refused");
    }
    CHECK(kinds.count("run_start"));
    CHECK(kinds.count("run_exit"));

    auto cat = d.exec(id, {{"tool", "cat"}, {"argv", {"cat", "/dev/null"}}});
    CHECK(cat.status == 422);

    // Control: with the BPF layers in force, every rule of cat is held and it runs.
    Daemon held;
    auto h = held.call("GET", "/v1/health");
    REQUIRE(h.status == 200);
    CHECK(h.body["host"]["tools"]["cat"]["refused"] == false);
    CHECK_THAT(h.body["host"]["tools"]["sh"]["summary"].get<std::string>(), Catch::Contains("0 held by no layer here"));
    uint64_t id2 = create_task(held, {{"tools", {"cat"}}});
    auto ok = held.exec(id2, {{"tool", "cat"}, {"argv", {"cat", "/dev/null"}}});
    INFO(ok.raw);
    REQUIRE(ok.status == 200);
    CHECK(ok.body["exit_status"] == 0);
    CHECK_THAT(ok.body["report"]["rules"]["summary"].get<std::string>(), Catch::Contains("0 held by no layer here"));
}
