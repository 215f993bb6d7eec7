// Kernel audit source, on the host kernel: a Landlock-denied read and a
// seccomp-denied syscall in real sandboxed runs each become exactly one
// decision record (layer, object, task/run/tool); the controls (the same
// operation allowed by the policy, or unconfined) produce none; a burst is
// recorded or counted as lost, never both missing; a second reader in the
// same host sees the same records; `agentd run` reports the denial.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>

#include "spawn_fixture.h"
#include "kaudit/kernel_audit.h"
#include "sandbox/landlock.h"
#include "kaudit/run_registry.h"
#include "sandbox/spawner.h"
#include "tier_skip.h"

using namespace bulwark;

std::string bulwark::test::tier_requirements() {
    if (geteuid() != 0) return "privileged tier: needs root (run the suite as root)";
    int s = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT);
    if (s < 0) return std::string("kernel audit unavailable: socket(NETLINK_AUDIT): ") + std::strerror(errno);
    sockaddr_nl sa{};
    sa.nl_family = AF_NETLINK;
    sa.nl_groups = 1u << (AUDIT_NLGRP_READLOG - 1);
    int rc = ::bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    int e = errno;
    ::close(s);
    if (rc != 0) return std::string("kernel audit unavailable: cannot join AUDIT_NLGRP_READLOG: ") + std::strerror(e);
    if (landlock_abi() < 7)
        return "Landlock ABI " + std::to_string(landlock_abi()) +
               " < 7: denials after exec are not logged (no LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON)";
    return {};
}

namespace {

struct Harness {
    RunRegistry reg;
    std::mutex mu;
    std::vector<audit::AuditRecord> recs;
    uint64_t lost = 0;
    std::unique_ptr<KernelAuditReader> reader;
    uint64_t next_run = 1000;

    Harness() {
        KernelAuditOptions o;
        o.resolve = [this](const kaudit::KernelDenial& d) { return reg.resolve(d); };
        o.sink = [this](audit::AuditRecord r) {
            std::lock_guard lk(mu);
            recs.push_back(std::move(r));
        };
        o.on_lost = [this](const std::string&, uint64_t n) {
            std::lock_guard lk(mu);
            lost += n;
        };
        auto r = KernelAuditReader::start(std::move(o));
        if (!r) FAIL("KernelAuditReader::start: " << r.error());
        reader = std::move(*r);
    }

    struct Result {
        RunReport rep;
        uint64_t run_id = 0;
        std::vector<audit::AuditRecord> decisions;
        uint64_t lost = 0;
    };

