#pragma once
// Shared set-up of the bpfrun tier: one Env per test process (rule files, a
// work directory, real TCP/UDP listeners on loopback, its own BPF pin root
// and cgroup parent, removed at exit), `agentd run` and `agentd serve`
// driven as a user would, and what is left in the maps and cgroups.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "agentd_child.h"
#include "daemon.h"
#include "api_client.h"
#include "audit_test_util.h"
#include "bpf/bpf_loader.h"
#include "bpf/bpf_maps.h"

namespace bpfrun_test {
using namespace bulwark;
using namespace bulwark::test;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;


constexpr uint16_t kTcpPort = 18110;   // granted (TCP connect)
constexpr uint16_t kUdpPort = 18111;   // granted (UDP send/connect)
constexpr uint16_t kUdpPort2 = 18112;  // in the rules, outside the narrow grant
constexpr uint16_t kUdpDenied = 18113; // in no rule

inline std::string rule_text(const std::string& tool, bool audit, int* deny_line) {
    std::ostringstream y;
    y << "tool: " << tool << "\n"
      << "description: network probe of the bpfrun tier\n"
      << "extends: base/minimal\n"
      << (audit ? "mode: audit\n" : "")
      << "binaries: [" << NETPROBE_BINARY << "]\n"
      << "files:\n"
      << "  read: [\"${workdir}\"]\n"
      << "  write: [\"${workdir}\"]\n"
      << "  create: [\"${workdir}\"]\n"
      << "  remove: [\"${workdir}\"]\n"
      << "network:\n"
      << "  families: [inet, inet6]\n"
      << "  connect:\n"
      << "    - { cidr: 127.0.0.0/8, ports: [" << kTcpPort << "], proto: tcp }\n"
      << "    - { cidr: 127.0.0.1/32, ports: [\"" << kUdpPort << "-" << kUdpPort2 << "\"], proto: udp }\n"
      << "  send:\n"
      << "    - { cidr: 127.0.0.1/32, ports: [\"" << kUdpPort << "-" << kUdpPort2 << "\"], proto: udp }\n"
      << "  deny:\n";
    std::string s = y.str();
    *deny_line = static_cast<int>(std::count(s.begin(), s.end(), '\n')) + 1;
    return s + "    - { cidr: 127.0.0.2/32 }\n";
}

inline int listener(int type, uint16_t port, const char* ip) {
    int s = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, ip, &a.sin_addr);
    if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
    if (type == SOCK_STREAM && listen(s, 128) != 0) return -1;
    return s;
}

// One per test process: rules, work directory, listeners, pin root, cgroup parent.
struct Env {
    TempDir dir;
    std::string rules = (dir.path / "rules").string();
    std::string workdir = (dir.path / "wd").string();
    PrivateBpf bpf{"bpfrun-it"};
    const std::string& pin_root = bpf.pin_root;
    const std::string& parent = bpf.parent;
    int deny_line = 0;
    int tcp = -1, udp = -1;

    static Env& get() {
        static Env e;
        return e;
    }
    Env() {
        ::chmod(dir.path.c_str(), 0711);
        fs::create_directories(rules);
        fs::create_directory_symlink(fs::path(BULWARK_RULES_DIR) / "base", fs::path(rules) / "base");
        std::ofstream(rules + "/netprobe.yaml") << rule_text("netprobe", false, &deny_line);
        int audit_line = 0;
        std::ofstream(rules + "/netprobe-audit.yaml") << rule_text("netprobe-audit", true, &audit_line);
        fs::create_directories(workdir);
        REQUIRE(::chown(workdir.c_str(), 65534, 65534) == 0);
        tcp = listener(SOCK_STREAM, kTcpPort, "0.0.0.0");
        udp = listener(SOCK_DGRAM, kUdpPort, "127.0.0.1");
        REQUIRE(tcp >= 0);
        REQUIRE(udp >= 0);
    }
    ~Env() {
        ::close(tcp);
        ::close(udp);
    }
};

