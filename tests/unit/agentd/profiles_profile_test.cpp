// agentd/profiles: a run's features from its records, a profile learned and
// scored, and the book kept in a real audit store and rebuilt from it.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <filesystem>
#include <random>

#include "audit/audit_db.h"
#include "profiles/profile_book.h"

using namespace bulwark;
using namespace bulwark::profiles;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

audit::AuditRecord decision(uint16_t layer, uint16_t op, std::string object, uint8_t d = BW_DECISION_ALLOW,
                            std::string detail = {}) {
    audit::AuditRecord r;
    r.kind = audit::RecordKind::Decision;
    r.layer = layer;
    r.op = op;
    r.object = std::move(object);
    r.decision = d;
    r.detail = std::move(detail);
    return r;
}

json exit_detail(double wall_ms, uint64_t output = 100) {
    return {{"wall_us", uint64_t(wall_ms * 1000)}, {"cpu_user_us", 1000}, {"cpu_system_us", 500},
            {"peak_memory_bytes", 4 << 20},       {"output_bytes", output}, {"denials", json::array()}};
}

// One usual run of a fetcher: its binary, one destination, reads under /usr/lib.
RunFeatures usual_run(double wall_ms = 200) {
    RunFeatures f;
    policy::TaskVars vars = policy::task_vars("/work/t1", "task-1");
    f.add(decision(BW_LAYER_MONITOR, BW_OP_PROC_EXEC, "/usr/bin/curl", BW_DECISION_OBSERVE), vars);
    f.add(decision(BW_LAYER_SOCK_ADDR, BW_OP_CONNECT, "tcp 10.0.0.5:443"), vars);
    f.add(decision(BW_LAYER_BPF_LSM, BW_OP_FILE_OPEN, "/usr/lib/x86_64-linux-gnu/libcurl.so.4", BW_DECISION_ALLOW,
                   R"({"rights":1})"),
          vars);
    f.add_exit(exit_detail(wall_ms));
    return f;
}

struct TempStore {
    std::filesystem::path dir;
    std::unique_ptr<audit::AuditStore> store;
    TempStore() {
        static std::atomic<int> n{0};
        dir = std::filesystem::temp_directory_path() /
              ("bw-profiles-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
        std::filesystem::create_directories(dir);
        open();
    }
    void open() {
        audit::StoreOptions o;
        o.path = dir / "audit.db";
        o.min_free_bytes = 0;
        auto s = audit::AuditStore::open(std::move(o));
        if (!s) FAIL("open: " << s.error().message);
        store = std::move(*s);
    }
    void reopen() {
        store.reset();
        open();
    }
    ~TempStore() {
        store.reset();
        std::filesystem::remove_all(dir);
    }
};

// One run of `tool` through the book as the task manager drives it: the
// start record, each decision through the observer and into the store, the
// conclusion, the exit record.
RunVerdict drive_run(ProfileBook& book, audit::AuditStore& store, const std::string& tool, uint64_t run_id,
                     const std::vector<audit::AuditRecord>& decisions, const json& exit, bool* stopped = nullptr,
                     uint64_t task = 1) {
    store.enqueue(audit::run_start_record(task, run_id, tool, 1, {{"workdir", "/work/t1"}, {"argv", {tool}}}));
    bool stop_called = false;
    auto obs = book.observe(tool, task, run_id, policy::task_vars("/work/t1", "task-1"), [&] { stop_called = true; });
    REQUIRE(obs);
    for (auto d : decisions) {
        d.task_id = task;
        d.run_id = run_id;
        d.tool = tool;
        obs->on_decision(d);
        store.enqueue(d);
    }
    auto v = book.conclude(*obs, exit);
    json marked = exit;
    mark_concluded(marked, v);
    auto seq = store.enqueue(audit::run_exit_record(task, run_id, tool, "exit", 0, marked));
    REQUIRE(seq);
    book.exit_recorded(tool, *seq);
    if (stopped) *stopped = stop_called;
    return v;
}

std::vector<audit::AuditRecord> usual_decisions(std::string destination = "tcp 10.0.0.5:443") {
    return {decision(BW_LAYER_MONITOR, BW_OP_PROC_EXEC, "/usr/bin/curl", BW_DECISION_OBSERVE),
            decision(BW_LAYER_SOCK_ADDR, BW_OP_CONNECT, std::move(destination))};
}

policy::ProfilePlan plan(uint32_t learn, policy::ProfileResponse respond = policy::ProfileResponse::Record) {
    policy::ProfilePlan p;
    p.enabled = true;
    p.learn_runs = learn;
    p.respond = respond;
    return p;
}

}  // namespace

