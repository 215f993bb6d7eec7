#pragma once
// Shared set-up for the BPF benchmarks: a private loader (own pin root and
// sandbox parent, removed at exit), cgroups, timing and percentiles.
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bpf/bpf_loader.h"

namespace bwbench {

inline uint64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

inline double pct(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t i = static_cast<size_t>(p / 100.0 * double(v.size() - 1));
    return v[i];
}

struct Bench {
    std::unique_ptr<bulwark::bpf::BpfLoader> loader;
    std::string pin_root, parent, outside;
    explicit Bench(bool monitor = false) {
        if (geteuid() != 0) {
            std::puts("SKIP: benchmarks need root");
            std::exit(77);
        }
        auto mnt = bulwark::cgroup2_mount();
        auto own = bulwark::own_cgroup2_path();
        std::string base = *mnt + (*own == "/" ? "" : *own);
        pin_root = "/sys/fs/bpf/bulwark-bench-" + std::to_string(getpid());
        parent = base + "/bulwark-bench-" + std::to_string(getpid());
        outside = base + "/bulwark-bench-out-" + std::to_string(getpid());
        mkdir(outside.c_str(), 0700);
        bulwark::bpf::LoaderOptions o;
        o.pin_root = pin_root;
        o.cgroup_parent = parent;
        o.lsm = false;
        o.monitor = monitor;
        o.trace_syscalls = monitor;
        o.truth_check = false;
        auto l = bulwark::bpf::BpfLoader::start(o);
        if (!l) {
            std::printf("loader: %s\n", l.error().message().c_str());
            std::exit(1);
        }
        loader = std::move(*l);
    }
    ~Bench() {
        loader.reset();
        (void)bulwark::bpf::BpfLoader::unpin_all(pin_root);
        rmdir(outside.c_str());
        rmdir(parent.c_str());
    }
    bulwark::bpf::PolicyMaps& maps() { return loader->maps(); }
};

inline std::string make_cgroup(const std::string& parent, const std::string& name, uint64_t* id) {
    std::string p = parent + "/" + name;
    mkdir(p.c_str(), 0700);
    *id = bulwark::bpf::cgroup_id(p).value_or(0);
    return p;
}

inline bool join(const std::string& cg) {
    int fd = open((cg + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    bool ok = write(fd, "0", 1) == 1;
    close(fd);
    return ok;
}

}  // namespace bwbench