    Result run(const policy::Bundle& b, std::vector<std::string> argv, const std::string& workdir) {
        Result res;
        res.run_id = ++next_run;
        uint64_t lost0;
        {
            std::lock_guard lk(mu);
            lost0 = lost;
        }
        RunRequest rq;
        rq.argv = std::move(argv);
        rq.workdir = workdir;
        std::string cg;
        rq.on_cgroup = [&](const std::string& path, pid_t pid) {
            cg = path;
            reg.add(path, pid, RunContext{7, res.run_id, "probe", 3});
        };
        res.rep = run_tool(b, rq);
        REQUIRE(!cg.empty());
        CHECK(reader->barrier(std::chrono::milliseconds(5000)));
        reg.remove(cg);
        std::lock_guard lk(mu);
        for (const auto& r : recs)
            if (r.run_id == res.run_id) res.decisions.push_back(r);
        res.lost = lost - lost0;
        return res;
    }
};

Harness& harness() {
    static Harness h;
    return h;
}

struct Dirs {
    std::string work = test::make_workdir("kaudit");
    // Visible in the sandbox (bound on its /etc), granted by no Landlock rule
    // of the probe's bundle: only Landlock stands in the way.
    std::string secret = "/etc/passwd";
    std::string inside = work + "/ok.txt";
    Dirs() {
        std::ofstream(inside) << "ok\n";
        ::chmod(inside.c_str(), 0644);
    }
    ~Dirs() { test::remove_tree(work); }
};

// The fixture's bundle with the dynamic loader's cache granted: the sandbox
// binds the host's /etc/ld.so.cache on its own /etc, which the fixture's
// /etc rule does not cover, and the probe's only denial must be the tested one.
policy::Bundle probe_bundle(const Dirs& d, std::vector<std::string> denied_syscalls = {}) {
    auto b = test::make_bundle({.binaries = {KAUDIT_PROBE}, .workdir = d.work, .extra_denied_syscalls = denied_syscalls});
    b.landlock.paths.push_back({"/etc/ld.so.cache", ll::kReadFile, 4});
    return b;
}

int run_unconfined(std::vector<std::string> argv) {
    pid_t c = ::fork();
    if (c == 0) {
        std::vector<char*> a;
        for (auto& s : argv) a.push_back(s.data());
        a.push_back(nullptr);
        int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, 1);
        ::execv(a[0], a.data());
        ::_exit(127);
    }
    int st = 0;
    ::waitpid(c, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace

TEST_CASE("a Landlock-denied read is one decision record naming the path; an allowed read none") {
    auto& h = harness();
    Dirs d;
    auto b = probe_bundle(d);

    // Control, unconfined: the probe really reads the file.
    REQUIRE(run_unconfined({KAUDIT_PROBE, "read", d.secret}) == 0);

    auto denied = h.run(b, {KAUDIT_PROBE, "read", d.secret}, d.work);
    INFO(summary(denied.rep) << denied.rep.stdout_data);
    REQUIRE(denied.rep.outcome == RunOutcome::Exited);
    CHECK(denied.rep.exit_code == 1);
    CHECK(denied.rep.stdout_data == "errno 13\n");
    REQUIRE(denied.decisions.size() == 1);
    const auto& r = denied.decisions[0];
    CHECK(r.layer == BW_LAYER_LANDLOCK);
    CHECK(r.decision == BW_DECISION_DENY);
    CHECK(r.op == BW_OP_FILE_OPEN);
    CHECK(r.object == d.secret);
    CHECK(r.err == EACCES);
    CHECK(r.task_id == 7);
    CHECK(r.run_id == denied.run_id);
    CHECK(r.tool == "probe");
    CHECK(r.policy_version == 3);
    CHECK(r.comm == "kaudit_probe");
    auto detail = nlohmann::json::parse(r.detail);
    CHECK(detail["access"] == "fs.read_file");
    CHECK(detail["syscall"] == "openat");
    CHECK(detail["source"] == "kernel_audit");

    // Allowed by the rule (the work directory): no decision.
    auto allowed = h.run(b, {KAUDIT_PROBE, "read", d.inside}, d.work);
    INFO(summary(allowed.rep));
    CHECK(allowed.rep.exit_code == 0);
    CHECK(allowed.decisions.empty());
}

TEST_CASE("a seccomp-denied syscall is one decision record naming the syscall; unfiltered none") {
    auto& h = harness();
    Dirs d;
    auto deny = probe_bundle(d, {"getppid"});
    auto r = h.run(deny, {KAUDIT_PROBE, "getppid", "1"}, d.work);
    INFO(summary(r.rep) << r.rep.stdout_data);
    REQUIRE(r.rep.outcome == RunOutcome::Exited);
    CHECK(r.rep.stdout_data == "failed 1\n");
    REQUIRE(r.decisions.size() == 1);
    const auto& rec = r.decisions[0];
    CHECK(rec.layer == BW_LAYER_SECCOMP);
    CHECK(rec.decision == BW_DECISION_DENY);
    CHECK(rec.op == BW_OP_SYSCALL);
    CHECK(rec.object == "getppid");
    CHECK(rec.run_id == r.run_id);
    CHECK(rec.task_id == 7);
    CHECK(rec.tool == "probe");
    CHECK(nlohmann::json::parse(rec.detail)["action"] == "errno");

    // Control: the same syscall under a filter that allows it.
    auto allow = probe_bundle(d);
    auto c = h.run(allow, {KAUDIT_PROBE, "getppid", "1"}, d.work);
    CHECK(c.rep.stdout_data == "failed 0\n");
    CHECK(c.decisions.empty());
}

TEST_CASE("a burst of denials is recorded or counted as lost, never both missing") {
    auto& h = harness();
    Dirs d;
    constexpr int kN = 3000;
    auto deny = probe_bundle(d, {"getppid"});
    auto t0 = std::chrono::steady_clock::now();
    auto r = h.run(deny, {KAUDIT_PROBE, "getppid", std::to_string(kN)}, d.work);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    INFO(summary(r.rep) << r.rep.stdout_data);
    CHECK(r.rep.stdout_data == "failed " + std::to_string(kN) + "\n");
    size_t n = r.decisions.size();
    std::printf("burst: %d denials, %zu recorded, %llu lost (counted), %.0f ms run+drain; reader %s\n", kN, n,
                static_cast<unsigned long long>(r.lost), ms, h.reader->status().dump().c_str());
    CHECK(n <= size_t(kN));
    // What the wait for a run's records costs when nothing is pending.
    std::vector<double> waits;
    for (int i = 0; i < 50; ++i) {
        auto b0 = std::chrono::steady_clock::now();
        REQUIRE(h.reader->barrier(std::chrono::milliseconds(2000)));
        waits.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - b0).count());
    }
    std::sort(waits.begin(), waits.end());
    std::printf("barrier (idle): p50 %.0f us, p99 %.0f us over %zu\n", waits[waits.size() / 2],
                waits[waits.size() * 99 / 100], waits.size());
    // Every denial is either a record or counted as lost: one lost record
    // no longer excuses any number of missing ones.
    CHECK(n + r.lost >= size_t(kN));
    for (const auto& rec : r.decisions) CHECK(rec.object == "getppid");
}