TEST_CASE("features: paths with the task's variables, areas, credential-like names", "[profiles]") {
    auto vars = policy::task_vars("/work/t1", "task-1", "/home/agent");
    CHECK(with_vars("/work/t1/src/main.py", vars) == "${workdir}/src/main.py");
    CHECK(with_vars("/work/t10/x", vars) == "/work/t10/x");  // a sibling, not under it
    CHECK(with_vars("/home/agent/.ssh/id_rsa", vars) == "${home}/.ssh/id_rsa");
    CHECK(with_vars("/usr/bin/env", vars) == "/usr/bin/env");
    CHECK(area_of("/usr/lib/python3.11/json/decoder.py") == "/usr/lib/python3.11");
    CHECK(area_of("${workdir}/src/a/b/c.py") == "${workdir}");  // the task's data: one area
    CHECK(with_vars("/work/t1/./src//a.py", vars) == "${workdir}/src/a.py");
    // A name that climbs out of the work directory is judged where it lands.
    CHECK(with_vars("/work/t1/src/../../../etc/passwd", vars) == "/etc/passwd");
    CHECK(with_vars("/work/t1/a/../b", vars) == "${workdir}/b");
    CHECK(with_vars("/../../etc", vars) == "/etc");
    CHECK(area_of(with_vars("/work/t1/../t2/x", vars)) == "/work/t2");
    CHECK(area_of("/etc/passwd") == "/etc");
    CHECK(area_of("/vmlinuz") == "/");
    for (auto p : {"/w/.env", "/w/.env.local", "/home/u/.ssh/config", "/w/deploy/server.pem", "/w/id_ed25519",
                   "/home/u/.aws/credentials", "/w/.git-credentials", "/w/.netrc"})
        CHECK(credential_like(p));
    for (auto p : {"/w/main.py", "/w/environment.md", "/usr/lib/ssl/openssl.cnf", "/w/config.json", "/w/keys.txt"})
        CHECK_FALSE(credential_like(p));

    RunFeatures f;
    auto added = f.add(decision(BW_LAYER_LANDLOCK, BW_OP_FILE_OPEN, "/work/t1/.env", BW_DECISION_DENY), vars);
    CHECK(f.sets["file_area"] == std::set<std::string>{"read ${workdir}"});
    CHECK(f.sets["secret"] == std::set<std::string>{"read ${workdir}/.env"});
    CHECK(added.size() == 2);
    CHECK(f.add(decision(BW_LAYER_LANDLOCK, BW_OP_FILE_OPEN, "/work/t1/.env", BW_DECISION_DENY), vars).empty());
    f.add(decision(BW_LAYER_SECCOMP, BW_OP_SYSCALL, "ptrace", BW_DECISION_DENY), vars);
    f.add(decision(BW_LAYER_MONITOR, BW_OP_PROC_FORK, "pid 7", BW_DECISION_OBSERVE), vars);
    f.add(decision(BW_LAYER_BPF_LSM, BW_OP_FILE_CREATE, "/work/t1/out/x.o"), vars);
    // The launch through the binary's descriptor, then a fileless exec.
    f.add(decision(BW_LAYER_MONITOR, BW_OP_PROC_EXEC, "/dev/fd/103", BW_DECISION_OBSERVE), vars);
    f.add(decision(BW_LAYER_MONITOR, BW_OP_PROC_EXEC, "/dev/fd/7", BW_DECISION_OBSERVE), vars);
    f.add(decision(BW_LAYER_MONITOR, BW_OP_PROC_EXEC, "/work/t1/run.sh", BW_DECISION_OBSERVE), vars);
    CHECK(f.sets["exec"] == std::set<std::string>{std::string(kLaunch), "/dev/fd/N", "${workdir}/run.sh"});
    // Opens the monitor saw, named relative to the tool's directory.
    f.add(decision(BW_LAYER_MONITOR, BW_OP_FILE_OPEN, "./secrets/.env", BW_DECISION_OBSERVE, R"({"rights":1})"), vars);
    f.add(decision(BW_LAYER_MONITOR, BW_OP_FILE_OPEN, ".kube/config", BW_DECISION_OBSERVE, R"({"rights":1})"), vars);
    CHECK(f.sets["secret"].contains("read ${workdir}/secrets/.env"));
    CHECK(f.sets["secret"].contains("read ${workdir}/.kube/config"));
    // An open's rights come from its detail: a write, a nested "rights" that is
    // not the open's own, an unreadable detail.
    f.add(decision(BW_LAYER_MONITOR, BW_OP_FILE_OPEN, "/var/log/a.log", BW_DECISION_OBSERVE,
                   R"({"container":{"rights":2},"dev":1,"ino":2,"rights":6})"),
          vars);
    f.add(decision(BW_LAYER_MONITOR, BW_OP_FILE_OPEN, "/srv/data/b", BW_DECISION_OBSERVE,
                   R"({"container":{"rights":2},"dev":1})"),
          vars);
    f.add(decision(BW_LAYER_MONITOR, BW_OP_FILE_OPEN, "/opt/x/c", BW_DECISION_OBSERVE, R"({"rights":)"), vars);
    CHECK(f.sets["file_area"].contains("write /var/log"));
    CHECK(f.sets["file_area"].contains("read /srv/data"));
    CHECK(f.sets["file_area"].contains("read /opt/x"));
    f.add_exit(exit_detail(1500, 4096));
    CHECK(f.sets["syscall"] == std::set<std::string>{"ptrace"});
    CHECK(f.sets["file_area"].contains("write ${workdir}"));
    CHECK(f.numbers["denials"] == 3);  // two file denials, one syscall
    CHECK(f.numbers["processes"] == 2);  // the tool and one fork
    CHECK(f.numbers["decisions"] == 13);
    CHECK(f.numbers["wall_ms"] == 1500);
    CHECK(f.numbers["output_kib"] == 4);
}

