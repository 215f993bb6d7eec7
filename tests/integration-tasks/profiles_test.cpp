// Behaviour profiles through the real `agentd serve` (docs/profiles.md):
// tools extending the shipped sh with a `profile:` block, learned from real
// sandboxed runs whose decisions come from the real BPF monitor and kernel
// audit, then scored. Each unusual run sits beside a usual run of the same
// tool (the control) that raises nothing.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "daemon.h"

using namespace bulwark::test;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// Each daemon has a BPF pin root of its own (Daemon's PrivateBpf): with the
// shared one, a daemon of a tier running in parallel may read this one's
// monitor events (a profile is learned from them, and `stop` acts on them).
//
// The shipped rules, and four tools that are sh with a profile learning
// from 3 runs: each answering a finding in its own way; and two learning
// from 6 runs that keep a profile per task as well, from 3 runs in a task
// (one of them narrowing).
struct ProfiledRules {
    TempDir dir;
    std::string path = (dir.path / "rules").string();
    ProfiledRules() {
        std::filesystem::copy(BULWARK_RULES_DIR, path, std::filesystem::copy_options::recursive);
        for (auto [tool, respond] : {std::pair{"recorded", "record"}, {"stopped", "stop"}, {"held", "require-grant"}, {"narrowed", "narrow"}})
            std::ofstream(path + "/" + tool + ".yaml")
                << "tool: " << tool << "\nextends: sh\nprofile:\n  learn: 3\n  respond: " << respond << "\n";
        std::ofstream(path + "/pertask.yaml") << "tool: pertask\nextends: sh\nprofile: { learn: 6, task_learn: 3 }\n";
        std::ofstream(path + "/tasknarrow.yaml")
            << "tool: tasknarrow\nextends: sh\nprofile: { learn: 6, task_learn: 3, respond: narrow }\n";
    }
};

json exec_ok(const Daemon& d, uint64_t task, const std::string& tool, const std::string& script,
             const json& extra = json::object()) {
    json body = {{"tool", tool}, {"argv", {"sh", "-c", script}}};
    body.update(extra);
    auto r = d.exec(task, body);
    INFO(r.raw);
    REQUIRE(r.status == 200);
    REQUIRE(r.body.contains("profile"));
    return r.body;
}

// A task of `tool` whose work directory holds notes.txt.
uint64_t task_with_notes(const Daemon& d, const std::string& tool) {
    uint64_t id = create_task(d, {{"tools", {tool}}});
    std::string workdir = d.call("GET", "/v1/tasks/" + std::to_string(id)).body["workdir"];
    write_file(workdir + "/notes.txt", "notes\n");
    return id;
}

void learn_window(const Daemon& d, uint64_t task, const std::string& tool) {
    for (int i = 0; i < 3; ++i) {
        auto r = exec_ok(d, task, tool, "cat notes.txt");
        CHECK(r["exit_status"] == 0);
        CHECK(r["profile"]["learning"] == true);
        CHECK(r["profile"]["findings"].empty());
    }
}

}  // namespace

