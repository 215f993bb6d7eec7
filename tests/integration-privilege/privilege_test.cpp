// agentd's own privilege (docs/agentd-privilege.md), each claim next to a
// control that shows the check can fail:
//  (i)   a started `agentd serve` (and a running `agentd run`) holds exactly
//        the kept capabilities in every set, where a plain root process
//        started the same way holds the full set;
//  (ii)  the systemd unit passes `systemd-analyze verify`, scores under an
//        exposure threshold with `systemd-analyze security --offline=yes`
//        (an unconfined unit does not), and bounds the capabilities to the
//        same table;
//  (iii) `agentd serve --self-seccomp` (the bundle policyc compiled from
//        deploy/systemd/agentd-self.yaml) runs under the filter (Seccomp 2)
//        and still serves a real run: a tool spawned, its run bound to the
//        BPF layer, a Landlock denial read from kernel audit and stored; and
//        a probe under the same compiled filter is refused a call outside
//        its list with the filter's own errno, where unconfined the kernel
//        answers otherwise.
#include <catch2/catch.hpp>

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "daemon.h"
#include "sandbox/self_privilege.h"

using namespace bulwark;
using namespace bulwark::test;
using nlohmann::json;

namespace {

// The errno deploy/systemd/agentd-self.yaml answers a call outside its list
// with (ENOTRECOVERABLE: no layer of a tool uses it, so a refusal by the
// daemon's own filter is told apart from every other).
constexpr int kSelfFilterErrno = ENOTRECOVERABLE;

ProcCredentials creds_of(pid_t pid) {
    auto c = read_proc_credentials("/proc/" + std::to_string(pid) + "/status");
    INFO((c ? "" : c.error()));
    REQUIRE(c);
    return *c;
}

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

struct Cmd {
    int status = -1;
    std::string out;
};
Cmd run_cmd(const std::string& cmd) {
    Cmd r;
    FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
    REQUIRE(p);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    int st = ::pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
}

// The unit as shipped, with its two installed paths pointed at this build.
std::string unit_for_this_build() {
    std::string u = slurp(BULWARK_UNIT_FILE);
    REQUIRE(!u.empty());
    auto swap = [&](const std::string& from, const std::string& to) {
        auto at = u.find(from);
        REQUIRE(at != std::string::npos);
        u.replace(at, from.size(), to);
    };
    swap("ExecStart=/usr/local/bin/agentd", std::string("ExecStart=") + AGENTD_BINARY);
    swap("/usr/local/share/bulwark/agentd-self.bundle.json", AGENTD_SELF_BUNDLE);
    return u;
}

std::string write_unit(const TempDir& dir, const std::string& text) {
    auto path = (dir.path / "agentd.service").string();
    std::ofstream(path) << text;
    return path;
}

double exposure(const std::string& unit_path) {
    auto r = run_cmd("systemd-analyze security --offline=yes --no-pager " + unit_path);
    INFO(r.out);
    std::smatch m;
    REQUIRE(std::regex_search(r.out, m, std::regex("Overall exposure level for agentd\\.service: ([0-9.]+)")));
    return std::stod(m[1]);
}

// The shipped cat and curl's runtime, and curl-loop: the shipped curl with
// its one allowed address on the loopback (the shipped one names a host,
// which a host without DNS cannot resolve when the task is made).
std::string loopback_rules(const TempDir& dir) {
    namespace fs = std::filesystem;
    const fs::path src = BULWARK_RULES_DIR;
    fs::copy(src / "base", dir.path / "base", fs::copy_options::recursive);
    fs::copy(src / "cat.yaml", dir.path / "cat.yaml");
    std::string curl = slurp((src / "curl.yaml").string());
    const std::string host = "{ host: api.github.com, ports: [443], proto: tcp }";
    auto at = curl.find(host);
    REQUIRE(at != std::string::npos);
    curl.replace(at, host.size(), "{ cidr: 127.0.0.1/32, ports: [443], proto: tcp }");
    at = curl.find("tool: curl\n");
    REQUIRE(at != std::string::npos);
    curl.replace(at, 11, "tool: curl-loop\n");
    std::ofstream(dir.path / "curl-loop.yaml") << curl;
    return dir.path.string();
}

// A child under the compiled filter (or not) makes each call and reports
// its errno (0: it went through) in order, over a pipe.
std::vector<int> probe_calls(const SelfFilter* filter) {
    int p[2];
    REQUIRE(::pipe(p) == 0);
    pid_t c = ::fork();
    REQUIRE(c >= 0);
    if (c == 0) {
        ::close(p[0]);
        if (filter && !install_self_filter(*filter)) ::_exit(3);
        auto call = [&](long r) {
            int e = r < 0 ? errno : 0;
            (void)!::write(p[1], &e, sizeof e);
        };
        call(::syscall(SYS_init_module, nullptr, 0, ""));
        call(::syscall(SYS_kexec_load, 0, 0, nullptr, 0));
        call(::syscall(SYS_swapoff, "/nonexistent-bulwark-swap"));
        call(::syscall(SYS_getppid));  // on the list
        ::_exit(0);
    }
    ::close(p[1]);
    std::vector<int> out;
    int e;
    while (::read(p[0], &e, sizeof e) == sizeof e) out.push_back(e);
    ::close(p[0]);
    int st = 0;
    ::waitpid(c, &st, 0);
    REQUIRE(WIFEXITED(st));
    REQUIRE(WEXITSTATUS(st) == 0);
    return out;
}

}  // namespace

