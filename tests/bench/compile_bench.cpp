// Compile a generated 10,000-rule file N times, interleaved with a baseline
// (yaml-cpp parsing the same file), and print median / p99 and their ratio,
// plus peak RSS. Targets (PERF.md): <= 100 ms, <= 50 MB.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bulwark/policy/compiler.h"

using namespace bulwark::policy;

namespace {

std::string generate(int rules) {
    std::string t = "tool: bench\nbinaries: [/usr/bin/bench]\nfiles:\n";
    int reads = rules / 2, writes = rules * 15 / 100, denies = rules * 5 / 100, execs = rules * 5 / 100;
    int nets = rules - reads - writes - denies - execs;
    t += "  read:\n";
    for (int i = 0; i < reads; ++i) t += "    - /srv/data/d" + std::to_string(i % 97) + "/f" + std::to_string(i) + "\n";
    t += "  write:\n";
    for (int i = 0; i < writes; ++i) t += "    - \"${workdir}/out" + std::to_string(i) + "\"\n";
    t += "  deny:\n";
    for (int i = 0; i < denies; ++i)
        t += "    - { path: /srv/data/d" + std::to_string(i % 97) + "/secret" + std::to_string(i) + ", rights: [read] }\n";
    t += "exec:\n  allow:\n    - /usr/bin/bench\n";
    for (int i = 1; i < execs; ++i) t += "    - /opt/tools/bin/t" + std::to_string(i) + "\n";
    t += "network:\n  connect:\n";
    for (int i = 0; i < nets; ++i)
        t += "    - { cidr: 10." + std::to_string((i >> 16) & 255) + "." + std::to_string((i >> 8) & 255) + "." +
             std::to_string(i & 255) + "/32, ports: [" + std::to_string(1000 + i % 50000) + "], proto: tcp }\n";
    t += "syscalls:\n  deny: [ptrace, { name: bpf, action: kill }]\nlimits: { memory: 256MiB, pids: 64 }\n";
    return t;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Peak RSS (MB) of a fresh process that does only `work` once.
template <class F>
double child_peak_rss_mb(F&& work) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        work();
        rusage ru{};
        getrusage(RUSAGE_SELF, &ru);
        double mb = double(ru.ru_maxrss) / 1024.0;
        ssize_t n = write(fds[1], &mb, sizeof mb);
        _exit(n == sizeof mb ? 0 : 1);
    }
    close(fds[1]);
    double mb = -1;
    if (read(fds[0], &mb, sizeof mb) != sizeof mb) mb = -1;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return mb;
}

double pct(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    size_t i = std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5));
    return v[i];
}

}  // namespace

int main(int argc, char** argv) {
    int runs = argc > 1 ? std::atoi(argv[1]) : 30;
    int rules = argc > 2 ? std::atoi(argv[2]) : 10000;
    std::string text = generate(rules);
    CompileOptions opts;
    // Until the seccomp emitter is linked, measure everything up to it.
    bool real_seccomp = compile_seccomp(SeccompSpec{}).has_value();
    if (!real_seccomp)
        opts.seccomp_compiler = [](const SeccompSpec&) -> std::expected<SeccompPlan, SeccompError> { return SeccompPlan{}; };
    double rss_start = child_peak_rss_mb([] {});
    double rss_yaml = child_peak_rss_mb([&] { YAML::Node n = YAML::Load(text); });
    double rss_compile = child_peak_rss_mb([&] { auto r = compile_string(text, "bench.yaml", opts); });
    auto check = compile_string(text, "bench.yaml", opts);
    if (!check.ok()) {
        std::fprintf(stderr, "bench policy does not compile:\n%s", render_diagnostics(check).c_str());
        return 1;
    }
    std::vector<double> base, comp;
    for (int i = 0; i < runs; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        YAML::Node n = YAML::Load(text);
        base.push_back(ms_since(t0));
        t0 = std::chrono::steady_clock::now();
        auto r = compile_string(text, "bench.yaml", opts);
        comp.push_back(ms_since(t0));
        if (!r.ok() || n.size() == 0) return 1;
    }
    std::vector<double> hash;
    for (int i = 0; i < runs; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        auto h = bundle_hash(*check.bundle);
        hash.push_back(ms_since(t0));
        if (h != check.bundle->hash) return 1;
    }
    std::printf("compile %d rules (%zu bytes), %d interleaved runs%s\n", rules, text.size(), runs,
                real_seccomp ? "" : " (seccomp emitter not built: emission excluded)");
    std::printf("  yaml-cpp parse only : median %8.2f ms  p99 %8.2f ms\n", pct(base, 0.5), pct(base, 0.99));
    std::printf("  policyc compile     : median %8.2f ms  p99 %8.2f ms\n", pct(comp, 0.5), pct(comp, 0.99));
    std::printf("    of which hash     : median %8.2f ms  (canonical JSON + SHA-256)\n", pct(hash, 0.5));
    std::printf("  ratio (median)      : %.2fx of parsing alone\n", pct(comp, 0.5) / pct(base, 0.5));
    std::printf("  peak RSS            : %.1f MB for one compile (process baseline %.1f MB; yaml-cpp parse alone %.1f MB)\n",
                rss_compile, rss_start, rss_yaml);
    std::printf("  bundle: %zu file entries, %zu LPM entries, %zu rules\n", check.bundle->bpf.files.size(),
                check.bundle->bpf.net.size(), check.bundle->rules.size());
    return 0;
}