TEST_CASE("profiles: a first-time binary is a finding, recorded, accepted, and kept across kill -9",
          "[tasks][profiles]") {
    ProfiledRules rules;
    Daemon d({}, rules.path);
    auto listed = d.call("GET", "/v1/profiles");
    REQUIRE(listed.status == 200);
    CHECK(listed.body["profiles"].size() == 6);  // the shipped tools keep none

    uint64_t id = task_with_notes(d, "recorded");
    learn_window(d, id, "recorded");

    // The control: the usual command, now scored, raises nothing.
    auto usual = exec_ok(d, id, "recorded", "cat notes.txt");
    CHECK(usual["profile"]["learning"] == false);
    CHECK(usual["profile"]["findings"].empty());
    CHECK(usual["profile"]["learned"] == true);

    // The same tool starting a program it never started: allowed by its
    // rules (the run succeeds), unusual for its profile.
    auto odd = exec_ok(d, id, "recorded", "ls >/dev/null; cat notes.txt");
    CHECK(odd["exit_status"] == 0);
    CHECK(odd["stdout"] == "notes\n");
    CHECK(odd["profile"]["response"] == "recorded");
    CHECK(odd["profile"]["learned"] == false);
    CHECK_THAT(odd["profile"]["summary"].get<std::string>(),
               Catch::StartsWith("unusual for recorded: first-time binary /usr/bin/ls in 4 runs"));
    // ls also makes system calls the tool's usual runs never made (the
    // monitor counts them per run): each is a finding of its own.
    bool new_call = false;
    for (const auto& x : odd["profile"]["findings"]) new_call |= x["feature"] == "syscall";
    CHECK(new_call);
    CHECK(usual["report"]["counted"]["syscalls"].contains("execve"));

    // The finding is an audit record of the run, before its exit record.
    auto f = d.call("GET", "/v1/audit?kind=finding&tool=recorded");
    REQUIRE(f.status == 200);
    REQUIRE(f.body["rows"].size() == 1);
    const json finding = f.body["rows"][0];
    CHECK(finding["run_id"] == odd["run_id"]);
    CHECK(finding["detail"]["findings"][0]["item"] == "/usr/bin/ls");
    auto exits = d.call("GET", "/v1/audit?kind=run_exit&run=" + std::to_string(odd["run_id"].get<uint64_t>()));
    REQUIRE(exits.body["rows"].size() == 1);
    CHECK(exits.body["rows"][0]["seq"].get<uint64_t>() > finding["seq"].get<uint64_t>());

    auto prof = d.call("GET", "/v1/profiles/recorded");
    REQUIRE(prof.status == 200);
    CHECK(prof.body["runs"] == 4);
    CHECK(prof.body["profile"]["sets"]["exec"]["items"].contains("/usr/bin/cat"));
    CHECK_FALSE(prof.body["profile"]["sets"]["exec"]["items"].contains("/usr/bin/ls"));

    // kill -9, then a restart: the profile is what the store says it was.
    REQUIRE(::kill(d.child->pid, SIGKILL) == 0);
    CHECK(d.child->wait_exit() == 128 + SIGKILL);
    d.start("agentd2.log");
    auto after = d.call("GET", "/v1/profiles/recorded");
    REQUIRE(after.status == 200);
    CHECK(after.body["runs"] == 4);
    CHECK(after.body["learning"] == false);

    // Accepted: that run is learned, and the same command is usual now.
    auto acc = d.call("POST", "/v1/profiles/recorded/accept", json{{"finding_seq", finding["seq"]}});
    INFO(acc.raw);
    REQUIRE(acc.status == 200);
    CHECK(acc.body["runs"] == 5);
    uint64_t id2 = task_with_notes(d, "recorded");
    auto again = exec_ok(d, id2, "recorded", "ls >/dev/null; cat notes.txt");
    CHECK(again["profile"]["findings"].empty());

    CHECK(d.call("POST", "/v1/profiles/recorded/accept", json{{"finding_seq", 1}}).status == 404);
    CHECK(d.call("POST", "/v1/profiles/recorded/accept", json{{"seq", 1}}).status == 400);
    CHECK(d.call("GET", "/v1/profiles/cat").status == 404);
    auto reset = d.call("POST", "/v1/profiles/recorded/reset");
    CHECK(reset.body["learning"] == true);
    CHECK(reset.body["runs"] == 0);
}

TEST_CASE("profiles: respond: stop ends the run at its first first-time binary", "[tasks][profiles]") {
    ProfiledRules rules;
    Daemon d({}, rules.path);
    uint64_t id = task_with_notes(d, "stopped");
    // A loop after a program the tool never started: it would spin until its
    // timeout if nothing stopped it.
    const std::string attack = "ls >/dev/null; while :; do :; done";

    // The control: while the profile learns, nothing is stopped; the loop
    // runs until the request's timeout. Then the profile starts again, so
    // that it does not learn this run as usual.
    auto loose = exec_ok(d, id, "stopped", attack, {{"timeout_ms", 1500}});
    CHECK(loose["report"]["timed_out"] == true);
    CHECK(loose["profile"]["learning"] == true);
    REQUIRE(d.call("POST", "/v1/profiles/stopped/reset").status == 200);
    learn_window(d, id, "stopped");

    auto t0 = std::chrono::steady_clock::now();
    // (The timeout below the client's: a run not stopped still answers, with its records.)
    auto stopped = exec_ok(d, id, "stopped", attack, {{"timeout_ms", 30000}});
    auto took = std::chrono::steady_clock::now() - t0;
    INFO(stopped["decisions"].dump(1).substr(0, 8000));
    INFO(stopped["profile"].dump());
    CHECK(took < 20s);
    CHECK(stopped["outcome"] == "signaled");
    CHECK(stopped["report"]["timed_out"] == false);
    CHECK(stopped["profile"]["response"] == "stopped");
    bool said = false;
    for (const auto& den : stopped["denials"])
        if (den["explanation"].get<std::string>().find("run stopped by the profile of stopped (respond: stop): "
                                                       "first-time binary /usr/bin/ls") != std::string::npos)
            said = true;
    CHECK(said);
}