TEST_CASE("agentd serve keeps exactly the kept capabilities; a plain root process keeps all", "[privilege][caps]") {
    const uint64_t kept = kept_capability_mask();
    const auto mine = creds_of(::getpid());
    // Control: this root test process, and a plain child of it, hold
    // capabilities outside the table (the drop has something to take).
    REQUIRE((mine.bounding & ~kept) != 0);
    REQUIRE((mine.effective & ~kept) != 0);
    pid_t sleeper = ::fork();
    REQUIRE(sleeper >= 0);
    if (sleeper == 0) {
        ::execl("/bin/sleep", "sleep", "5", nullptr);
        ::_exit(127);
    }
    ::usleep(200 * 1000);
    const auto plain = creds_of(sleeper);
    ::kill(sleeper, SIGKILL);
    ::waitpid(sleeper, nullptr, 0);
    CHECK(plain.bounding == mine.bounding);
    CHECK(plain.effective == mine.effective);
    CHECK((plain.bounding & ~kept) != 0);

    PrivateBpf bpf("bulwark-privilege");
    Daemon d(bpf.args());
    const auto ad = creds_of(d.child->pid);
    const uint64_t want = kept & mine.bounding;  // what this host's root has of the table
    INFO("agentd bounding " << std::hex << ad.bounding << ", effective " << ad.effective << ", want " << want);
    CHECK(ad.bounding == want);
    CHECK(ad.permitted == want);
    CHECK(ad.effective == want);
    CHECK(ad.inheritable == 0);
    CHECK(ad.ambient == 0);
    // No thread kept more (capability sets are per thread).
    for (const auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(d.child->pid) + "/task")) {
        auto tc = read_proc_credentials((t.path() / "status").string());
        REQUIRE(tc);
        CHECK(tc->bounding == want);
        CHECK(tc->effective == want);
    }

    // /v1/health says the same, with the table and what was dropped.
    auto h = d.call("GET", "/v1/health");
    REQUIRE(h.status == 200);
    const auto& p = h.body["host"]["hardening"]["privilege"];
    INFO(p.dump(1));
    CHECK(p["now"]["bounding"] == json(capability_names(want)));
    CHECK(p["now"]["effective"] == json(capability_names(want)));
    CHECK(p["now"]["ambient"].empty());
    REQUIRE(p["kept"].size() == kept_capabilities().size());
    for (const auto& k : p["kept"]) CHECK(!k["why"].get<std::string>().empty());
    CHECK(p["dropped"] == json(capability_names(mine.bounding & ~kept)));
    CHECK(p["seccomp_filter"].is_null());
    CHECK(p["now"]["seccomp"] == 0);

    // ... and still runs tools: the drop took nothing a run needs.
    uint64_t id = create_task(d, {{"tools", {"sh"}}});
    auto r = d.exec(id, {{"tool", "sh"}, {"argv", {"sh", "-c", "echo ok"}}});
    INFO(r.raw);
    REQUIRE(r.status == 200);
    CHECK(r.body["exit_status"] == 0);
}