TEST_CASE("a second reader coexists; records of processes in no run are ignored, counted") {
    auto& h = harness();
    RunRegistry empty;
    std::atomic<int> sunk{0};
    KernelAuditOptions o;
    o.resolve = [&](const kaudit::KernelDenial& d) { return empty.resolve(d); };
    o.sink = [&](audit::AuditRecord) { ++sunk; };
    auto second = KernelAuditReader::start(std::move(o));
    REQUIRE(second);
    Dirs d;
    auto b = probe_bundle(d);
    uint64_t before = (*second)->status()["denials_not_sandboxed"].get<uint64_t>();
    auto r = h.run(b, {KAUDIT_PROBE, "read", d.secret}, d.work);
    REQUIRE((*second)->barrier(std::chrono::milliseconds(5000)));
    CHECK(r.decisions.size() == 1);  // the first reader still gets it
    CHECK(sunk == 0);
    CHECK((*second)->status()["denials_not_sandboxed"].get<uint64_t>() >= before + 1);
    auto st = h.reader->status();
    CHECK(st["records_malformed"] == 0);
    CHECK(st["audit"].get<std::string>().starts_with("on"));
}

namespace {
// AUDIT_SET enabled=<on> on a fresh netlink socket; true on the kernel's ack.
bool set_audit_enabled(uint32_t on) {
    int s = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT);
    if (s < 0) return false;
    struct {
        nlmsghdr h;
        audit_status st;
    } req{};
    req.h.nlmsg_len = NLMSG_LENGTH(sizeof(audit_status));
    req.h.nlmsg_type = AUDIT_SET;
    req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    req.h.nlmsg_seq = 1;
    req.st.mask = AUDIT_STATUS_ENABLED;
    req.st.enabled = on;
    sockaddr_nl k{};
    k.nl_family = AF_NETLINK;
    bool ok = ::sendto(s, &req, req.h.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&k), sizeof k) > 0;
    alignas(nlmsghdr) char buf[1024];
    ok = ok && ::recv(s, buf, sizeof buf, 0) > 0 &&
         reinterpret_cast<nlmsghdr*>(buf)->nlmsg_type == NLMSG_ERROR &&
         static_cast<nlmsgerr*>(NLMSG_DATA(reinterpret_cast<nlmsghdr*>(buf)))->error == 0;
    ::close(s);
    return ok;
}
}  // namespace

