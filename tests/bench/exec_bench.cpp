// exec_bench: what the daemon's exec API adds to a tool run. Interleaved
// round by round, the same tool (cat of a small file) under the same
// instantiated rules:
//   run_tool   the sandboxed run alone (what `agentd run` does once the rule
//              file is compiled), in this process;
//   API exec   POST /v1/tasks/{id}/exec over the unix socket of a real
//              server in this process: request parsing, the task's epoch, the
//              committed run_start record (FULL sync), the run, run_exit, the
//              run's decisions read back, the JSON reply;
//   agentd run the one-shot CLI as a user runs it (compiles the rule file).
//   exec_bench [rounds]
#include <sys/socket.h>
#include <sys/un.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "audit/audit_db.h"
#include "audit/event_bus.h"
#include "api/http_api.h"
#include "api/http_server.h"
#include "api/http_tasks.h"
#include "audit/metrics.h"
#include "bench_stats.h"
#include "private_runtime.h"
#include "sandbox/spawner.h"
#include "tasks/run_binding.h"
#include "tasks/tasks.h"
#include "tasks/tool_catalog.h"

using namespace bulwark;
using Clock = std::chrono::steady_clock;
using bench::stats;
using nlohmann::json;

namespace {


// One HTTP/1.1 request on a fresh unix-socket connection; the body of the reply.
std::string post(const std::string& sock, const std::string& target, const std::string& body) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", sock.c_str());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        std::perror("connect");
        std::exit(1);
    }
    std::string req = "POST " + target + " HTTP/1.1\r\nHost: agentd\r\nConnection: close\r\nContent-Type: "
                      "application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    if (::write(fd, req.data(), req.size()) != ssize_t(req.size())) std::exit(1);
    std::string resp;
    char buf[65536];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) resp.append(buf, size_t(n));
    ::close(fd);
    auto p = resp.find("\r\n\r\n");
    return p == std::string::npos ? std::string() : resp.substr(p + 4);
}

double since_us(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

}  // namespace

