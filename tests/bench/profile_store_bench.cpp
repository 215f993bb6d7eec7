// What behaviour-profile scoring costs the audit store (issue #18: scoring
// keeps the store at >= 0.9x of its throughput without it).
//
// The same synthetic workload goes through a fresh AuditStore once per
// variant per round; the variants run in a rotating order each round (the
// machine is noisy) and the ratios are taken per round:
//   off      every run watched as agentd watches every run (RunWatch with no
//            observer): the store without scoring
//   observe  every run watched with its ProfileBook observer (RunFeatures
//            built on the producer's thread under the store's queue lock), not
//            concluded: the per-record part of scoring alone
//   on       observed, and concluded at its end on a thread of its own (as
//            agentd's exec thread does): scored, learned, its finding record
//            and the profile snapshots enqueued: what agentd serve does for a
//            tool with a `profile:` block
// Records are the BPF monitor's kind (exec, fork, exit, opens with the name
// as given, unix and tcp connects), made by decision_from_event as the ring
// buffer reader makes them, several runs in flight and their records
// interleaved; every run has its start and exit records. Two workloads:
//   runs   six tool shapes (a shell pipeline, grep, tar, curl, cat, jq), about
//          20 records a run, about 2% of the runs departing from their tool's
//          usual shape (a new binary, a credential file, a mass read) so that
//          finding records are written too: the per-run costs (scoring,
//          learning, snapshots) weigh the most; the headline figure
//   flood  grep reading 1,500-2,500 files per run: the per-record cost
// Throughput = decision records / (first enqueue .. everything committed),
// median of the rounds per variant, and the median of the per-round ratios.
// Also printed: what a restart costs (a fresh ProfileBook loading the store
// the `on` pass left: each profile's last snapshot and the runs after it),
// and what each record kind weighs in the store (rows, object and
// detail bytes), with and without scoring.
//
//   profile_store_bench [--runs N] [--rounds R] [--in-flight K] [--learn L] [--dir DIR] [--json]
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "audit/audit_db.h"
#include "bench_stats.h"
#include "audit/audit_record.h"
#include "bulwark/policy/bundle.h"
#include "bulwark/policy/instantiate.h"
#include "profiles/profile_book.h"

using namespace bulwark;
using namespace bulwark::audit;
using Clock = std::chrono::steady_clock;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const char* kTools[] = {"sh", "grep", "tar", "curl", "cat", "jq"};
constexpr size_t kToolCount = sizeof kTools / sizeof kTools[0];
const char* kPkgs[] = {"core", "util", "api", "net", "parser", "cli"};
const char* kSyscalls[] = {"access", "arch_prctl", "brk",       "close",         "execve",       "exit_group",
                           "fstat",  "getrandom",  "lseek",     "mmap",          "mprotect",     "munmap",
                           "newfstatat", "openat", "pread64",   "prlimit64",     "read",         "rseq",
                           "rt_sigaction", "set_robust_list", "set_tid_address", "write",   "fcntl", "getdents64"};

struct Synth {
    std::string tool;
    std::string workdir;
    std::vector<bw_event> events;
    json exit_detail;
};

bw_event base_event(uint64_t ts, uint32_t pid, uint16_t op, uint8_t obj_kind) {
    bw_event ev{};
    ev.ts_ns = 1'000'000'000ull + ts;
    ev.cgroup_id = 77;
    ev.policy_version = 3;
    ev.policy_id = 1;
    ev.rule_id = BW_NO_RULE;
    ev.pid = ev.tgid = pid;
    ev.layer = BW_LAYER_MONITOR;
    ev.op = op;
    ev.decision = BW_DECISION_OBSERVE;
    ev.obj_kind = obj_kind;
    std::memcpy(ev.comm, "tool", 5);
    return ev;
}

bw_event file_event(uint64_t ts, uint32_t pid, uint16_t op, const std::string& path, uint32_t rights) {
    bw_event ev = base_event(ts, pid, op, BW_OBJ_FILE);
    std::snprintf(ev.obj.file.path, sizeof ev.obj.file.path, "%s", path.c_str());
    ev.obj.file.rights = rights;
    ev.obj.file.dev = op == BW_OP_PROC_EXEC ? 266338304 : 0;
    ev.obj.file.ino = op == BW_OP_PROC_EXEC ? 247000 + ts % 1000 : 0;
    return ev;
}

