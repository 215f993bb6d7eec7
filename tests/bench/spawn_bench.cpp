// spawn_bench: /bin/true with the full isolation set (user, pid, mount, net,
// ipc, uts, cgroup ns; v2 + v1 cgroups; seccomp; Landlock; posture check)
// vs `bwrap --unshare-all ...` vs bare fork+exec, interleaved round by
// round. Prints p50/p99 per variant, ratios, spawns/s and memory per sandbox,
// then spawns/s on one core with 1-8 launchers at once.
//   spawn_bench [rounds]
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <functional>
#include <filesystem>
#include <thread>
#include <tuple>
#include <vector>

#include "spawn_fixture.h"
#include "bench_stats.h"
#include "sandbox/spawner.h"

using namespace bulwark;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
using bench::stats;

namespace {

// fork + execv + wait; true when it exited 0.
bool fork_exec(const std::vector<const char*>& argv) {
    pid_t p = fork();
    if (p == 0) {
        execv(argv[0], const_cast<char* const*>(argv.data()));
        _exit(127);
    }
    int st = 0;
    return waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

double run_exec(const std::vector<const char*>& argv) {
    auto t0 = Clock::now();
    if (!fork_exec(argv)) {
        std::fprintf(stderr, "%s failed\n", argv[0]);
        std::exit(1);
    }
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}


}  // namespace

int main(int argc, char** argv) {
    int rounds = argc > 1 ? std::atoi(argv[1]) : 200;
    auto bundle = test::make_bundle({.binaries = {"/usr/bin/true"}});
    bundle.limits.memory_bytes = 256ull << 20;
    bundle.limits.pids = 64;
    bundle.limits.timeout_ms = 10000;
    RunRequest req;
    req.argv = {"/usr/bin/true"};

    const std::vector<const char*> bare = {"/usr/bin/true", nullptr};
    const std::vector<const char*> bwrap = {"/usr/bin/bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/",
                                            "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
                                            "/bin/true", nullptr};
    // Same set without a new netns (host netns + a no-op BPF binding): shows
    // what the network namespace costs.
    auto bundle_nonet = bundle;
    bundle_nonet.network.mode = policy::NetMode::Rules;
    RunRequest req_nonet = req;
    req_nonet.attach_bpf = [](int, const std::string&) -> std::expected<std::string, std::string> {
        return std::string("bench: nothing attached");
    };
    // This variant measures the launch, not enforcement: the no-op binding is
    // declared in force so that the network rules' coverage does not refuse it.
    req_nonet.bpf_layers = {{"sock_addr", ""}};
    // The cost of deny masks: a tool with the work directory granted, and the
    // same with four denies below it that the mount layer holds at launch
    // (two inaccessible directories, a read-only bind, an absent path made a
    // placeholder), side by side.
    const std::string wd = test::make_workdir("bench");
    for (const char* d : {"/secret", "/cache", "/.git"}) fs::create_directories(wd + d);
    auto bundle_wd = test::make_bundle({.binaries = {"/usr/bin/true"}, .workdir = wd});
    bundle_wd.limits = bundle.limits;
    auto bundle_masks = bundle_wd;
    uint32_t next_rule = 10;
    for (const auto& [path, rights] : std::vector<std::pair<std::string, uint32_t>>{
             {wd + "/secret", BW_FS_ALL}, {wd + "/cache", BW_FS_ALL}, {wd + "/.git", BW_FS_WRITE | BW_FS_CREATE | BW_FS_REMOVE},
             {wd + "/later", BW_FS_ALL}})
        bundle_masks.files.push_back({path, 0, rights, next_rule++});
    RunRequest req_wd = req;
    req_wd.workdir = wd;
    {  // the masks must really be made: the mount layer holds the four denies
        auto check = run_tool(bundle_masks, req_wd);
        if (check.outcome != RunOutcome::Exited || check.coverage_summary.find("mount 4") == std::string::npos) {
            std::fprintf(stderr, "masked run: the mount layer does not hold the four denies: %s (%s)\n",
                         check.coverage_summary.c_str(), summary(check).c_str());
            return 1;
        }
    }
    std::vector<double> tg, tm;
    std::vector<double> tb, tw, ts, tn;
    std::vector<double> mem;
    // Warm up every path once.
    run_exec(bare);
    run_exec(bwrap);
    run_tool(bundle, req);
    for (int i = 0; i < rounds; ++i) {
        tb.push_back(run_exec(bare));
        tw.push_back(run_exec(bwrap));
        auto t0 = Clock::now();
        auto r = run_tool(bundle, req);
        ts.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        if (r.outcome != RunOutcome::Exited || r.exit_code != 0) {
            std::fprintf(stderr, "sandboxed run failed: %s\n", summary(r).c_str());
            return 1;
        }
        mem.push_back(static_cast<double>(r.usage.peak_memory_bytes));
        for (auto [b2, out, what] : {std::tuple{&bundle_wd, &tg, "workdir run"}, std::tuple{&bundle_masks, &tm, "masked run"}}) {
            t0 = Clock::now();
            auto rv = run_tool(*b2, req_wd);
            out->push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
            if (rv.outcome != RunOutcome::Exited || rv.exit_code != 0) {
                std::fprintf(stderr, "%s failed: %s\n", what, summary(rv).c_str());
                return 1;
            }
        }
        t0 = Clock::now();
        auto rn = run_tool(bundle_nonet, req_nonet);
        tn.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        if (rn.outcome != RunOutcome::Exited || rn.exit_code != 0) {
            std::fprintf(stderr, "host-netns run failed: %s\n", summary(rn).c_str());
            return 1;
        }
    }
    auto b = stats(tb), w = stats(tw), s = stats(ts), m = stats(mem), n = stats(tn);
    std::printf("spawn /bin/true, %d interleaved rounds (microseconds)\n", rounds);
    std::printf("%-34s %10s %10s %10s %10s\n", "variant", "p50", "p99", "mean", "spawns/s");
    std::printf("%-34s %10.0f %10.0f %10.0f %10.0f\n", "bare fork+exec", b.p50, b.p99, b.mean, 1e6 / b.mean);
    std::printf("%-34s %10.0f %10.0f %10.0f %10.0f\n", "bwrap --unshare-all", w.p50, w.p99, w.mean, 1e6 / w.mean);
    std::printf("%-34s %10.0f %10.0f %10.0f %10.0f\n", "bulwark run_tool (full set)", s.p50, s.p99, s.mean,
                1e6 / s.mean);
    std::printf("%-34s %10.0f %10.0f %10.0f %10.0f\n", "bulwark, host netns (cost of netns)", n.p50, n.p99,
                n.mean, 1e6 / n.mean);
    auto g = stats(tg), mk = stats(tm);
    std::printf("%-34s %10.0f %10.0f %10.0f %10.0f\n", "bulwark, workdir granted", g.p50, g.p99, g.mean, 1e6 / g.mean);
    std::printf("%-34s %10.0f %10.0f %10.0f %10.0f\n", "the same + 4 deny masks below it", mk.p50, mk.p99, mk.mean,
                1e6 / mk.mean);
    std::printf("ratio masks/no masks p50 %.2fx, p99 %.2fx\n", mk.p50 / g.p50, mk.p99 / g.p99);
    std::printf("ratio bulwark/bwrap p50 %.2fx (target <= 0.5x), p99 %.2fx\n", s.p50 / w.p50, s.p99 / w.p99);
    std::printf("ratio bulwark/bare  p50 %.2fx (target <= 2x), p99 %.2fx\n", s.p50 / b.p50, s.p99 / b.p99);
    std::printf("memory charged to the run's memory cgroup (peak): p50 %.0f KiB, p99 %.0f KiB\n", m.p50 / 1024,
                m.p99 / 1024);

    // Throughput on one core: this process, its threads and every process
    // they start confined to one CPU; launches overlap where one waits (the
    // kernel's RCU grace periods, the child's setup, the tool's exit), so
    // several launchers at once can exceed 1/latency. Bare fork+exec and
    // bwrap under the same confinement and concurrency are the baselines.
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) {
        std::perror("sched_setaffinity");
        return 1;
    }
    auto throughput = [&](int launchers, const std::function<bool()>& launch) {
        std::atomic<long> done{0};
        std::atomic<bool> stop{false}, failed{false};
        std::vector<std::thread> ts;
        auto t0 = Clock::now();
        for (int i = 0; i < launchers; ++i)
            ts.emplace_back([&] {
                while (!stop.load()) {
                    if (!launch()) failed = true;
                    ++done;
                }
            });
        std::this_thread::sleep_for(std::chrono::seconds(2));
        stop = true;
        for (auto& t : ts) t.join();
        double secs = std::chrono::duration<double>(Clock::now() - t0).count();
        if (failed) {
            std::fprintf(stderr, "a launch failed during the throughput run\n");
            std::exit(1);
        }
        return double(done.load()) / secs;
    };
    auto bare_once = [&] { return fork_exec(bare); };
    auto bwrap_once = [&] { return fork_exec(bwrap); };
    auto bulwark_once = [&] {
        auto r = run_tool(bundle, req);
        return r.outcome == RunOutcome::Exited && r.exit_code == 0;
    };
    std::printf("\nthroughput on one core (CPU 0 for this process and all it starts), spawns/s over 2 s:\n");
    std::printf("%-12s %12s %12s %12s %16s\n", "launchers", "bare", "bwrap", "bulwark", "bulwark/bare");
    double best = 0;
    for (int k : {1, 2, 4, 8}) {
        double tb1 = throughput(k, bare_once), tw1 = throughput(k, bwrap_once), ts1 = throughput(k, bulwark_once);
        best = std::max(best, ts1);
        std::printf("%-12d %12.0f %12.0f %12.0f %15.2fx\n", k, tb1, tw1, ts1, ts1 / tb1);
    }
    std::printf("bulwark best: %.0f spawns/s on one core (target >= 500)\n", best);
    test::remove_tree(wd);
    return 0;
}