TEST_CASE("audit off: the reader turns it on, says so, and Landlock denials arrive; on: left as it is") {
    // With audit disabled Landlock logs nothing. (This briefly switches the
    // host's audit off; every reader turns it on again at its start.)
    REQUIRE(set_audit_enabled(0));
    RunRegistry reg;
    std::mutex mu;
    std::vector<audit::AuditRecord> recs;
    KernelAuditOptions o;
    o.resolve = [&](const kaudit::KernelDenial& d) { return reg.resolve(d); };
    o.sink = [&](audit::AuditRecord r) {
        std::lock_guard lk(mu);
        recs.push_back(std::move(r));
    };
    auto r = KernelAuditReader::start(std::move(o));
    if (!r) set_audit_enabled(1);
    REQUIRE(r);
    auto st = (*r)->status();
    CHECK(st["audit"].get<std::string>().starts_with("on (was off; enabled by agentd"));
    Dirs d;
    auto b = probe_bundle(d);
    RunRequest rq;
    rq.argv = {KAUDIT_PROBE, "read", d.secret};
    rq.workdir = d.work;
    std::string cg;
    rq.on_cgroup = [&](const std::string& path, pid_t pid) {
        cg = path;
        reg.add(path, pid, RunContext{1, 1, "probe", 1});
    };
    auto rep = run_tool(b, rq);
    CHECK(rep.exit_code == 1);
    REQUIRE((*r)->barrier(std::chrono::milliseconds(5000)));
    reg.remove(cg);
    {
        std::lock_guard lk(mu);
        REQUIRE(recs.size() == 1);
        CHECK(recs[0].object == d.secret);
    }
    // Audit on: a new reader leaves it alone.
    KernelAuditOptions o2;
    o2.resolve = [&](const kaudit::KernelDenial& x) { return reg.resolve(x); };
    o2.sink = [](audit::AuditRecord) {};
    auto r2 = KernelAuditReader::start(std::move(o2));
    REQUIRE(r2);
    CHECK((*r2)->status()["audit"] == "on");
}

TEST_CASE("agentd run: cat /etc/passwd under rules/cat.yaml reports the Landlock denial") {
    Dirs d;
    std::string out = d.work + "/report.json";
    std::string cmd = std::string("cd ") + d.work + " && " + AGENTD_BIN + " run --rules " + BULWARK_RULES_DIR +
                      " --tool cat --json -- cat /etc/passwd ok.txt > " + out + " 2>/dev/null";
    int rc = std::system(cmd.c_str());
    CHECK(WEXITSTATUS(rc) == 1);
    std::ifstream in(out);
    auto j = nlohmann::json::parse(in);
    INFO(j.dump(2));
    CHECK(j["stdout"]["data"] == "ok\n");
    REQUIRE(j["decisions"].size() == 1);
    CHECK(j["decisions"][0]["layer"] == "landlock");
    CHECK(j["decisions"][0]["decision"] == "deny");
    CHECK(j["decisions"][0]["op"] == "file_open");
    CHECK(j["decisions"][0]["object"] == "/etc/passwd");
    CHECK(j["decisions"][0]["tool"] == "cat");
    CHECK(j["kernel_audit"]["state"] == "read");
}

TEST_CASE("agentd run: a syscall denied by a compiled rule file is a seccomp decision; without the rule none") {
    Dirs d;
    std::string rules = d.work + "/rules";
    REQUIRE(::mkdir(rules.c_str(), 0755) == 0);
    REQUIRE(::symlink((std::string(BULWARK_RULES_DIR) + "/base").c_str(), (rules + "/base").c_str()) == 0);
    auto write_rules = [&](const std::string& tool, const std::string& syscalls) {
        std::ofstream(rules + "/" + tool + ".yaml")
            << "tool: " << tool << "\ndescription: kernel audit probe\nextends: base/minimal\n"
            << "binaries: [" << KAUDIT_PROBE << "]\nfiles:\n  read: [\"${workdir}\"]\n"
            << "exec:\n  allow: [" << KAUDIT_PROBE << "]\nsyscalls:\n  baseline: default\n" << syscalls;
    };
    write_rules("denies", "  deny: [getppid]\n");
    write_rules("allows", "");
    auto run = [&](const std::string& tool) {
        std::string out = d.work + "/" + tool + ".json";
        std::string cmd = std::string("cd ") + d.work + " && " + AGENTD_BIN + " run --rules " + rules + " --tool " +
                          tool + " --json -- " + KAUDIT_PROBE + " getppid 2 > " + out + " 2>/dev/null";
        int rc = std::system(cmd.c_str());
        CHECK(WEXITSTATUS(rc) == 0);
        std::ifstream in(out);
        return nlohmann::json::parse(in);
    };
    auto denied = run("denies");
    INFO(denied.dump(2));
    CHECK(denied["stdout"]["data"] == "failed 2\n");
    REQUIRE(denied["decisions"].size() == 2);
    for (const auto& r : denied["decisions"]) {
        CHECK(r["layer"] == "seccomp");
        CHECK(r["decision"] == "deny");
        CHECK(r["op"] == "syscall");
        CHECK(r["object"] == "getppid");
        CHECK(r["tool"] == "denies");
        CHECK(r["detail"]["action"] == "errno");
        CHECK(r["comm"] == "kaudit_probe");
    }
    auto allowed = run("allows");
    INFO(allowed.dump(2));
    CHECK(allowed["stdout"]["data"] == "failed 0\n");
    CHECK(allowed["decisions"].empty());
}