int main(int argc, char** argv) {
    int rounds = argc > 1 ? std::atoi(argv[1]) : 100;
    if (geteuid() != 0) {
        std::fprintf(stderr, "exec_bench: needs root (it runs sandboxes)\n");
        return 77;
    }
    namespace fs = std::filesystem;
    char tmpl[] = "/var/tmp/bulwark-exec-bench-XXXXXX";
    fs::path root = ::mkdtemp(tmpl);
    fs::permissions(root, fs::perms(0711));

    Metrics metrics;
    audit::EventBus bus(&metrics);
    auto store = audit::AuditStore::open({.path = root / "audit.db"}, &metrics, &bus);
    if (!store) return std::fprintf(stderr, "store: %s\n", store.error().message.c_str()), 1;
    // The store as a running daemon has it: its write-ahead log checkpointed
    // and restarted, so each commit overwrites blocks the log already has.
    // A fresh database's log grows with every commit, and an fdatasync that
    // extends a file also commits the filesystem's journal (2-5x slower on
    // this disk); that is a state of the first minutes, not of the service.
    uint64_t warm_rows = 0;
    for (std::error_code ec; fs::file_size(root / "audit.db-wal", ec) < (6u << 20) || ec;) {
        for (int i = 0; i < 2000; ++i, ++warm_rows) {
            audit::AuditRecord r;
            r.ts_ns = int64_t(warm_rows);
            r.task_id = 1 + warm_rows % 50;
            r.run_id = warm_rows / 20;
            r.tool = "cat";
            r.layer = BW_LAYER_BPF_LSM;
            r.op = BW_OP_FILE_OPEN;
            r.object = "/usr/lib/x86_64-linux-gnu/libc.so.6";
            r.decision = BW_DECISION_ALLOW;
            (*store)->enqueue(std::move(r));
        }
        (*store)->flush(std::chrono::seconds(60));
        if (warm_rows > 400000) break;
    }
    auto catalog = ToolCatalog::load(BULWARK_RULES_DIR);
    if (!catalog) return std::fprintf(stderr, "rules: %s\n", catalog.error().c_str()), 1;
    // The BPF layer as the daemon has it (the shipped rules hold some rules
    // only there: unix sockets no rule names), on a pin root and cgroup
    // parent of this benchmark alone. Both the API and the direct run are
    // bound to it.
    test::PrivateRuntime bpf("bulwark-exec-bench-" + std::to_string(::getpid()));
    if (!bpf.rt) return std::fprintf(stderr, "BPF runtime: %s\n", bpf.error.c_str()), 1;
    DecisionSources sources;
    sources.bpf = bpf.rt.get();
    TaskManager tasks(*catalog, store->get(), {.work_root = root / "work", .sources = sources});
    http::Router router;
    http::register_task_routes(router, {.catalog = &*catalog, .tasks = &tasks, .store = store->get()});
    http::ServerConfig cfg;
    std::string sock = (root / "agentd.sock").string();
    cfg.unix_path = sock;
    cfg.allowed_uids = {0};
    auto server = http::HttpServer::start(cfg, router, &metrics);
    if (!server) return std::fprintf(stderr, "server: %s\n", server.error().c_str()), 1;

    auto created = json::parse(post(sock, "/v1/tasks", json{{"tools", {"cat"}}}.dump()));
    uint64_t id = created["id"];
    std::string workdir = created["workdir"];
    std::ofstream(workdir + "/notes.txt") << "hello\n";
    if (::chown((workdir + "/notes.txt").c_str(), 65534, 65534) != 0)
        return std::fprintf(stderr, "chown %s/notes.txt: %s\n", workdir.c_str(), std::strerror(errno)), 1;
    auto bundle = tasks.tool_bundle(id, "cat", true);
    RunRequest rr;
    rr.argv = {"cat", "notes.txt"};
    rr.workdir = workdir;
    rr.caller_env = std::vector<std::pair<std::string, std::string>>{};
    std::string exec_body = json{{"tool", "cat"}, {"argv", {"cat", "notes.txt"}}}.dump();
    std::string target = "/v1/tasks/" + std::to_string(id) + "/exec";
    std::string cli = std::string(AGENTD_BINARY) + " run --rules " BULWARK_RULES_DIR " --tool cat --workdir " + workdir +
                      " -- cat notes.txt >/dev/null 2>&1";

    // The sandboxed run alone, bound to the BPF layer as an exec's run is.
    uint64_t direct_run = 1u << 30;
    std::vector<double> binding_us;  // prepare + finish of the run's binding
    auto run_direct = [&] {
        RunRequest req = rr;
        auto t0 = Clock::now();
        RunBinding binding(sources, *bundle, RunContext{0, ++direct_run, "cat", 0, bundle});
        binding.prepare(req);
        double bind = since_us(t0);
        RunReport r = run_tool(*bundle, req);
        t0 = Clock::now();
        binding.finish(r);
        binding_us.push_back(bind + since_us(t0));
        return r;
    };
    // warm-up
    run_direct();
    post(sock, target, exec_body);
    std::vector<double> direct, api, oneshot;
    for (int i = 0; i < rounds; ++i) {
        auto t0 = Clock::now();
        auto r = run_direct();
        direct.push_back(since_us(t0));
        if (r.exit_status() != 0) return std::fprintf(stderr, "run_tool failed: %s\n", summary(r).c_str()), 1;
        t0 = Clock::now();
        auto e = json::parse(post(sock, target, exec_body), nullptr, false);
        api.push_back(since_us(t0));
        if (e.is_discarded() || e["exit_status"] != 0) return std::fprintf(stderr, "exec failed\n"), 1;
        if (i % 5 == 0) {
            t0 = Clock::now();
            if (std::system(cli.c_str()) != 0) return std::fprintf(stderr, "agentd run failed\n"), 1;
            oneshot.push_back(since_us(t0));
        }
    }
    // What one durable commit costs on this filesystem: a 4 KiB append + fdatasync.
    std::vector<double> syncs;
    {
        int fd = ::open((root / "fsync-probe").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        char page[4096] = {};
        for (int i = 0; i < 50; ++i) {
            auto t0 = Clock::now();
            if (::write(fd, page, sizeof page) != ssize_t(sizeof page) || ::fdatasync(fd) != 0) break;
            syncs.push_back(since_us(t0));
        }
        ::close(fd);
    }
    auto d = stats(direct), a = stats(api), o = stats(oneshot), f = stats(syncs);
    std::printf("cat notes.txt under rules/cat.yaml, %d interleaved rounds (microseconds)\n", rounds);
    std::printf("%-44s %10s %10s %10s\n", "variant", "p50", "p99", "mean");
    std::printf("%-44s %10.0f %10.0f %10.0f\n", "run_tool + BPF binding (the run alone)", d.p50, d.p99, d.mean);
    std::printf("%-44s %10.0f %10.0f %10.0f\n", "POST /v1/tasks/{id}/exec (unix socket)", a.p50, a.p99, a.mean);
    std::printf("%-44s %10.0f %10.0f %10.0f\n", "agentd run CLI (every 5th round)", o.p50, o.p99, o.mean);
    auto b = stats(binding_us);
    std::printf("%-44s %10.0f %10.0f %10.0f\n", "  of which the BPF binding (attach, release)", b.p50, b.p99, b.mean);
    std::printf("exec API adds: p50 %+.2f ms, mean %+.2f ms over the run alone (target <= 1 ms); ratio p50 %.2fx\n",
                (a.p50 - d.p50) / 1000, (a.mean - d.mean) / 1000, a.p50 / d.p50);
    std::printf("exec API vs agentd run CLI: p50 %.2fx\n", a.p50 / o.p50);
    std::printf("store warmed with %llu rows first (write-ahead log checkpointed and restarted, as in a running daemon)\n",
                static_cast<unsigned long long>(warm_rows));
    std::printf("one 4 KiB append + fdatasync here: p50 %.2f ms, p99 %.2f ms (the run's start and exit records "
                "each commit with synchronous=FULL)\n", f.p50 / 1000, f.p99 / 1000);
    server->reset();
    std::error_code ec;
    fs::remove_all(root, ec);
    return 0;
}