struct Output {
    int status = -1;
    std::string out, err;
};

inline Output run_cmd(std::vector<std::string> argv, const std::string& cwd) {
    int o[2], e[2];
    REQUIRE(pipe2(o, O_CLOEXEC) == 0);
    REQUIRE(pipe2(e, O_CLOEXEC) == 0);
    pid_t c = fork();
    if (c == 0) {
        dup2(o[1], 1);
        dup2(e[1], 2);
        if (chdir(cwd.c_str()) != 0) _exit(99);
        std::vector<char*> av;
        for (auto& a : argv) av.push_back(a.data());
        av.push_back(nullptr);
        execv(av[0], av.data());
        _exit(98);
    }
    close(o[1]);
    close(e[1]);
    Output r;
    std::thread te([&] {
        char b[4096];
        ssize_t n;
        while ((n = read(e[0], b, sizeof b)) > 0) r.err.append(b, n);
    });
    char b[4096];
    ssize_t n;
    while ((n = read(o[0], b, sizeof b)) > 0) r.out.append(b, n);
    te.join();
    close(o[0]);
    close(e[0]);
    int ws = 0;
    waitpid(c, &ws, 0);
    r.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    return r;
}

// `agentd run --json` of the probe; the parsed report.
inline json agentd_run(const std::string& tool, std::vector<std::string> probe_args) {
    Env& e = Env::get();
    std::vector<std::string> av = {AGENTD_BINARY, "run", "--rules", e.rules, "--tool", tool, "--workdir", e.workdir,
                                   "--bpf-pin-root", e.pin_root, "--bpf-cgroup-parent", e.parent, "--json", "--",
                                   NETPROBE_BINARY};
    for (auto& a : probe_args) av.push_back(a);
    Output o = run_cmd(av, e.workdir);
    INFO("agentd run stderr: " << o.err);
    json j = json::parse(o.out, nullptr, false);
    REQUIRE(!j.is_discarded());
    return j;
}

inline std::string probe_verdict(const json& rep) {
    std::string s = rep["stdout"]["data"].get<std::string>();
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
}

inline std::string control(std::vector<std::string> args) {
    std::vector<std::string> av = {NETPROBE_BINARY};
    for (auto& a : args) av.push_back(a);
    std::string s = run_cmd(av, "/").out;
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
}

inline const json* bpf_layer(const json& rep) {
    for (const auto& l : rep["layers"])
        if (l["name"] == "bpf") return &l;
    return nullptr;
}

// Map entries and run leaves left in this process's pin root and cgroup parent.
struct Leftovers {
    size_t bindings = 0, used_slots = 0, leaves = 0;
};
inline Leftovers leftovers() {
    Env& e = Env::get();
    Leftovers l;
    auto m = bpf::PolicyMaps::open_pinned(e.pin_root);
    REQUIRE(m);
    auto b = m->bindings();
    REQUIRE(b);
    l.bindings = b->size();
    l.used_slots = BW_MAX_POLICIES - m->free_slots();
    std::error_code ec;
    for (const auto& d : fs::directory_iterator(e.parent, ec))
        if (d.is_directory()) ++l.leaves;
    return l;
}

// A real `agentd serve` sharing the test's pin root and cgroup parent.
struct Serve : bulwark::test::Daemon {
    Serve()
        : Daemon({"--bpf-pin-root", Env::get().pin_root, "--bpf-cgroup-parent", Env::get().parent},
                 Env::get().rules) {}
    uint64_t create_task(const json& body) const { return bulwark::test::create_task(*this, body); }
    ~Serve() {
        if (child && child->pid > 0) {
            ::kill(child->pid, SIGTERM);
            child->wait_exit();
        }
    }
};

inline json net_grant(const std::string& ports) {
    return {{"network", {{{"cidr", "127.0.0.1/32"}, {"ports", ports}, {"proto", {"udp"}}, {"ops", {"send"}}}}}};
}


}  // namespace bpfrun_test