TEST_CASE("agentd run keeps exactly the kept capabilities while its tool runs", "[privilege][caps]") {
    const uint64_t kept = kept_capability_mask();
    const auto mine = creds_of(::getpid());
    TempDir dir;
    ::chmod(dir.path.c_str(), 0777);
    PrivateBpf bpf("bulwark-privilege-run");
    std::vector<std::string> argv{AGENTD_BINARY, "run", "--rules", BULWARK_RULES_DIR, "--tool", "sh",
                                  "--workdir", dir.path.string()};
    for (auto& a : bpf.args()) argv.push_back(a);
    // a builtin-only busy loop of a few seconds (the sh tool may exec nothing but itself)
    for (auto a : {"--", "sh", "-c", "i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done"}) argv.push_back(a);
    AgentdChild run(argv, (dir.path / "run.log").string());
    // Read while the tool sleeps: by then agentd run is past its start-up.
    ProcCredentials c;
    for (int i = 0; i < 40; ++i) {
        ::usleep(50 * 1000);
        c = creds_of(run.pid);
        if (c.bounding != mine.bounding) break;
    }
    ::usleep(300 * 1000);
    c = creds_of(run.pid);
    INFO(run.output());
    CHECK(c.bounding == (kept & mine.bounding));
    CHECK(c.effective == (kept & mine.bounding));
    CHECK(c.inheritable == 0);
    CHECK(c.ambient == 0);
    CHECK(c.seccomp_filters == mine.seccomp_filters);  // no filter of its own without --self-seccomp
    CHECK(run.wait_exit() == 0);
}

TEST_CASE("agentd run --self-seccomp runs under its own filter, and its tool under both", "[privilege][seccomp]") {
    const auto mine = creds_of(::getpid());
    TempDir dir;
    ::chmod(dir.path.c_str(), 0777);
    PrivateBpf bpf("bulwark-privilege-run-seccomp");
    std::vector<std::string> argv{AGENTD_BINARY, "run", "--self-seccomp", AGENTD_SELF_BUNDLE, "--rules",
                                  BULWARK_RULES_DIR, "--tool", "sh", "--workdir", dir.path.string()};
    for (auto& a : bpf.args()) argv.push_back(a);
    for (auto a : {"--", "sh", "-c", "i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done"}) argv.push_back(a);
    AgentdChild run(argv, (dir.path / "run.log").string());
    // The tool: the deepest process below agentd run while the loop runs.
    const auto deepest = [](pid_t p) {
        for (;;) {
            std::ifstream ch("/proc/" + std::to_string(p) + "/task/" + std::to_string(p) + "/children");
            pid_t next = 0;
            if (!(ch >> next) || next <= 0) return p;
            p = next;
        }
    };
    ProcCredentials agentd, tool;
    for (int i = 0; i < 60 && tool.seccomp_filters <= agentd.seccomp_filters; ++i) {
        ::usleep(50 * 1000);
        agentd = creds_of(run.pid);
        // the tool may be gone between the two reads: read again
        if (auto t = read_proc_credentials("/proc/" + std::to_string(deepest(run.pid)) + "/status")) tool = *t;
    }
    INFO(run.output());
    CHECK(agentd.seccomp == 2);
    CHECK(agentd.seccomp_filters == mine.seccomp_filters + 1);
    CHECK(tool.seccomp_filters > agentd.seccomp_filters);  // the tool's own stacked on agentd's
    CHECK(run.wait_exit() == 0);
}

