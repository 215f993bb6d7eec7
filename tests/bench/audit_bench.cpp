// Audit path benchmark: synthetic bw_event records through the whole store
// path (enrich -> enqueue -> writer thread -> committed) against a raw
// batched SQLite insert of the same rows into the same schema, interleaved
// in one run; event-to-committed latency at a paced load; idle RSS of
// `agentd serve`.
//
//   audit_bench [--rows N] [--rounds R] [--agentd PATH] [--dir DIR]
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "audit/audit_db.h"
#include "bench_stats.h"
#include "audit/audit_record.h"

using namespace bulwark;
using namespace bulwark::audit;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

bw_event synth(uint64_t i, bool deny_mix) {
    bw_event ev{};
    ev.ts_ns = 1'000'000'000ull + i;
    ev.cgroup_id = 77;
    ev.policy_version = 3;
    ev.policy_id = 1;
    ev.rule_id = i % 4 ? BW_NO_RULE : uint32_t(i % 50);
    ev.pid = ev.tgid = 1000 + uint32_t(i % 64);
    ev.layer = i % 3 ? BW_LAYER_BPF_LSM : BW_LAYER_MONITOR;
    ev.op = BW_OP_FILE_OPEN;
    ev.decision = deny_mix && i % 100 == 0 ? BW_DECISION_DENY : (i % 3 ? BW_DECISION_ALLOW : BW_DECISION_OBSERVE);
    ev.obj_kind = BW_OBJ_FILE;
    std::memcpy(ev.comm, "python3", 8);
    std::snprintf(ev.obj.file.path, sizeof ev.obj.file.path, "/home/agent/work/src/module_%llu.py",
                  (unsigned long long)(i % 997));
    ev.obj.file.rights = BW_FS_READ;
    return ev;
}

RunContext ctx_for(uint64_t i) {
    static const char* tools[] = {"git", "python", "npm", "curl"};
    return RunContext{.task_id = 1 + i % 8, .run_id = 100 + i % 32, .tool = tools[i % 4]};
}