TEST_CASE("a number's median and MAD over its recent values, kept sorted as they come and go", "[profiles]") {
    auto brute = [](std::vector<double> v) {
        auto med = [](std::vector<double> x) {
            std::sort(x.begin(), x.end());
            size_t k = x.size() / 2;
            return x.size() % 2 ? x[k] : (x[k - 1] + x[k]) / 2;
        };
        double m = med(v);
        for (auto& x : v) x = std::fabs(x - m);
        return std::pair{m, med(v)};
    };
    std::mt19937 rng(7);
    NumberStats s;
    std::deque<double> window;
    for (int i = 0; i < 700; ++i) {
        // Repeated values, spread values, a jump: the window slides past kRecent.
        double v = i < 300 ? double(rng() % 9) : i < 500 ? double(rng() % 100000) / 7 : 5000 + double(rng() % 3);
        s.add(v);
        window.push_back(v);
        if (window.size() > kRecent) window.pop_front();
        auto [m, mad] = brute({window.begin(), window.end()});
        REQUIRE(s.median() == m);
        REQUIRE(s.mad() == mad);
    }
    CHECK(s.n() == 700);
    CHECK(s.recent() == window);
    auto back = NumberStats::from(window, s.max(), s.n());
    CHECK(back.median() == s.median());
    CHECK(back.mad() == s.mad());
}