TEST_CASE("the systemd unit passes systemd-analyze and bounds agentd to the same table", "[privilege][unit]") {
    if (run_cmd("systemd-analyze --version").status != 0) {
        WARN("systemd-analyze not installed: the unit is not checked");
        return;
    }
    TempDir dir;
    const std::string unit = unit_for_this_build();
    const auto path = write_unit(dir, unit);
    auto v = run_cmd("systemd-analyze verify --no-pager " + path);
    INFO(v.out);
    CHECK(v.status == 0);
    CHECK(v.out.find("agentd.service") == std::string::npos);  // no complaint names the unit

    // Control: verify does catch a broken unit.
    {
        TempDir bad;
        std::string b = unit;
        b.replace(b.find("ExecStart="), 10, "ExecStart=/nonexistent/agentd-not-here ");
        auto bv = run_cmd("systemd-analyze verify --no-pager " + write_unit(bad, b));
        INFO(bv.out);
        CHECK(bv.status != 0);
        CHECK(bv.out.find("/nonexistent/agentd-not-here") != std::string::npos);
    }

    // Exposure: the shipped unit under the threshold; the same service with
    // none of the confinement lines over it.
    constexpr double kThreshold = 6.6;
    const double shipped = exposure(path);
    CHECK(shipped <= kThreshold);
    auto t = run_cmd("systemd-analyze security --offline=yes --no-pager --threshold=66 " + path);  // tenths
    INFO(t.out);
    CHECK(t.status == 0);
    {
        TempDir bare;
        std::string b = "[Service]\nType=simple\nExecStart=" + std::string(AGENTD_BINARY) + " serve\n";
        const double unconfined = exposure(write_unit(bare, b));
        CHECK(unconfined > kThreshold);
        auto tb = run_cmd("systemd-analyze security --offline=yes --no-pager --threshold=66 " +
                          (bare.path / "agentd.service").string());
        CHECK(tb.status != 0);
    }

    // CapabilityBoundingSet= is the table, name for name.
    std::smatch m;
    REQUIRE(std::regex_search(unit, m, std::regex("\\nCapabilityBoundingSet=([^\\n]*)\\n")));
    std::vector<std::string> in_unit;
    std::istringstream words(m[1].str());
    for (std::string w; words >> w;) {
        std::transform(w.begin(), w.end(), w.begin(), [](unsigned char ch) { return std::tolower(ch); });
        in_unit.push_back(w);
    }
    std::sort(in_unit.begin(), in_unit.end());
    std::vector<std::string> table;
    for (const auto& k : kept_capabilities()) table.emplace_back(k.name);
    std::sort(table.begin(), table.end());
    CHECK(in_unit == table);
    for (const char* line : {"\nProtectSystem=strict\n", "\nSystemCallArchitectures=native\n", "\nNoNewPrivileges=yes\n",
                             "\nLockPersonality=yes\n", "\nProtectHome=read-only\n", "\nPrivateTmp=yes\n"})
        CHECK(unit.find(line) != std::string::npos);
}