TEST_CASE("profiles: respond: require-grant holds the tool's runs until the grant is updated", "[tasks][profiles]") {
    ProfiledRules rules;
    Daemon d({}, rules.path);
    uint64_t id = task_with_notes(d, "held");
    learn_window(d, id, "held");
    auto odd = exec_ok(d, id, "held", "wc -l notes.txt");
    CHECK(odd["exit_status"] == 0);
    CHECK(odd["profile"]["response"] == "require-grant");

    auto refused = d.exec(id, {{"tool", "held"}, {"argv", {"sh", "-c", "cat notes.txt"}}});
    CHECK(refused.status == 409);
    CHECK(refused.body["error"]["code"] == "profile_hold");
    CHECK_THAT(refused.body["error"]["message"].get<std::string>(),
               Catch::Contains("first-time binary /usr/bin/wc"));
    CHECK(d.call("GET", "/v1/tasks/" + std::to_string(id)).body.contains("profile_holds"));

    auto grant = d.call("PUT", "/v1/tasks/" + std::to_string(id) + "/grant", json{{"grant", nullptr}});
    INFO(grant.raw);
    REQUIRE(grant.status == 200);
    auto resumed = exec_ok(d, id, "held", "cat notes.txt");
    CHECK(resumed["exit_status"] == 0);
}

