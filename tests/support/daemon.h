#pragma once
// A real `agentd serve` for the tasks tiers: its own state directory, work
// root and unix socket, the shipped rules, and a small JSON client.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "agentd_child.h"
#include "api_client.h"
#include "audit_test_util.h"
#include "bpf/bpf_loader.h"

namespace bulwark::test {

using nlohmann::json;
using namespace std::chrono_literals;

// A BPF pin root and cgroup parent of this one object, removed at the end:
// daemons of tiers running in parallel would share the default ones (each
// reading the others' monitor events from the shared ring buffer, reaping
// the run leaves a killed one left there).
struct PrivateBpf {
    std::string pin_root, parent;
    explicit PrivateBpf(const std::string& name) {
        static int made = 0;
        const std::string leaf = name + "-" + std::to_string(::getpid()) + "-" + std::to_string(made++);
        pin_root = "/sys/fs/bpf/" + leaf;
        auto mnt = cgroup2_mount();
        auto own = own_cgroup2_path();
        REQUIRE(mnt);
        REQUIRE(own);
        parent = *mnt + (*own == "/" ? "" : *own) + "/" + leaf;
    }
    ~PrivateBpf() {
        (void)bpf::BpfLoader::unpin_all(pin_root);
        ::rmdir(parent.c_str());
    }
    PrivateBpf(const PrivateBpf&) = delete;
    PrivateBpf& operator=(const PrivateBpf&) = delete;
    std::vector<std::string> args() const { return {"--bpf-pin-root", pin_root, "--bpf-cgroup-parent", parent}; }
};

struct Daemon {
    TempDir dir;
    std::string sock = (dir.path / "agentd.sock").string();
    std::string state = (dir.path / "state").string();
    std::vector<std::string> argv;  // the `agentd serve` command line
    // Its own BPF pin root and cgroup parent unless `extra` names them (or
    // --no-bpf): outlives the child, so its pins go after the daemon.
    std::unique_ptr<PrivateBpf> bpf;
    std::unique_ptr<AgentdChild> child;

    // extra: further `agentd serve` arguments (e.g. a BPF pin root).
    explicit Daemon(std::vector<std::string> extra = {}, const std::string& rules = BULWARK_RULES_DIR)
        : argv{AGENTD_BINARY, "serve", "--state-dir", state, "--socket", sock,
               "--work-root", (dir.path / "work").string(), "--rules", rules} {
        // The sandbox uid must traverse to the task work directories.
        ::chmod(dir.path.c_str(), 0711);
        argv.insert(argv.end(), extra.begin(), extra.end());
        auto named = [&](const char* flag) { return std::find(extra.begin(), extra.end(), flag) != extra.end(); };
        if (!named("--bpf-pin-root") && !named("--no-bpf")) {
            bpf = std::make_unique<PrivateBpf>("daemon");
            auto a = bpf->args();
            argv.insert(argv.end(), a.begin(), a.end());
        }
        start("agentd.log");
    }

    // (Re)starts the daemon on the same state and socket, logging to
    // `log_name` in its directory, and waits until /v1/health answers 200.
    void start(const std::string& log_name) {
        child = std::make_unique<AgentdChild>(argv, (dir.path / log_name).string());
        Response r;
        for (int i = 0; i < 300 && r.status != 200; ++i) {
            std::this_thread::sleep_for(50ms);
            r = get(sock, 0, "/v1/health");
        }
        if (r.status != 200) FAIL("agentd did not come up: " << child->output());
    }

    struct Reply {
        int status = 0;
        json body;
        std::string raw;
    };
    Reply call(const std::string& method, const std::string& target, const std::optional<json>& body = std::nullopt,
               std::chrono::milliseconds timeout = 60s) const {
        int fd = connect_unix(sock);
        REQUIRE(fd >= 0);
        std::string b = body ? body->dump() : "";
        std::string raw = method + " " + target + " HTTP/1.1\r\nHost: agentd\r\nConnection: close\r\n";
        if (body) raw += "Content-Type: application/json\r\nContent-Length: " + std::to_string(b.size()) + "\r\n";
        raw += "\r\n" + b;
        auto r = request(fd, raw, timeout);
        ::close(fd);
        Reply out{r.status, json::parse(r.body, nullptr, false), r.body};
        return out;
    }
    Reply exec(uint64_t task, const json& body) const { return call("POST", "/v1/tasks/" + std::to_string(task) + "/exec", body); }
};

inline uint64_t create_task(const Daemon& d, json body) {
    auto r = d.call("POST", "/v1/tasks", body);
    INFO(r.raw);
    REQUIRE(r.status == 201);
    return r.body["id"].get<uint64_t>();
}

// A file in a task's work directory, owned by the sandbox uid.
inline void write_file(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
    REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
}

// Run cgroup leaves (v2 and every v1 hierarchy) whose name starts with
// `prefix`, and how many processes are still in them. Depth-limited walk
// that skips what it cannot read.
struct Leaves {
    size_t count = 0;
    size_t processes = 0;
};
inline void scan_leaves(const std::filesystem::path& dir, const std::string& prefix, int depth, Leaves& out) {
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        std::error_code e2;
        if (!it->is_directory(e2) || it->is_symlink(e2)) continue;
        if (it->path().filename().string().starts_with(prefix)) {
            ++out.count;
            std::ifstream procs(it->path() / "cgroup.procs");
            std::string line;
            while (std::getline(procs, line))
                if (!line.empty()) ++out.processes;
        } else if (depth > 0) {
            scan_leaves(it->path(), prefix, depth - 1, out);
        }
    }
}
inline Leaves run_leaves(const std::string& prefix) {
    Leaves out;
    scan_leaves("/sys/fs/cgroup", prefix, 4, out);
    return out;
}

}  // namespace bulwark::test