bw_event proc_event(uint64_t ts, uint32_t pid, uint16_t op, uint32_t target) {
    bw_event ev = base_event(ts, pid, op, BW_OBJ_PROC);
    ev.obj.proc.target_pid = target;
    return ev;
}

bw_event unix_connect(uint64_t ts, uint32_t pid) {
    bw_event ev = base_event(ts, pid, BW_OP_CONNECT, BW_OBJ_UNIX);
    ev.layer = BW_LAYER_SOCK_UNIX;
    ev.decision = BW_DECISION_DENY;
    ev.ret = -EPERM;
    ev.obj.unx.family = AF_UNIX;
    ev.obj.unx.type = SOCK_STREAM;
    ev.obj.unx.kind = BW_UNIX_PATH;
    const char* p = "/var/run/nscd/socket";
    ev.obj.unx.len = uint16_t(std::strlen(p));
    std::memcpy(ev.obj.unx.name, p, std::strlen(p));
    return ev;
}

bw_event tcp_connect(uint64_t ts, uint32_t pid) {
    bw_event ev = base_event(ts, pid, BW_OP_CONNECT, BW_OBJ_NET);
    ev.layer = BW_LAYER_SOCK_ADDR;
    ev.decision = BW_DECISION_ALLOW;
    ev.obj.net.family = AF_INET;
    ev.obj.net.type = SOCK_STREAM;
    ev.obj.net.port = 18080;
    static constexpr uint8_t addr[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
    std::memcpy(ev.obj.net.addr, addr, 16);
    return ev;
}

// One run of tool `t`, the same for a given seed in every variant. A flood
// run is grep reading `flood` files of a large tree (a recursive search).
Synth make_run(uint64_t seed, size_t t, int flood = 0) {
    std::mt19937_64 rng(seed);
    auto pick = [&](size_t n) { return size_t(rng() % n); };
    Synth s;
    s.tool = kTools[t];
    s.workdir = "/var/lib/bulwark-tasks/task-" + std::to_string(1 + seed % 50);
    uint64_t ts = seed * 1000;
    uint32_t pid = 1000 + uint32_t(seed % 30000);
    auto& ev = s.events;
    auto libs = [&](uint32_t p, int n) {
        ev.push_back(file_event(++ts, p, BW_OP_FILE_OPEN, "/etc/ld.so.cache", BW_FS_READ));
        for (int i = 0; i < n; ++i)
            ev.push_back(file_event(++ts, p, BW_OP_FILE_OPEN,
                                    "/lib/x86_64-linux-gnu/lib" + std::to_string(i) + ".so." + std::to_string(i % 3),
                                    BW_FS_READ));
    };
    auto workfile = [&] {
        std::string dir = pick(3) ? std::string("src/") + kPkgs[pick(6)] : std::string("docs");
        return dir + "/file_" + std::to_string(pick(40)) + (pick(2) ? ".c" : ".md");
    };
    const bool odd = !flood && pick(50) == 0;  // about 2% of the runs depart from the usual
    ev.push_back(file_event(++ts, pid, BW_OP_PROC_EXEC, "/dev/fd/110", BW_FS_EXEC));
    int files = 1 + int(pick(4));
    int children = 0;
    switch (t) {
    case 0: libs(pid, 1); children = 1 + int(pick(3)); break;               // sh pipeline
    case 1: libs(pid, 2); if (!pick(10)) files = 20 + int(pick(40)); break;  // grep, sometimes -r
    case 2: libs(pid, 4); files = 5 + int(pick(30)); children = 2; break;    // tar czf: sh, gzip
    case 3: libs(pid, 30); files = pick(3) ? 0 : 1; break;                   // curl
    case 4: libs(pid, 1); break;                                            // cat
    default: libs(pid, 3); files = 1; break;                                 // jq
    }
    if (flood) files = flood;
    if (t == 2 || t == 3)
        for (int i = 0; i < 2; ++i) ev.push_back(unix_connect(++ts, pid));
    if (t == 3) ev.push_back(tcp_connect(++ts, pid));
    static const char* kids[] = {"/usr/bin/cat", "/usr/bin/wc", "/usr/bin/sort", "/usr/bin/head", "/usr/bin/grep"};
    for (int c = 0; c < children; ++c) {
        uint32_t child = pid + 1 + uint32_t(c);
        ev.push_back(proc_event(++ts, pid, BW_OP_PROC_FORK, child));
        std::string bin = t == 2 ? (c == 0 ? "/bin/sh" : "/usr/bin/gzip") : kids[pick(5)];
        ev.push_back(file_event(++ts, child, BW_OP_PROC_EXEC, bin, BW_FS_EXEC));
        libs(child, 1);
    }
    for (int f = 0; f < files; ++f)
        ev.push_back(file_event(++ts, pid, BW_OP_FILE_OPEN,
                                flood ? "src/" + std::string(kPkgs[f % 6]) + "/m" + std::to_string(f % 40) + "/f" +
                                            std::to_string(f) + ".c"
                                      : workfile(),
                                BW_FS_READ));
    if (odd) {
        switch (pick(3)) {
        case 0: ev.push_back(file_event(++ts, pid, BW_OP_PROC_EXEC, "/usr/bin/ls", BW_FS_EXEC)); break;
        case 1: ev.push_back(file_event(++ts, pid, BW_OP_FILE_OPEN, ".env", BW_FS_READ)); break;
        default:
            for (int f = 0; f < 400; ++f)
                ev.push_back(file_event(++ts, pid, BW_OP_FILE_OPEN, "vendor/m" + std::to_string(f % 20) + "/f" +
                                                                        std::to_string(f) + ".js",
                                        BW_FS_READ));
        }
    }
    if (t == 3 && !pick(5))  // curl -o out/page.json
        ev.push_back(file_event(++ts, pid, BW_OP_FILE_OPEN, "out/page.json", BW_FS_WRITE | BW_FS_CREATE));
    for (int c = children; c > 0; --c) ev.push_back(proc_event(++ts, pid + uint32_t(c), BW_OP_PROC_EXIT, pid + uint32_t(c)));
    ev.push_back(proc_event(++ts, pid, BW_OP_PROC_EXIT, pid));

    json calls = json::object();
    for (const char* sc : kSyscalls)
        if (pick(8)) calls[sc] = 1 + pick(20);
    calls["openat"] = files + 4;
    s.exit_detail = {{"exit_status", 0},
                     {"outcome", "exited"},
                     {"wall_us", 8000 + pick(20000)},
                     {"cpu_user_us", 1000 + pick(4000)},
                     {"cpu_system_us", 1000 + pick(4000)},
                     {"peak_memory_bytes", (2 + pick(8)) << 20},
                     {"output_bytes", pick(20000)},
                     {"error", ""},
                     {"denials", json::array()},
                     {"counted",
                      {{"syscalls", calls}, {"sent_bytes", t == 3 ? 400 + pick(800) : 0}, {"compat_syscalls", 0}}}};
    return s;
}

void remove_db(const fs::path& p) {
    for (auto sfx : {"", "-wal", "-shm"}) fs::remove(p.string() + sfx);
}

double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct Result {
    double records_per_s = 0;
    double runs_per_s = 0;
    double records_per_cpu_s = 0;
    uint64_t findings = 0;
    uint64_t dropped = 0;
    json by_kind;  // kind -> {rows, detail_bytes}
    double load_ms = 0;  // on: a restart's ProfileBook::load over the store the pass left
};

struct Active {
    size_t index;
    size_t next = 0;
    uint64_t task_id, run_id;
    std::unique_ptr<RunWatch> watch;
    std::shared_ptr<profiles::RunObserver> observer;
};

enum class Variant { Off, Observe, On };
const char* variant_name(Variant v) { return v == Variant::Off ? "off" : v == Variant::Observe ? "observe" : "on"; }

// One pass of the workload through a fresh store. The producer (the ring
// buffer reader's part) enqueues decision records of the runs in flight; a
// run's end (agentd's exec thread: conclude, exit record, the watch
// dropped) is handed to a thread of its own, as in agentd.
Result run_variant(const fs::path& db, const std::vector<Synth>& runs, Variant variant, size_t in_flight,
                   uint32_t learn) {
    remove_db(db);
    auto store = AuditStore::open(bulwark::bench::bench_store_options(db));
    if (!store) {
        std::fprintf(stderr, "open: %s\n", store.error().message.c_str());
        std::exit(1);
    }
    AuditStore& s = **store;
    profiles::ProfileBook book(&s);
    const bool observe = variant != Variant::Off;
    std::map<std::string, policy::ProfilePlan> plans;
    for (const char* t : kTools) {
        policy::ProfilePlan p;
        p.enabled = true;
        p.learn_runs = learn;
        plans[t] = p;
    }
    if (observe) book.load(plans);
    const int64_t off = boot_to_realtime_offset_ns();
    uint64_t decisions = 0;
    std::atomic<uint64_t> findings{0};
    for (const auto& r : runs) decisions += r.events.size();

    std::mutex mu;
    std::condition_variable cv;
    std::deque<Active> ended;
    bool producing = true;
    std::thread ender([&] {
        for (;;) {
            Active a;
            {
                std::unique_lock lk(mu);
                cv.wait(lk, [&] { return !ended.empty() || !producing; });
                if (ended.empty()) return;
                a = std::move(ended.front());
                ended.pop_front();
            }
            const Synth& r = runs[a.index];
            json exit_detail = r.exit_detail;
            if (variant == Variant::On) {
                auto v = book.conclude(*a.observer, exit_detail);
                if (!v.findings.empty()) findings.fetch_add(1);
                profiles::mark_concluded(exit_detail, v);
            }
            auto exit_seq = s.enqueue(run_exit_record(a.task_id, a.run_id, r.tool, "exit", 0, exit_detail));
            if (variant == Variant::On) book.exit_recorded(r.tool, exit_seq.value_or(s.last_seq()));
            a.watch.reset();
        }
    });

    auto t0 = Clock::now();
    double c0 = cpu_seconds();
    std::vector<Active> active;
    size_t started = 0;
    auto start_next = [&] {
        const Synth& r = runs[started];
        Active a{started, 0, 1 + started % 50, 1 + started, nullptr, nullptr};
        ++started;
        if (observe) {
            policy::TaskVars vars = policy::task_vars(r.workdir, "task-" + std::to_string(a.task_id));
            a.observer = book.observe(r.tool, a.task_id, a.run_id, std::move(vars), {});
        }
        RunWatch::Observer on_decision;
        if (a.observer) on_decision = [o = a.observer](const AuditRecord& rec) { o->on_decision(rec); };
        a.watch = s.watch_run(a.task_id, a.run_id, Query::kMaxLimit, std::move(on_decision));
        (void)s.enqueue(run_start_record(a.task_id, a.run_id, r.tool, 3,
                                         {{"argv", {r.tool}}, {"epoch", 1}, {"workdir", r.workdir}}));
        active.push_back(std::move(a));
    };
    while (started < runs.size() && active.size() < in_flight) start_next();
    while (!active.empty()) {
        // The reader hands over a few records of each run in flight in turn.
        for (size_t i = 0; i < active.size();) {
            Active& a = active[i];
            const Synth& r = runs[a.index];
            for (int k = 0; k < 4 && a.next < r.events.size(); ++k, ++a.next) {
                RunContext ctx{.task_id = a.task_id, .run_id = a.run_id, .tool = r.tool};
                (void)s.enqueue(decision_from_event(r.events[a.next], ctx, off));
            }
            if (a.next == r.events.size()) {
                {
                    std::lock_guard lk(mu);
                    ended.push_back(std::move(a));
                }
                cv.notify_one();
                active.erase(active.begin() + std::ptrdiff_t(i));
                if (started < runs.size()) start_next();
            } else {
                ++i;
            }
        }
    }
    {
        std::lock_guard lk(mu);
        producing = false;
    }
    cv.notify_one();
    ender.join();
    s.flush(std::chrono::minutes(5));
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    double cpu = cpu_seconds() - c0;
    Result res;
    res.records_per_s = double(decisions) / secs;
    res.runs_per_s = double(runs.size()) / secs;
    res.records_per_cpu_s = double(decisions) / cpu;
    res.findings = findings.load();
    res.dropped = s.status().dropped;
    if (variant == Variant::On) {
        // What a restart costs: each profile's last snapshot and the runs after it replayed.
        profiles::ProfileBook again(&s);
        auto l0 = Clock::now();
        auto errors = again.load(plans);
        res.load_ms = std::chrono::duration<double, std::milli>(Clock::now() - l0).count();
        for (const auto& e : errors) std::fprintf(stderr, "load: %s\n", e.c_str());
    }
    // What each kind of record weighs in the store (its rows and detail text).
    if (auto rows = s.read_sql("SELECT kind, count(*), sum(length(coalesce(object, '')) + length(coalesce(detail, ''))) "
                               "FROM records GROUP BY kind",
                               std::chrono::milliseconds(60000))) {
        res.by_kind = json::object();
        for (const auto& row : *rows)
            res.by_kind[std::string(kind_name(RecordKind(row[0].get<int>())))] = {{"rows", row[1]}, {"bytes", row[2]}};
    }
    store->reset();
    remove_db(db);
    return res;
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
    size_t nruns = 6000, in_flight = 8;
    int rounds = 7;
    uint32_t learn = 40;
    bool as_json = false;
    fs::path dir = fs::path("/var/tmp") / ("bulwark-profile-store-bench-" + std::to_string(getpid()));
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--runs" && i + 1 < argc) nruns = std::stoull(argv[++i]);
        else if (a == "--rounds" && i + 1 < argc) rounds = std::atoi(argv[++i]);
        else if (a == "--in-flight" && i + 1 < argc) in_flight = std::max<size_t>(1, std::stoull(argv[++i]));
        else if (a == "--learn" && i + 1 < argc) learn = uint32_t(std::stoul(argv[++i]));
        else if (a == "--dir" && i + 1 < argc) dir = argv[++i];
        else if (a == "--json") as_json = true;
        else {
            std::fprintf(stderr,
                         "usage: profile_store_bench [--runs N] [--rounds R] [--in-flight K] [--learn L] [--dir DIR] "
                         "[--json]\n");
            return 2;
        }
    }
    spdlog::set_level(spdlog::level::warn);
    fs::create_directories(dir);
    struct Workload {
        const char* name;
        const char* title;
        std::vector<Synth> runs;
        uint32_t learn;
        uint64_t records = 0;
    };
    std::vector<Workload> workloads;
    workloads.push_back({"runs", "runs of six tools, a start record, its decisions and an exit record each (as agentd "
                                 "enqueues them)", {}, learn});
    for (size_t i = 0; i < nruns; ++i) workloads[0].runs.push_back(make_run(0x9e3779b97f4a7c15ull * (i + 1), i % kToolCount));
    // Per-record cost: few runs of thousands of records each (the profile's
    // window is short so that most of them are scored).
    workloads.push_back({"flood", "flood: grep reading 1,500-2,500 files per run (the observer's per-record cost)", {},
                         std::min<uint32_t>(learn, 5)});
    for (size_t i = 0; i < std::max<size_t>(20, nruns / 100); ++i) {
        std::mt19937_64 rng(i);
        workloads[1].runs.push_back(make_run(0x51ed270b27a1c3d5ull * (i + 1), 1, 1500 + int(rng() % 1000)));
    }
    for (auto& w : workloads)
        for (const auto& r : w.runs) w.records += r.events.size();
    if (!as_json)
        std::printf("profile_store_bench: %zu in flight, %d interleaved rounds (variants off, observe, on in rotating "
                    "order), dir %s\n",
                    in_flight, rounds, dir.c_str());
    json out = {{"in_flight", in_flight}, {"rounds", rounds}, {"workloads", json::object()}};
    const auto db = dir / "store.db";
    const Variant variants[] = {Variant::Off, Variant::Observe, Variant::On};
    for (auto& w : workloads) {
        std::map<Variant, std::vector<double>> rps, cpu, rns;
        std::vector<double> ratio, ratio_observe, load_ms;
        uint64_t findings = 0, dropped = 0;
        json by_kind, by_kind_off;
        for (int r = 0; r < rounds; ++r) {
            // Each round runs the three variants in another order.
            std::map<Variant, Result> res;
            for (int k = 0; k < 3; ++k) {
                Variant v = variants[(k + r) % 3];
                if (r % 2) v = variants[(3 - k + r) % 3];
                res[v] = run_variant(db, w.runs, v, in_flight, w.learn);
            }
            for (auto v : variants) {
                rps[v].push_back(res[v].records_per_s);
                cpu[v].push_back(res[v].records_per_cpu_s);
                rns[v].push_back(res[v].runs_per_s);
                dropped += res[v].dropped;
            }
            ratio.push_back(res[Variant::On].records_per_s / res[Variant::Off].records_per_s);
            ratio_observe.push_back(res[Variant::Observe].records_per_s / res[Variant::Off].records_per_s);
            load_ms.push_back(res[Variant::On].load_ms);
            findings = res[Variant::On].findings;
            by_kind = res[Variant::On].by_kind;
            by_kind_off = res[Variant::Off].by_kind;
        }
        json wl = {{"runs", w.runs.size()},
                   {"decision_records", w.records},
                   {"learn", w.learn},
                   {"ratio_median", median(ratio)},
                   {"ratios", ratio},
                   {"observe_ratio_median", median(ratio_observe)},
                   {"observe_ratios", ratio_observe},
                   {"runs_with_findings", findings},
                   {"restart_load_ms_median", median(load_ms)},
                   {"dropped", dropped},
                   {"records_on", by_kind},
                   {"records_off", by_kind_off}};
        for (auto v : variants) {
            std::string n = variant_name(v);
            wl[n + "_records_per_s"] = median(rps[v]);
            wl[n + "_runs_per_s"] = median(rns[v]);
            wl[n + "_records_per_cpu_s"] = median(cpu[v]);
        }
        out["workloads"][w.name] = wl;
        if (as_json) continue;
        std::printf("\n[%s]\n  %zu runs, %llu decision records (%.1f per run), learn %u\n", w.title, w.runs.size(),
                    (unsigned long long)w.records, double(w.records) / double(w.runs.size()), w.learn);
        for (auto v : variants) {
            std::printf("  %-8s decision records/s median %7.0f  (runs/s %5.0f, per CPU-second %7.0f)  rounds:",
                        variant_name(v), median(rps[v]), median(rns[v]), median(cpu[v]));
            for (double x : rps[v]) std::printf(" %.0f", x);
            std::printf("\n");
        }
        std::printf("  ratio on/off median %.3f  (per round:", median(ratio));
        for (double x : ratio) std::printf(" %.3f", x);
        std::printf(")  target >= 0.90\n  ratio observe/off median %.3f (the observer under the queue lock alone)\n",
                    median(ratio_observe));
        std::printf("  runs with findings (on): %llu of %zu; dropped records: %llu\n", (unsigned long long)findings,
                    w.runs.size(), (unsigned long long)dropped);
        std::printf("  restart (on): the %zu profiles rebuilt in %.0f ms median (last snapshot, taken every %llu runs, "
                    "and the runs after it)\n",
                    kToolCount, median(load_ms), (unsigned long long)profiles::kSnapshotEvery);
        auto kinds = [](const json& k) {
            std::string o;
            for (const auto& [name, v] : k.items())
                o += " " + name + " " + v["rows"].dump() + " rows " +
                     std::to_string(v["bytes"].is_number() ? v["bytes"].get<double>() / 1e6 : 0.0).substr(0, 4) + " MB,";
            if (!o.empty()) o.pop_back();
            return o;
        };
        std::printf("  records written, on:%s\n                 off:%s\n", kinds(by_kind).c_str(),
                    kinds(by_kind_off).c_str());
    }
    if (as_json) std::printf("%s\n", out.dump().c_str());
    fs::remove_all(dir);
    return 0;
}