TEST_CASE("a profile learns its window, then scores first-time items and far outliers", "[profiles]") {
    Profile p("curl", 5);
    for (int i = 0; i < 4; ++i) {
        CHECK(p.score(usual_run()).empty());  // learning: nothing is unusual yet
        p.learn(usual_run(180 + 10 * i));
    }
    CHECK(p.learning());
    p.learn(usual_run(220));
    CHECK_FALSE(p.learning());
    // The control: a usual run, a bit slower than any before, raises nothing.
    CHECK(p.score(usual_run(300)).empty());

    auto other = usual_run();
    other.add(decision(BW_LAYER_SOCK_ADDR, BW_OP_CONNECT, "tcp 203.0.113.9:443"), {});
    auto f = p.score(other);
    REQUIRE(f.size() == 1);
    CHECK(f[0].feature == "destination");
    CHECK(f[0].kind == "first-time");
    CHECK(f[0].message == "first-time destination connect tcp 203.0.113.9:443 in 5 runs");

    auto slow = p.score(usual_run(120000));  // the 200 ms tool looping for two minutes
    REQUIRE(slow.size() == 1);
    CHECK(slow[0].feature == "wall_ms");
    CHECK(slow[0].kind == "outlier");
    CHECK(slow[0].bound >= 1200);
    CHECK(slow[0].message.find("usual: median 200") != std::string::npos);

    // A run in flight judges its binaries and destinations against the view
    // of the profile it started with, which later learning does not change.
    auto view = p.live_view();
    CHECK_FALSE(view->score_item(kDestination, "connect tcp 10.0.0.5:443"));
    CHECK(view->score_item(kDestination, "connect tcp 203.0.113.9:443")->message == f[0].message);
    CHECK(view->score_item(kExec, "/usr/bin/nc"));
    CHECK_FALSE(view->score_item(kFileArea, "read /opt"));  // judged at the run's end only

    // Round trip: the same profile scores the same.
    auto back = Profile::from_json(p.to_json());
    CHECK(back.runs() == 5);
    CHECK(back.score(other).size() == 1);
    CHECK(back.score(usual_run(300)).empty());
    CHECK_FALSE(back.live_view()->score_item(kDestination, "connect tcp 10.0.0.5:443"));
    CHECK(back.to_json() == p.to_json());

    p.learn(other);
    CHECK_FALSE(p.live_view()->score_item(kDestination, "connect tcp 203.0.113.9:443"));
    CHECK(view->score_item(kDestination, "connect tcp 203.0.113.9:443"));

    p.set_pinned(true);
    p.learn(other);
    CHECK(p.runs() == 6);  // a pinned profile learns nothing
    p.reset();
    CHECK(p.learning());
    CHECK(p.score(other).empty());
}

TEST_CASE("the book: findings recorded before the exit, unusual runs not learned, rebuilt after a restart",
          "[profiles][store]") {
    TempStore ts;
    uint64_t run = 1;
    {
        ProfileBook book(ts.store.get());
        CHECK(book.load({{"curl", plan(3)}}).empty());
        CHECK(book.keeps("curl"));
        CHECK_FALSE(book.observe("sh", 1, 99, {}, {}));
        for (int i = 0; i < 3; ++i) {
            auto v = drive_run(book, *ts.store, "curl", run++, usual_decisions(), exit_detail(200));
            CHECK(v.learning);
            CHECK(v.learned);
            CHECK(v.findings.empty());
        }
        auto usual = drive_run(book, *ts.store, "curl", run++, usual_decisions(), exit_detail(210));
        CHECK_FALSE(usual.learning);
        CHECK(usual.findings.empty());
        CHECK(usual.profile_runs == 4);

        auto odd = drive_run(book, *ts.store, "curl", run++, usual_decisions("tcp 198.51.100.7:8443"), exit_detail(200));
        REQUIRE(odd.findings.size() == 1);
        CHECK(odd.response == "recorded");
        CHECK_FALSE(odd.learned);
        CHECK(odd.summary == "unusual for curl: first-time destination connect tcp 198.51.100.7:8443 in 4 runs");
        CHECK(odd.profile_runs == 4);
        REQUIRE(ts.store->flush(5s));
        // The finding record precedes the run's exit record.
        auto rows = ts.store->read_sql("SELECT kind FROM records WHERE run_id = 5 AND kind IN (3, 7) ORDER BY seq", 5s);
        REQUIRE(rows);
        CHECK(*rows == json::array({json::array({7}), json::array({3})}));
        auto got = book.get("curl");
        REQUIRE(got);
        CHECK((*got)["runs"] == 4);
        CHECK((*got)["profile"]["sets"]["destination"]["items"].size() == 1);
    }
    // A restart: the last snapshot (when the window filled) and the runs after it.
    ts.reopen();
    uint64_t finding_seq = 0;
    {
        ProfileBook book(ts.store.get());
        CHECK(book.load({{"curl", plan(3)}}).empty());
        auto got = book.get("curl");
        REQUIRE(got);
        CHECK((*got)["runs"] == 4);  // the unusual run was not learned
        CHECK((*got)["learning"] == false);
        auto again = drive_run(book, *ts.store, "curl", run++, usual_decisions("tcp 198.51.100.7:8443"), exit_detail(200));
        CHECK(again.findings.size() == 1);
        REQUIRE(ts.store->flush(5s));
        auto seq = ts.store->read_sql("SELECT max(seq) FROM records WHERE kind = 7", 5s);
        REQUIRE(seq);
        finding_seq = (*seq)[0][0].get<uint64_t>();
        // Accepted: that run is learned and the destination is usual from now on.
        auto acc = book.accept("curl", finding_seq);
        REQUIRE(acc);
        CHECK((*acc)["runs"] == 5);
        CHECK(book.accept("curl", finding_seq).error().code == ProfileError::Code::Accepted);  // once only
        auto after = drive_run(book, *ts.store, "curl", run++, usual_decisions("tcp 198.51.100.7:8443"), exit_detail(200));
        CHECK(after.findings.empty());
        CHECK_FALSE(book.accept("curl", 1));  // seq 1 is no finding
        CHECK(book.accept("wget", finding_seq).error().code == ProfileError::Code::UnknownTool);
        auto pinned = book.pin("curl", true);
        REQUIRE(pinned);
        CHECK((*pinned)["pinned"] == true);
        CHECK(book.accept("curl", finding_seq).error().code == ProfileError::Code::Pinned);
    }
    ts.reopen();
    {
        ProfileBook book(ts.store.get());
        CHECK(book.load({{"curl", plan(3)}}).empty());
        auto got = book.get("curl");
        REQUIRE(got);
        CHECK((*got)["runs"] == 6);
        CHECK((*got)["pinned"] == true);
        // Snapshots say what changed; an accepted finding stays accepted.
        auto changes = ts.store->read_sql(
            "SELECT json_extract(detail, '$.change') FROM records WHERE kind = 8 ORDER BY seq", 5s);
        REQUIRE(changes);
        CHECK(*changes == json::array({json::array({"learned"}), json::array({"accept"}), json::array({"pin"})}));
        CHECK(book.pin("curl", false));
        CHECK(book.accept("curl", finding_seq).error().code == ProfileError::Code::Accepted);
        auto r = book.reset("curl");
        REQUIRE(r);
        CHECK((*r)["learning"] == true);
        CHECK((*r)["runs"] == 0);
    }
}

