// Load: 50 concurrent tasks, each running 20 tools through the API of one
// real agentd. Afterwards: every run has its committed start and exit
// records, no record was lost (no gap records, nothing dropped), and nothing
// is left behind (no run cgroup, no descriptor of agentd's beyond its start).
#include <catch2/catch.hpp>

#include <dirent.h>

#include <atomic>
#include <map>
#include <filesystem>
#include <thread>
#include <vector>

#include "daemon.h"
#include "sandbox/ns_net.h"

using namespace bulwark::test;

namespace {

std::map<std::string, int> open_fds(pid_t pid) {
    std::map<std::string, int> kinds;  // target (sockets and pipes by type) -> count
    for (auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
        std::error_code ec;
        std::string t = std::filesystem::read_symlink(e.path(), ec).string();
        if (auto b = t.find(":["); b != std::string::npos) t = t.substr(0, b);
        ++kinds[t];
    }
    return kinds;
}

// Every descriptor but the pooled network namespaces: the pool keeps up to
// NetnsPool::kMaxFree of them free for reuse, as many as the runs ever used
// at once, which the warm-up need not reach.
size_t total(const std::map<std::string, int>& m) {
    size_t n = 0;
    for (auto& [k, v] : m)
        if (k != "net") n += size_t(v);
    return n;
}

}  // namespace

TEST_CASE("50 concurrent tasks x 20 tools: zero lost records, nothing leaked", "[tasks][load]") {
    Daemon d;
    constexpr int kTasks = 50, kRuns = 20;
    std::mutex fm;
    std::vector<std::string> failures;
    // One round: kTasks threads, each creating a task and running `runs` tools.
    auto round = [&](int runs, std::vector<uint64_t>& ids) {
        std::atomic<int> ok{0};
        ids.assign(kTasks, 0);
        std::vector<std::thread> threads;
        for (int t = 0; t < kTasks; ++t)
            threads.emplace_back([&, t] {
                auto r = d.call("POST", "/v1/tasks", json{{"tools", {"cat", "sh", "wc"}}, {"label", "load " + std::to_string(t)}});
                if (r.status != 201) {
                    std::lock_guard lk(fm);
                    failures.push_back(r.raw.substr(0, 600));
                    return;
                }
                uint64_t id = r.body["id"];
                ids[t] = id;
                std::string workdir = r.body["workdir"];
                write_file(workdir + "/in.txt", "line " + std::to_string(t) + "\n");
                for (int i = 0; i < runs; ++i) {
                    json body;
                    switch (i % 3) {
                    case 0: body = {{"tool", "cat"}, {"argv", {"cat", "in.txt"}}}; break;
                    case 1: body = {{"tool", "wc"}, {"argv", {"wc", "-l", "in.txt"}}}; break;
                    default: body = {{"tool", "sh"}, {"argv", {"sh", "-c", "cat in.txt > out" + std::to_string(i) + ".txt"}}};
                    }
                    auto e = d.call("POST", "/v1/tasks/" + std::to_string(id) + "/exec", body, 300s);
                    if (e.status == 200 && e.body["exit_status"] == 0) {
                        ++ok;
                    } else {
                        std::lock_guard lk(fm);
                        if (failures.size() < 5) failures.push_back(e.raw.substr(0, 600));
                    }
                }
                d.call("DELETE", "/v1/tasks/" + std::to_string(id));
            });
        for (auto& th : threads) th.join();
        return ok.load();
    };

    // Warm-up at the same concurrency: the daemon's caches (recycled network
    // namespaces, SQLite reader connections) reach their working size.
    std::vector<uint64_t> warm_ids, ids;
    CHECK(round(2, warm_ids) == kTasks * 2);
    auto fds_before = open_fds(d.child->pid);

    auto t0 = std::chrono::steady_clock::now();
    int ok = round(kRuns, ids);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (auto& f : failures) UNSCOPED_INFO(f);
    CHECK(failures.empty());
    CHECK(ok == kTasks * kRuns);
    WARN(kTasks * kRuns << " runs through the API in " << secs << " s (" << (kTasks * kRuns / secs) << " runs/s)");

    // Every run: a committed start and exit record, and no loss anywhere.
    auto db = std::filesystem::path(d.state) / "audit.db";
    std::string ids_sql;
    for (auto id : ids) ids_sql += (ids_sql.empty() ? "" : ",") + std::to_string(id);
    CHECK(sql_value(db, "SELECT count(DISTINCT run_id) FROM records WHERE kind = 2 AND task_id IN (" + ids_sql + ")") ==
          std::to_string(kTasks * kRuns));
    CHECK(sql_value(db, "SELECT count(DISTINCT run_id) FROM records WHERE kind = 3 AND task_id IN (" + ids_sql + ")") ==
          std::to_string(kTasks * kRuns));
    CHECK(sql_value(db, "SELECT count(*) FROM records WHERE kind = 5") == "0");
    auto health = d.call("GET", "/v1/health").body;
    CHECK(health["audit"]["dropped"] == 0);

    // Nothing left behind: no run cgroup, and ten times the runs of the
    // warm-up left agentd with no more descriptors than the warm-up did.
    CHECK(run_leaves("bulwark-run-" + std::to_string(d.child->pid) + "-").count == 0);
    // A connection the client just closed may still be open on the server's
    // side for a moment: a leak is what is still there after two seconds.
    auto fds_after = open_fds(d.child->pid);
    for (int i = 0; i < 40 && total(fds_after) > total(fds_before); ++i) {
        std::this_thread::sleep_for(50ms);
        fds_after = open_fds(d.child->pid);
    }
    for (auto& [k, v] : fds_after) UNSCOPED_INFO(k << ": " << v << " (after warm-up " << fds_before[k] << ")");
    CHECK(total(fds_after) <= total(fds_before));
    CHECK(fds_after["net"] <= int(bulwark::NetnsPool::kMaxFree));  // the pool's, all free: no run is left
}