TEST_CASE("profiles: respond: narrow confines the tool to its profile for the rest of the task, "
          "through grant updates, until lifted",
          "[tasks][profiles]") {
    ProfiledRules rules;
    Daemon d({}, rules.path);
    uint64_t id = task_with_notes(d, "narrowed");
    learn_window(d, id, "narrowed");
    const std::string task = "/v1/tasks/" + std::to_string(id);
    auto refused = [&](uint64_t in, const std::string& script) {
        auto r = exec_ok(d, in, "narrowed", script);
        INFO(r.dump(1).substr(0, 4000));
        CHECK(r["exit_status"] != 0);
        CHECK_THAT(r["stderr"].get<std::string>(), Catch::Contains("Permission denied"));
    };

    // The finding: wc, which the rules allow and the profile never saw. The
    // run itself goes on; the task moves to a narrowed epoch.
    auto odd = exec_ok(d, id, "narrowed", "wc -l notes.txt");
    INFO(odd["profile"].dump());
    CHECK(odd["exit_status"] == 0);
    CHECK(odd["profile"]["response"] == "narrowed");
    const json narrowed = odd["profile"]["narrowed"];
    REQUIRE(narrowed.contains("epoch"));
    CHECK(narrowed["epoch"] == 2);
    CHECK(narrowed["profile"] == "tool");
    CHECK(narrowed["run_id"] == odd["run_id"]);
    CHECK(narrowed["dropped"].get<int>() > 0);
    auto t = d.call("GET", task).body;
    CHECK(t["epoch"] == 2);
    CHECK(t["narrowed"].contains("narrowed"));
    CHECK(t["epochs"].back()["reason"] == "narrow");

    // The usual command runs as before; binaries the profile never saw are
    // refused, wc (the finding's) as well as ls.
    auto usual = exec_ok(d, id, "narrowed", "cat notes.txt");
    CHECK(usual["exit_status"] == 0);
    CHECK(usual["stdout"] == "notes\n");
    refused(id, "ls");
    refused(id, "wc -l notes.txt");
    // Those runs were unusual too: the narrowing in force stays, no new epoch.
    CHECK(d.call("GET", task).body["epoch"] == 2);
    // A decision names the narrowing.
    bool named = false;
    auto denied = exec_ok(d, id, "narrowed", "ls");
    for (const auto& den : denied["denials"])
        named |= den["explanation"].get<std::string>().find("denied: the narrowing of narrowed to its profile") !=
                     std::string::npos &&
                 den["narrowing"]["finding_seq"] == narrowed["finding_seq"];
    INFO(denied["denials"].dump(1));
    CHECK(named);

    // The control: the same tool in another task is not narrowed (its ls
    // runs, and is a finding there, which narrows that task in turn).
    uint64_t other = task_with_notes(d, "narrowed");
    auto loose = exec_ok(d, other, "narrowed", "ls");
    CHECK(loose["exit_status"] == 0);
    CHECK_THAT(loose["stdout"].get<std::string>(), Catch::Contains("notes.txt"));

    // A grant update does not lift it.
    auto grant = d.call("PUT", task + "/grant", json{{"grant", nullptr}});
    REQUIRE(grant.status == 200);
    CHECK(grant.body["narrowed"].contains("narrowed"));
    refused(id, "ls");

    // The response is recorded: the epoch record names the finding.
    auto epochs = d.call("GET", "/v1/audit?kind=policy_epoch&task=" + std::to_string(id));
    REQUIRE(epochs.status == 200);
    bool recorded = false;
    for (const auto& row : epochs.body["rows"])
        if (row["detail"]["change"] == "narrow")
            recorded |= row["detail"]["narrowed"]["finding_seq"] == narrowed["finding_seq"] &&
                        row["detail"]["narrowed"]["finding_seq"].get<uint64_t>() > 0;
    CHECK(recorded);

    // Lifted: ls runs again (and, being unusual still, narrows the task anew).
    auto lift = d.call("DELETE", task + "/narrowings/narrowed");
    INFO(lift.raw);
    REQUIRE(lift.status == 200);
    CHECK_FALSE(lift.body.contains("narrowed"));
    auto free = exec_ok(d, id, "narrowed", "ls");
    CHECK(free["exit_status"] == 0);
    CHECK(free["profile"]["response"] == "narrowed");
    CHECK(d.call("DELETE", task + "/narrowings/stopped").status == 404);
    CHECK(d.call("DELETE", "/v1/tasks/999999/narrowings/narrowed").status == 404);
}