TEST_CASE("the book: a restart replays the runs after the last snapshot, one that spanned it too",
          "[profiles][store]") {
    TempStore ts;
    json live;
    {
        ProfileBook book(ts.store.get());
        CHECK(book.load({{"curl", plan(3)}}).empty());
        // Run 100 starts, and its first records land, before the snapshot
        // taken when the window fills ...
        const uint64_t task = 1, spanning = 100;
        ts.store->enqueue(audit::run_start_record(task, spanning, "curl", 1, {{"workdir", "/work/t1"}}));
        auto obs = book.observe("curl", task, spanning, policy::task_vars("/work/t1", "task-1"), {});
        REQUIRE(obs);
        auto early = decision(BW_LAYER_MONITOR, BW_OP_PROC_EXEC, "/usr/bin/curl", BW_DECISION_OBSERVE);
        early.task_id = task;
        early.run_id = spanning;
        early.tool = "curl";
        obs->on_decision(early);
        ts.store->enqueue(early);
        for (uint64_t run = 1; run <= 3; ++run) drive_run(book, *ts.store, "curl", run, usual_decisions(), exit_detail(200));
        REQUIRE(ts.store->flush(5s));
        auto snaps = ts.store->read_sql("SELECT count(*) FROM records WHERE kind = 8", 5s);
        REQUIRE(snaps);
        CHECK((*snaps)[0][0] == 1);
        // ... and ends after it, usual: learned.
        auto late = decision(BW_LAYER_SOCK_ADDR, BW_OP_CONNECT, "tcp 10.0.0.5:443");
        late.task_id = task;
        late.run_id = spanning;
        late.tool = "curl";
        obs->on_decision(late);
        ts.store->enqueue(late);
        auto v = book.conclude(*obs, exit_detail(230));
        CHECK(v.findings.empty());
        CHECK(v.learned);
        json marked = exit_detail(230);
        mark_concluded(marked, v);
        auto seq = ts.store->enqueue(audit::run_exit_record(task, spanning, "curl", "exit", 0, marked));
        REQUIRE(seq);
        book.exit_recorded("curl", *seq);
        // Usual runs after the snapshot, and one with a finding (not learned).
        for (uint64_t run = 4; run <= 6; ++run) drive_run(book, *ts.store, "curl", run, usual_decisions(), exit_detail(200));
        CHECK(drive_run(book, *ts.store, "curl", 7, usual_decisions("udp 10.9.9.9:53"), exit_detail(200)).findings.size() == 1);
        auto got = book.get("curl");
        REQUIRE(got);
        CHECK((*got)["runs"] == 7);
        live = (*got)["profile"];
        // Runs no book concluded: one abandoned by a daemon that died (its
        // exit written at the next start), and a container's (no task). The
        // replay must not learn them.
        auto unconcluded = [&](uint64_t task_id, uint64_t run_id, std::string reason) {
            ts.store->enqueue(audit::run_start_record(task_id, run_id, "curl", 1, {{"workdir", "/work/t1"}}));
            auto d = decision(BW_LAYER_MONITOR, BW_OP_PROC_EXEC, "/usr/bin/nc", BW_DECISION_OBSERVE);
            d.task_id = task_id;
            d.run_id = run_id;
            d.tool = "curl";
            ts.store->enqueue(d);
            ts.store->enqueue(audit::run_exit_record(task_id, run_id, "curl", reason, -1, json::object()));
        };
        unconcluded(1, 200, "abandoned");
        unconcluded(0, 201, "deleted");
    }
    // A restart: the profile a fresh book rebuilds from the store.
    auto rebuilt = [&] {
        REQUIRE(ts.store->flush(5s));
        ts.reopen();
        ProfileBook book(ts.store.get());
        CHECK(book.load({{"curl", plan(3)}}).empty());
        auto got = book.get("curl");
        REQUIRE(got);
        return (*got)["profile"];
    };
    CHECK(rebuilt() == live);
    // An exit record written before exit records said whether the run was
    // learned: learned unless a finding was recorded for it.
    ts.store->enqueue(audit::run_start_record(1, 300, "curl", 1, {{"workdir", "/work/t1"}}));
    ts.store->enqueue(audit::run_exit_record(1, 300, "curl", "exit", 0, exit_detail(210)));
    CHECK(rebuilt()["runs"] == 8);
}