TEST_CASE("agentd serve under its own compiled seccomp filter serves a real run", "[privilege][seccomp]") {
    auto f = load_self_filter(AGENTD_SELF_BUNDLE);
    INFO((f ? "" : f.error()));
    REQUIRE(f);
    CHECK(f->tool == "agentd-self");

    // The probe: refused with the filter's errno under it, answered
    // otherwise by the kernel without it (control), and a listed call passes.
    const auto free_ = probe_calls(nullptr);
    const auto confined = probe_calls(&*f);
    REQUIRE(free_.size() == 4);
    REQUIRE(confined.size() == 4);
    for (int i = 0; i < 3; ++i) {
        INFO("call " << i << ": unconfined errno " << free_[i] << ", confined " << confined[i]);
        CHECK(free_[i] != kSelfFilterErrno);
        CHECK(confined[i] == kSelfFilterErrno);
    }
    CHECK(free_[3] == 0);
    CHECK(confined[3] == 0);

    PrivateBpf bpf("bulwark-privilege-seccomp");
    auto args = bpf.args();
    args.push_back("--self-seccomp");
    args.push_back(AGENTD_SELF_BUNDLE);
    TempDir rules;
    const auto rules_dir = loopback_rules(rules);
    // A site's tool whose rules go beyond agentd-self.yaml: said at start.
    std::ofstream(rules.path / "logger.yaml") << "tool: logger\ndescription: reads the kernel log\n"
                                                 "extends: base/minimal\nbinaries: [/usr/bin/dmesg]\n"
                                                 "syscalls:\n  allow: [syslog]\n";
    Daemon d(args, rules_dir);
    {
        const std::string log = d.child->output();
        INFO(log);
        CHECK(log.find("tool logger: its rules allow syscalls agentd's own seccomp filter (agentd-self) refuses, which "
                       "answer errno 131 (a socket family: EPERM) in its runs: syslog (") != std::string::npos);
        CHECK(log.find("tool cat: its rules allow") == std::string::npos);  // the control: a shipped tool
    }
    const auto ad = creds_of(d.child->pid);
    CHECK(ad.seccomp == 2);
    CHECK(ad.seccomp_filters >= 1);
    for (const auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(d.child->pid) + "/task")) {
        auto tc = read_proc_credentials((t.path() / "status").string());
        REQUIRE(tc);
        CHECK(tc->seccomp == 2);
    }
    auto h = d.call("GET", "/v1/health");
    REQUIRE(h.status == 200);
    INFO(h.raw);
    const auto& sf = h.body["host"]["hardening"]["privilege"]["seccomp_filter"];
    CHECK(sf["bundle"] == AGENTD_SELF_BUNDLE);
    CHECK(sf["hash"] == f->hash);
    CHECK(h.body["host"]["hardening"]["privilege"]["now"]["seccomp"] == 2);
    const bool bpf_up = h.body["host"]["bpf"].contains("programs");
    const bool kaudit_up = h.body["host"]["kernel_audit"].value("audit", "").starts_with("on");

    // A real run under it: a tool spawned, denied by Landlock, the denial
    // read from kernel audit and stored; the run bound to the BPF layer.
    uint64_t id = create_task(d, {{"tools", {"cat"}}});
    REQUIRE(::access("/etc/passwd", R_OK) == 0);
    auto denied = d.exec(id, {{"tool", "cat"}, {"argv", {"cat", "/etc/passwd"}}});
    INFO(denied.raw);
    REQUIRE(denied.status == 200);
    CHECK(denied.body["exit_status"] == 1);
    uint64_t run = denied.body["run_id"];
    if (kaudit_up) {
        auto rows = d.call("GET", "/v1/audit?run=" + std::to_string(run) + "&layer=landlock");
        REQUIRE(rows.status == 200);
        REQUIRE(rows.body["rows"].size() == 1);
        CHECK(rows.body["rows"][0]["object"] == "/etc/passwd");
    } else {
        WARN("kernel audit unavailable here: the stored denial is not checked");
    }
    if (bpf_up) {
        // curl-loop's rules name no unix socket: the cgroup connect_unix
        // program bound to the run refuses a connect to one, and its
        // decision comes back through the ring buffer.
        uint64_t cid = create_task(d, {{"tools", {"curl-loop"}}});
        const std::string sock = "/run/bulwark-privilege-test.sock";
        auto c = d.exec(cid, {{"tool", "curl-loop"},
                              {"argv", {"curl", "-sS", "--max-time", "3", "--unix-socket", sock, "http://localhost/"}}});
        INFO(c.raw.substr(0, 4000));
        REQUIRE(c.status == 200);
        CHECK(c.body["exit_status"] != 0);
        bool bound = false;
        for (const auto& row : c.body["decisions"])
            if (row["layer"] == "sock_unix" && row["decision"] == "deny" && row["object"] == "unix stream " + sock)
                bound = true;
        if (!bound) FAIL_CHECK("no sock_unix deny of " << sock << " among " << c.body["decisions"].dump());
    } else {
        WARN("BPF runtime unavailable here: the binding is not checked");
    }
    auto ok = d.exec(id, {{"tool", "cat"}, {"argv", {"cat", "--version"}}});
    INFO(ok.raw);
    REQUIRE(ok.status == 200);
    CHECK(ok.body["exit_status"] == 0);
}

TEST_CASE("docs/agentd-privilege.md's table is the kept table", "[privilege][docs]") {
    const std::string doc = slurp(BULWARK_PRIVILEGE_DOC);
    REQUIRE(!doc.empty());
    std::vector<std::string> rows;
    std::regex row("\\n\\| `(cap_[a-z_]+)` \\| ");
    for (auto it = std::sregex_iterator(doc.begin(), doc.end(), row); it != std::sregex_iterator(); ++it)
        rows.push_back((*it)[1]);
    std::vector<std::string> table;
    for (const auto& k : kept_capabilities()) table.emplace_back(k.name);
    CHECK(rows == table);
}