TEST_CASE("profiles: a task's own profile finds a binary usual for the tool but new to the task",
          "[tasks][profiles]") {
    ProfiledRules rules;
    Daemon d({}, rules.path);
    // Two tasks, each with its own usual command: the tool learns both.
    uint64_t reader = task_with_notes(d, "pertask"), counter = task_with_notes(d, "pertask");
    for (int i = 0; i < 3; ++i) {
        CHECK(exec_ok(d, reader, "pertask", "cat notes.txt")["profile"]["findings"].empty());
        auto c = exec_ok(d, counter, "pertask", "wc -l notes.txt");
        CHECK(c["profile"]["findings"].empty());
        CHECK(c["profile"]["task"]["task_id"] == counter);
        CHECK(c["profile"]["task"]["runs"] == i + 1);
    }
    auto prof = d.call("GET", "/v1/profiles/pertask");
    REQUIRE(prof.status == 200);
    CHECK(prof.body["learning"] == false);
    CHECK(prof.body["tasks"].size() == 2);

    // The control: wc in a task still learning its own profile raises nothing.
    uint64_t fresh = task_with_notes(d, "pertask");
    auto usual = exec_ok(d, fresh, "pertask", "wc -l notes.txt");
    CHECK(usual["profile"]["findings"].empty());
    CHECK(usual["profile"]["task"]["learning"] == true);

    // wc in the reading task: usual for the tool, new to the task.
    auto odd = exec_ok(d, reader, "pertask", "wc -l notes.txt");
    CHECK(odd["exit_status"] == 0);
    CHECK(odd["profile"]["response"] == "recorded");
    bool task_exec = false;
    for (const auto& f : odd["profile"]["findings"]) {
        CHECK(f["task_id"] == reader);  // none is the tool's own
        task_exec |= f["feature"] == "exec" && f["item"] == "/usr/bin/wc";
    }
    CHECK(task_exec);
    CHECK_THAT(odd["profile"]["summary"].get<std::string>(),
               Catch::Contains("in 3 runs of task " + std::to_string(reader)));

    auto mine = d.call("GET", "/v1/profiles/pertask?task=" + std::to_string(reader));
    REQUIRE(mine.status == 200);
    CHECK(mine.body["profile"]["task_id"] == reader);
    CHECK(mine.body["profile"]["sets"]["exec"]["items"].contains("/usr/bin/cat"));
    CHECK_FALSE(mine.body["profile"]["sets"]["exec"]["items"].contains("/usr/bin/wc"));
    CHECK(d.call("GET", "/v1/profiles/pertask?task=x").status == 400);

    // The task's own profile is edited like the tool's, with ?task=ID.
    const std::string q = "?task=" + std::to_string(reader);
    auto f = d.call("GET", "/v1/audit?kind=finding&task=" + std::to_string(reader));
    REQUIRE(f.body["rows"].size() == 1);
    const json seq = f.body["rows"][0]["seq"];
    auto pinned = d.call("POST", "/v1/profiles/pertask/pin" + q);
    REQUIRE(pinned.status == 200);
    CHECK(pinned.body["pinned"] == true);
    CHECK(pinned.body["task_id"] == reader);
    CHECK(d.call("GET", "/v1/profiles/pertask").body["pinned"] == false);  // the tool's is not
    CHECK(d.call("POST", "/v1/profiles/pertask/accept" + q, json{{"finding_seq", seq}}).status == 409);
    REQUIRE(d.call("POST", "/v1/profiles/pertask/unpin" + q).status == 200);
    // A finding of another task is not this task's to accept.
    CHECK(d.call("POST", "/v1/profiles/pertask/accept?task=" + std::to_string(counter), json{{"finding_seq", seq}})
              .status == 404);
    auto acc = d.call("POST", "/v1/profiles/pertask/accept" + q, json{{"finding_seq", seq}});
    INFO(acc.raw);
    REQUIRE(acc.status == 200);
    CHECK(acc.body["runs"] == 4);
    CHECK(exec_ok(d, reader, "pertask", "wc -l notes.txt")["profile"]["findings"].empty());
    auto exported = d.call("GET", "/v1/profiles/pertask/rules" + q);  // its export
    REQUIRE(exported.status == 200);
    CHECK(exported.body["runs"].get<int>() >= 4);
    auto reset = d.call("POST", "/v1/profiles/pertask/reset" + q);
    REQUIRE(reset.status == 200);
    CHECK(reset.body["runs"] == 0);
    CHECK(reset.body["learning"] == true);
    CHECK(d.call("GET", "/v1/profiles/pertask").body["learning"] == false);  // the tool's learned on
    CHECK(d.call("POST", "/v1/profiles/pertask/reset?task=999999").status == 404);
    CHECK(d.call("POST", "/v1/profiles/pertask/reset?tusk=1").status == 400);
    // A closed task's profile goes with it.
    REQUIRE(d.call("DELETE", "/v1/tasks/" + std::to_string(reader)).status == 200);
    CHECK(d.call("GET", "/v1/profiles/pertask?task=" + std::to_string(reader)).status == 404);
}