TEST_CASE("the book: a task's own profile finds what is usual for the tool but not for the task",
          "[profiles][store]") {
    TempStore ts;
    auto p = plan(6);
    p.task_learn_runs = 3;
    uint64_t run = 1;
    const std::string a = "tcp 10.0.0.5:443", b = "tcp 10.0.0.6:443";
    {
        ProfileBook book(ts.store.get());
        CHECK(book.load({{"curl", p}}).empty());
        // Two tasks, each with its own destination: the tool learns both.
        for (int i = 0; i < 3; ++i) {
            auto v1 = drive_run(book, *ts.store, "curl", run++, usual_decisions(a), exit_detail(200), nullptr, 1);
            auto v2 = drive_run(book, *ts.store, "curl", run++, usual_decisions(b), exit_detail(200), nullptr, 2);
            CHECK(v1.findings.empty());
            CHECK(v2.findings.empty());
            REQUIRE(v2.task);
            CHECK(v2.task->task_id == 2);
            CHECK(v2.task->runs == uint64_t(i + 1));
        }
        // Usual for the tool, first-time for task 1: its own profile finds it.
        auto odd = drive_run(book, *ts.store, "curl", run++, usual_decisions(b), exit_detail(200), nullptr, 1);
        REQUIRE(odd.findings.size() == 1);
        CHECK(odd.findings[0].task_id == 1);
        CHECK(odd.summary == "unusual for curl: first-time destination connect " + b + " in 3 runs of task 1");
        CHECK_FALSE(odd.learned);
        CHECK(odd.task->runs == 3);  // not learned by the task either
        // The controls: the same run in a task still learning its own, and
        // task 1's usual run.
        auto fresh = drive_run(book, *ts.store, "curl", run++, usual_decisions(b), exit_detail(200), nullptr, 3);
        CHECK(fresh.findings.empty());
        CHECK(fresh.task->learning);
        CHECK(drive_run(book, *ts.store, "curl", run++, usual_decisions(a), exit_detail(200), nullptr, 1).findings.empty());

        auto got = book.get("curl");
        REQUIRE(got);
        CHECK((*got)["tasks"].size() == 3);
        CHECK((*got)["task_learn_runs"] == 3);
        auto t1 = book.get("curl", 1);
        REQUIRE(t1);
        CHECK((*t1)["profile"]["task_id"] == 1);
        CHECK((*t1)["profile"]["sets"]["destination"]["items"].size() == 1);
        CHECK(book.get("curl", 99).error().code == ProfileError::Code::UnknownTask);
        // A pinned task profile learns nothing; the tool's learns on.
        auto pinned = book.pin("curl", true, 1);
        REQUIRE(pinned);
        CHECK((*pinned)["pinned"] == true);
        CHECK((*pinned)["runs"] == 4);
        const auto tool_runs = book.get("curl")->at("runs").get<uint64_t>();
        CHECK(drive_run(book, *ts.store, "curl", run++, usual_decisions(a), exit_detail(200), nullptr, 1).learned);
        CHECK(book.get("curl", 1)->at("profile")["runs"] == 4);
        CHECK(book.get("curl")->at("runs") == tool_runs + 1);
        CHECK(book.pin("curl", true, 99).error().code == ProfileError::Code::UnknownTask);
        REQUIRE(book.pin("curl", false, 1));
        // A closed task's profile goes with it: a later run of that id learns anew.
        book.end_task(1);
        CHECK(book.get("curl")->at("tasks").size() == 2);
        auto again = drive_run(book, *ts.store, "curl", run++, usual_decisions(b), exit_detail(200), nullptr, 1);
        CHECK(again.findings.empty());
        CHECK(again.task->learning);
        REQUIRE(ts.store->flush(5s));
        // The tasks' profiles were recorded when their windows filled, and at each edit.
        auto recs = ts.store->read_sql("SELECT task_id, json_extract(detail, '$.change') FROM records "
                                       "WHERE kind = 8 AND task_id IS NOT NULL ORDER BY seq", 5s);
        REQUIRE(recs);
        CHECK(*recs == json::parse(R"([[1, "learned"], [2, "learned"], [1, "pin"], [1, "unpin"]])"));
    }
    // A restart rebuilds the tool's profile from its own snapshot, not a task's.
    ts.reopen();
    ProfileBook book(ts.store.get());
    CHECK(book.load({{"curl", p}}).empty());
    auto got = book.get("curl");
    REQUIRE(got);
    CHECK((*got)["runs"] == 10);  // 6 + the new task's + task 1's two usual + its run after close
    CHECK((*got)["tasks"].empty());
}