double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}
double pct(std::vector<double>& v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

// A: the store's own path. Returns rows/s (enqueue of the first row to the
// watermark covering the last).
double run_store(const fs::path& db, uint64_t rows, bool deny_mix, uint64_t* dropped, double* per_cpu) {
    auto s = AuditStore::open(bulwark::bench::bench_store_options(db));
    if (!s) {
        std::fprintf(stderr, "open: %s\n", s.error().message.c_str());
        std::exit(1);
    }
    int64_t off = boot_to_realtime_offset_ns();
    auto t0 = Clock::now();
    double c0 = cpu_seconds();
    uint64_t drops = 0;
    for (uint64_t i = 0; i < rows; ++i) {
        auto ev = synth(i, deny_mix);
        if (!(*s)->enqueue(decision_from_event(ev, ctx_for(i), off))) ++drops;
    }
    (*s)->flush(std::chrono::minutes(5));
    auto t1 = Clock::now();
    *per_cpu = double(rows) / (cpu_seconds() - c0);
    *dropped += drops;
    return double(rows) / std::chrono::duration<double>(t1 - t0).count();
}

// B: the same rows, converted the same way, inserted by hand in batches of
// the same size on one thread (no queue, no second thread).
double run_raw(const fs::path& db, uint64_t rows, bool deny_mix, size_t batch, double* per_cpu) {
    { auto s = AuditStore::open(bulwark::bench::bench_store_options(db)); }  // same schema and indexes
    sqlite3* h = nullptr;
    sqlite3_open(db.c_str(), &h);
    sqlite3_exec(h, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-8192", nullptr, nullptr,
                 nullptr);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(h,
                       "INSERT INTO records(seq,kind,ts_ns,task_id,run_id,tool,policy_version,rule_id,rule_file,"
                       "rule_line,rule_text,layer,op,object,decision,errno,pid,comm,detail) VALUES(?1,?2,?3,?4,?5,?6,"
                       "?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19)",
                       -1, &st, nullptr);
    int64_t off = boot_to_realtime_offset_ns();
    auto t0 = Clock::now();
    double c0 = cpu_seconds();
    std::vector<AuditRecord> b;
    b.reserve(batch);
    auto flush = [&] {
        sqlite3_exec(h, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
        for (auto& r : b) {
            sqlite3_bind_int64(st, 1, int64_t(r.seq));
            sqlite3_bind_int(st, 2, int(r.kind));
            sqlite3_bind_int64(st, 3, r.ts_ns);
            sqlite3_bind_int64(st, 4, int64_t(r.task_id));
            sqlite3_bind_int64(st, 5, int64_t(r.run_id));
            sqlite3_bind_text(st, 6, r.tool.data(), int(r.tool.size()), SQLITE_STATIC);
            sqlite3_bind_int64(st, 7, int64_t(r.policy_version));
            if (r.rule_id != BW_NO_RULE) sqlite3_bind_int64(st, 8, r.rule_id); else sqlite3_bind_null(st, 8);
            sqlite3_bind_null(st, 9);
            sqlite3_bind_null(st, 10);
            sqlite3_bind_null(st, 11);
            sqlite3_bind_int(st, 12, r.layer);
            sqlite3_bind_int(st, 13, r.op);
            sqlite3_bind_text(st, 14, r.object.data(), int(r.object.size()), SQLITE_STATIC);
            sqlite3_bind_int(st, 15, r.decision);
            sqlite3_bind_int(st, 16, r.err);
            sqlite3_bind_int64(st, 17, r.pid);
            sqlite3_bind_text(st, 18, r.comm.data(), int(r.comm.size()), SQLITE_STATIC);
            if (r.detail.empty()) sqlite3_bind_null(st, 19);
            else sqlite3_bind_text(st, 19, r.detail.data(), int(r.detail.size()), SQLITE_STATIC);
            sqlite3_step(st);
            sqlite3_reset(st);
        }
        sqlite3_exec(h, "COMMIT", nullptr, nullptr, nullptr);
        b.clear();
    };
    for (uint64_t i = 0; i < rows; ++i) {
        auto r = decision_from_event(synth(i, deny_mix), ctx_for(i), off);
        r.seq = i + 1;
        b.push_back(std::move(r));
        if (b.size() == batch) flush();
    }
    if (!b.empty()) flush();
    auto t1 = Clock::now();
    *per_cpu = double(rows) / (cpu_seconds() - c0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return double(rows) / std::chrono::duration<double>(t1 - t0).count();
}

struct LatencyProbe final : CommitListener {
    std::mutex mu;
    std::vector<double> ms;
    void on_committed(std::span<const AuditRecord> batch) override {
        auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
        std::lock_guard lk(mu);
        for (auto& r : batch) ms.push_back(double(now - r.enqueued_mono_ns) / 1e6);
    }
};

// Event-to-committed latency at a paced rate (rows/s) for `seconds`.
std::pair<double, double> run_latency(const fs::path& db, double rate, double seconds, bool deny_mix) {
    LatencyProbe probe;
    auto s = AuditStore::open(bulwark::bench::bench_store_options(db), nullptr, &probe);
    int64_t off = boot_to_realtime_offset_ns();
    auto t0 = Clock::now();
    uint64_t total = uint64_t(rate * seconds);
    // pace in bursts of 100 rows, like a ring buffer reader's wake-ups
    for (uint64_t i = 0; i < total; i += 100) {
        auto due = t0 + std::chrono::nanoseconds(uint64_t(double(i) / rate * 1e9));
        std::this_thread::sleep_until(due);
        for (uint64_t k = i; k < std::min(total, i + 100); ++k)
            (*s)->enqueue(decision_from_event(synth(k, deny_mix), ctx_for(k), off));
    }
    (*s)->flush(std::chrono::minutes(1));
    s->reset();
    std::lock_guard lk(probe.mu);
    return {pct(probe.ms, 0.50), pct(probe.ms, 0.99)};
}

// Resident memory of a process (kB): the whole, its private anonymous part,
// and what its mappings of BPF maps hold (the ring buffer's data area is
// mapped twice by the kernel, so a 4 MiB ring shows as 8 MiB there).
struct Rss {
    long total = -1, anon = -1, bpf_maps = 0;
};
Rss rss_of(pid_t pid) {
    Rss r;
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind("VmRSS:", 0) == 0) r.total = std::atol(line.c_str() + 6);
        if (line.rfind("RssAnon:", 0) == 0) r.anon = std::atol(line.c_str() + 8);
    }
    std::ifstream sm("/proc/" + std::to_string(pid) + "/smaps");
    bool bpf_map = false;
    while (std::getline(sm, line)) {
        if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') != std::string::npos &&
            line.find(' ') != std::string::npos)
            bpf_map = line.find("anon_inode:bpf-map") != std::string::npos;
        else if (bpf_map && line.rfind("Rss:", 0) == 0)
            r.bpf_maps += std::atol(line.c_str() + 4);
    }
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    uint64_t rows = 1'000'000;
    int rounds = 3;
    std::string agentd;
    fs::path dir = fs::temp_directory_path() / ("bulwark-audit-bench-" + std::to_string(getpid()));
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--rows" && i + 1 < argc) rows = std::stoull(argv[++i]);
        else if (a == "--rounds" && i + 1 < argc) rounds = std::atoi(argv[++i]);
        else if (a == "--agentd" && i + 1 < argc) agentd = argv[++i];
        else if (a == "--dir" && i + 1 < argc) dir = argv[++i];
        else {
            std::fprintf(stderr, "usage: audit_bench [--rows N] [--rounds R] [--agentd PATH] [--dir DIR]\n");
            return 2;
        }
    }
    if (agentd.empty()) {
        auto guess = fs::canonical("/proc/self/exe").parent_path().parent_path().parent_path() / "agentd" / "agentd";
        if (fs::exists(guess)) agentd = guess;
    }
    fs::create_directories(dir);
    size_t batch = StoreOptions{}.batch_rows;
    spdlog::set_level(spdlog::level::warn);
    std::printf("audit_bench: %llu rows x %d interleaved rounds, batch %zu, dir %s\n", (unsigned long long)rows,
                rounds, batch, dir.c_str());

    for (bool deny_mix : {false, true}) {
        std::vector<double> a, b, ratio, ca, cb;
        uint64_t dropped = 0;
        for (int r = 0; r < rounds; ++r) {
            auto pa = dir / ("store" + std::to_string(r) + ".db");
            auto pb = dir / ("raw" + std::to_string(r) + ".db");
            for (auto& p : {pa, pb})
                for (auto sfx : {"", "-wal", "-shm"}) fs::remove(p.string() + sfx);
            // alternate which goes first
            double ra, rb, xa, xb;
            if (r % 2) {
                rb = run_raw(pb, rows, deny_mix, batch, &xb);
                ra = run_store(pa, rows, deny_mix, &dropped, &xa);
            } else {
                ra = run_store(pa, rows, deny_mix, &dropped, &xa);
                rb = run_raw(pb, rows, deny_mix, batch, &xb);
            }
            ca.push_back(xa);
            cb.push_back(xb);
            a.push_back(ra);
            b.push_back(rb);
            ratio.push_back(ra / rb);
            for (auto& p : {pa, pb})
                for (auto sfx : {"", "-wal", "-shm"}) fs::remove(p.string() + sfx);
        }
        std::printf("\n[%s]\n", deny_mix ? "1% deny rows (those batches commit with synchronous=FULL)"
                                         : "allow/observe rows only (synchronous=NORMAL)");
        std::printf("  store path  rows/s median %.0f  (rounds:", median(a));
        for (double v : a) std::printf(" %.0f", v);
        std::printf(")\n  raw insert  rows/s median %.0f  (rounds:", median(b));
        for (double v : b) std::printf(" %.0f", v);
        std::printf(")\n  ratio store/raw median %.2f  (target >= 0.70)   dropped %llu\n", median(ratio),
                    (unsigned long long)dropped);
        std::printf("  rows per CPU-second (load-independent): store %.0f, raw %.0f\n", median(ca), median(cb));
    }

    spdlog::set_level(spdlog::level::warn);
    for (bool deny_mix : {false, true}) {
        for (double rate : {5'000.0, 20'000.0}) {
            auto p = dir / "lat.db";
            for (auto sfx : {"", "-wal", "-shm"}) fs::remove(p.string() + sfx);
            auto [p50, p99] = run_latency(p, rate, 3.0, deny_mix);
            std::printf("\nlatency enqueue->committed at %.0f rows/s%s: p50 %.2f ms  p99 %.2f ms  (target p99 <= 20 ms)",
                        rate, deny_mix ? " (1% deny)" : "", p50, p99);
            for (auto sfx : {"", "-wal", "-shm"}) fs::remove(p.string() + sfx);
        }
    }
    std::printf("\n");

    if (!agentd.empty()) {
        auto sd = dir / "serve";
        fs::create_directories(sd);
        pid_t pid = fork();
        if (pid == 0) {
            std::string st = (sd / "state").string(), so = (sd / "agentd.sock").string();
            int devnull = ::open("/dev/null", O_WRONLY);
            dup2(devnull, 1);
            dup2(devnull, 2);
            execl(agentd.c_str(), agentd.c_str(), "serve", "--state-dir", st.c_str(), "--socket", so.c_str(),
                  (char*)nullptr);
            _exit(127);
        }
        // Idle: once it serves (the socket exists: start-up, BPF truth
        // checks and the first commit are done), and a moment later.
        auto sock = sd / "agentd.sock";
        for (int i = 0; i < 300 && !fs::exists(sock); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        std::this_thread::sleep_for(std::chrono::seconds(2));
        Rss r = rss_of(pid);
        kill(pid, SIGTERM);
        int ws;
        waitpid(pid, &ws, 0);
        std::printf("\nidle RSS of `agentd serve`: %.1f MB  (target <= 30 MB): %.1f MB mapped BPF maps (the ring "
                    "buffer's data area is mapped twice), %.1f MB private anonymous, %.1f MB binary and "
                    "libraries\n",
                    double(r.total) / 1024.0, double(r.bpf_maps) / 1024.0, double(r.anon) / 1024.0,
                    double(r.total - r.bpf_maps - r.anon) / 1024.0);
    } else {
        std::printf("\nidle RSS: agentd binary not found (pass --agentd PATH)\n");
    }
    fs::remove_all(dir);
    return 0;
}