TEST_CASE("profiles: exported as a rule file, the usual command runs under it and a binary it never ran is refused",
          "[tasks][profiles]") {
    ProfiledRules rules;
    std::string exported;
    {
        Daemon d({}, rules.path);
        uint64_t id = task_with_notes(d, "recorded");
        learn_window(d, id, "recorded");
        auto r = d.call("GET", "/v1/profiles/recorded/rules");
        INFO(r.raw);
        REQUIRE(r.status == 200);
        CHECK(r.body["runs"] == 3);
        CHECK(r.body["source_changed"] == false);
        exported = r.body["rules"].get<std::string>();
        // sh's exec list, cut to what the runs executed: cat stays, ls goes.
        std::map<std::string, std::string> results;
        for (const auto& e : r.body["entries"]) results[e["text"].get<std::string>()] = e["result"].get<std::string>();
        CHECK(results["exec.allow: /usr/bin/cat"] == "kept");
        CHECK(results["exec.allow: /usr/bin/ls"] == "dropped");
        CHECK(r.body["dropped"].get<int>() > 0);
        CHECK(d.call("GET", "/v1/profiles/cat/rules").status == 404);  // keeps no profile
    }
    // The export in the tool's place: the usual command runs as before; ls,
    // which the tool's own rules allow, is refused.
    std::ofstream(rules.path + "/recorded.yaml") << exported;
    Daemon d({}, rules.path);
    uint64_t id = task_with_notes(d, "recorded");
    auto usual = exec_ok(d, id, "recorded", "cat notes.txt");
    INFO(exported);
    INFO(usual.dump(1).substr(0, 6000));
    CHECK(usual["exit_status"] == 0);
    CHECK(usual["stdout"] == "notes\n");
    auto ls = exec_ok(d, id, "recorded", "ls");
    CHECK(ls["exit_status"] != 0);
    CHECK_THAT(ls["stderr"].get<std::string>(), Catch::Contains("Permission denied"));
    // The control: ls under the rules the export was cut from.
    uint64_t sh = task_with_notes(d, "stopped");
    auto control = exec_ok(d, sh, "stopped", "ls");
    CHECK(control["exit_status"] == 0);
    CHECK_THAT(control["stdout"].get<std::string>(), Catch::Contains("notes.txt"));
}

TEST_CASE("profiles: a task's own learned profile is what narrow narrows the task to", "[tasks][profiles]") {
    ProfiledRules rules;
    Daemon d({}, rules.path);
    // The tool learns cat in one task and wc in another: both are usual for it.
    uint64_t reader = task_with_notes(d, "tasknarrow"), counter = task_with_notes(d, "tasknarrow");
    for (int i = 0; i < 3; ++i) {
        CHECK(exec_ok(d, reader, "tasknarrow", "cat notes.txt")["profile"]["findings"].empty());
        CHECK(exec_ok(d, counter, "tasknarrow", "wc -l notes.txt")["profile"]["findings"].empty());
    }
    // wc in the reading task: new to the task, so the reading task is
    // narrowed to its own profile, where wc is not.
    auto odd = exec_ok(d, reader, "tasknarrow", "wc -l notes.txt");
    INFO(odd["profile"].dump());
    CHECK(odd["exit_status"] == 0);
    CHECK(odd["profile"]["response"] == "narrowed");
    CHECK(odd["profile"]["narrowed"]["profile"] == "task");
    CHECK(odd["profile"]["narrowed"]["profile_runs"] == 3);
    auto refused = exec_ok(d, reader, "tasknarrow", "wc -l notes.txt");
    CHECK(refused["exit_status"] != 0);
    CHECK_THAT(refused["stderr"].get<std::string>(), Catch::Contains("Permission denied"));
    CHECK(exec_ok(d, reader, "tasknarrow", "cat notes.txt")["stdout"] == "notes\n");
    // The control: wc, usual for the counting task, runs there.
    auto counted = exec_ok(d, counter, "tasknarrow", "wc -l notes.txt");
    CHECK(counted["exit_status"] == 0);
    CHECK(counted["profile"]["findings"].empty());
    CHECK_FALSE(d.call("GET", "/v1/tasks/" + std::to_string(counter)).body.contains("narrowed"));
}