TEST_CASE("the book: respond stop ends a run at its first first-time binary", "[profiles][store]") {
    TempStore ts;
    ProfileBook book(ts.store.get());
    CHECK(book.load({{"sh", plan(3, policy::ProfileResponse::Stop)}}).empty());
    std::vector<audit::AuditRecord> usual = {decision(BW_LAYER_MONITOR, BW_OP_PROC_EXEC, "/usr/bin/sh", BW_DECISION_OBSERVE)};
    for (uint64_t run = 1; run <= 3; ++run) {
        bool stopped = true;
        drive_run(book, *ts.store, "sh", run, usual, exit_detail(5), &stopped);
        CHECK_FALSE(stopped);  // learning: never stopped
    }
    bool stopped = false;
    auto control = drive_run(book, *ts.store, "sh", 4, usual, exit_detail(5), &stopped);
    CHECK_FALSE(stopped);
    CHECK(control.findings.empty());
    auto odd = usual;
    odd.push_back(decision(BW_LAYER_MONITOR, BW_OP_PROC_EXEC, "/usr/bin/nc", BW_DECISION_OBSERVE));
    auto v = drive_run(book, *ts.store, "sh", 5, odd, exit_detail(5), &stopped);
    CHECK(stopped);
    CHECK(v.response == "stopped");
    REQUIRE(v.findings.size() == 1);
    CHECK(v.findings[0].message == "first-time binary /usr/bin/nc in 4 runs");
}