TEST_CASE("agentd run: an i386 call through int $0x80 refused by default is one explained seccomp decision") {
    Dirs d;
    // Control: the kernel runs i386 calls from a 64-bit process.
    {
        std::string cmd = std::string(KAUDIT_ABIPROBE) + " i386_getpid > /dev/null";
        int rc = std::system(cmd.c_str());
        if (WEXITSTATUS(rc) == 3) {
            WARN("no IA32 emulation on this kernel: int $0x80 cannot be tried");
            return;
        }
        REQUIRE(WEXITSTATUS(rc) == 0);
    }
    std::string rules = d.work + "/rules";
    REQUIRE(::mkdir(rules.c_str(), 0755) == 0);
    REQUIRE(::symlink((std::string(BULWARK_RULES_DIR) + "/base").c_str(), (rules + "/base").c_str()) == 0);
    auto write_rules = [&](const std::string& tool, const std::string& syscalls) {
        std::ofstream(rules + "/" + tool + ".yaml")
            << "tool: " << tool << "\ndescription: foreign ABI probe\nextends: base/minimal\n"
            << "binaries: [" << KAUDIT_ABIPROBE << "]\nfiles:\n  read: [\"${workdir}\"]\n"
            << "exec:\n  allow: [" << KAUDIT_ABIPROBE << "]\n" << syscalls;
    };
    write_rules("native", "");
    write_rules("compat", "syscalls:\n  architectures: [native, i386]\n");
    auto run = [&](const std::string& tool, int want_rc) {
        std::string out = d.work + "/" + tool + ".json";
        std::string cmd = std::string("cd ") + d.work + " && " + AGENTD_BIN + " run --rules " + rules + " --tool " +
                          tool + " --json -- " + KAUDIT_ABIPROBE + " i386_getpid > " + out + " 2>/dev/null";
        int rc = std::system(cmd.c_str());
        CHECK(WEXITSTATUS(rc) == want_rc);
        std::ifstream in(out);
        return nlohmann::json::parse(in);
    };
    auto refused = run("native", 1);
    INFO(refused.dump(2));
    CHECK(refused["stdout"]["data"].get<std::string>().starts_with("DENIED EPERM"));
    REQUIRE(refused["decisions"].size() == 1);
    const auto& r = refused["decisions"][0];
    CHECK(r["layer"] == "seccomp");
    CHECK(r["decision"] == "deny");
    CHECK(r["op"] == "syscall");
    CHECK(r["object"] == "getpid");  // named through the i386 table
    CHECK(r["errno"] == EPERM);      // base/minimal's violation errno, from the run's filter
    CHECK(r["detail"]["arch"] == AUDIT_ARCH_I386);
    CHECK(r["detail"]["abi"] == "i386");
    CHECK(r["detail"]["action"] == "errno");
    CHECK(r["detail"]["abi_refused"].get<std::string>().find("syscalls.architectures") != std::string::npos);
    CHECK_FALSE(r["detail"].contains("judged"));

    // Accepted: the same call works and nothing is recorded.
    auto accepted = run("compat", 0);
    INFO(accepted.dump(2));
    CHECK(accepted["stdout"]["data"].get<std::string>().starts_with("OK"));
    CHECK(accepted["decisions"].empty());
}