TEST_CASE("profiles: a narrowing that cannot be made holds the tool instead", "[tasks][profiles]") {
    ProfiledRules rules;
    Daemon d({}, rules.path);
    uint64_t id = task_with_notes(d, "narrowed");
    learn_window(d, id, "narrowed");
    // The tool's file changes on disk after agentd loaded it: an export of
    // it would not be cut from the rules in force.
    std::ofstream(rules.path + "/narrowed.yaml")
        << "tool: narrowed\nextends: sh\nlimits: { pids: 8 }\nprofile:\n  learn: 3\n  respond: narrow\n";
    auto odd = exec_ok(d, id, "narrowed", "wc -l notes.txt");
    INFO(odd["profile"].dump());
    CHECK(odd["profile"]["response"] == "narrowed");
    CHECK_THAT(odd["profile"]["narrowed"]["held"].get<std::string>(), Catch::Contains("rule file changed"));
    auto held = d.exec(id, {{"tool", "narrowed"}, {"argv", {"sh", "-c", "cat notes.txt"}}});
    CHECK(held.status == 409);
    CHECK(held.body["error"]["code"] == "profile_hold");
    CHECK_THAT(held.body["error"]["message"].get<std::string>(), Catch::Contains("not narrowed"));
    auto epochs = d.call("GET", "/v1/audit?kind=policy_epoch&task=" + std::to_string(id));
    bool recorded = false;
    for (const auto& row : epochs.body["rows"]) recorded |= row["detail"]["change"] == "hold";
    CHECK(recorded);
    // The control: the task's other epochs and the grant update that
    // releases the hold work as for require-grant.
    REQUIRE(d.call("PUT", "/v1/tasks/" + std::to_string(id) + "/grant", json{{"grant", nullptr}}).status == 200);
    CHECK(exec_ok(d, id, "narrowed", "cat notes.txt")["exit_status"] == 0);
}

// The files a run opens, as the monitor recorded them (layer monitor).
std::set<std::string> opened(const json& exec_reply) {
    std::set<std::string> out;
    for (const auto& d : exec_reply["decisions"])
        if (d.value("layer", "") == "monitor" && d.value("op", "") == "file_open") out.insert(d.value("object", ""));
    return out;
}

TEST_CASE("profiles: a relative name is recorded and judged where it leads (working directory, descriptors, ..)",
          "[tasks][profiles]") {
    ProfiledRules rules;
    Daemon d({}, rules.path);
    uint64_t id = task_with_notes(d, "recorded");
    const std::string workdir = d.call("GET", "/v1/tasks/" + std::to_string(id)).body["workdir"];
    learn_window(d, id, "recorded");
    for (const char* dir : {"/sub", "/sub/deep"}) {
        REQUIRE(std::filesystem::create_directory(workdir + dir));
        REQUIRE(::chown((workdir + dir).c_str(), 65534, 65534) == 0);
    }
    write_file(workdir + "/sub/deep/f.txt", "hidden\n");

    // The controls: an absolute name is recorded as given; the usual relative
    // read, from the work directory, is the work directory's.
    auto usual = exec_ok(d, id, "recorded", "cat notes.txt");
    CHECK(opened(usual).contains(workdir + "/notes.txt"));
    auto absolute = exec_ok(d, id, "recorded", "cat /proc/filesystems");
    INFO(absolute["report"].dump(1).substr(0, 3000));
    INFO(absolute["profile"].dump());
    CHECK(opened(absolute).contains("/proc/filesystems"));

    // From another working directory.
    auto cd = exec_ok(d, id, "recorded", "cd sub/deep && cat f.txt");
    INFO(cd["decisions"].dump(1).substr(0, 6000));
    CHECK(cd["stdout"] == "hidden\n");
    CHECK(opened(cd).contains(workdir + "/sub/deep/f.txt"));
    // Through a directory descriptor (grep -r walks with openat(dirfd, name)).
    auto walk = exec_ok(d, id, "recorded", "grep -r hidden sub");
    CHECK(walk["exit_status"] == 0);
    CHECK(opened(walk).contains(workdir + "/sub/deep/f.txt"));

    // Out of the work directory by a relative name: the read succeeds (the
    // rules allow it) and its area is the one it reached, first-time for the
    // profile, not the work directory it was named from.
    auto out = exec_ok(d, id, "recorded", "cd /proc && cat filesystems >/dev/null && cd " + workdir +
                                                " && cat ../../../../../../../../proc/filesystems");
    INFO(out["profile"].dump());
    CHECK(out["exit_status"] == 0);
    CHECK(out["stdout"].get<std::string>().find("proc") != std::string::npos);
    CHECK(opened(out).contains("/proc/filesystems"));
    bool area = false;
    for (const auto& f : out["profile"]["findings"]) area |= f["feature"] == "file_area" && f["item"] == "read /proc";
    CHECK(area);
}
