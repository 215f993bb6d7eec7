// Denies below an allowed subtree, on a host without the BPF LSM: the mount
// layer holds them (docs/rule-language.md, "Denies below an allowed
// directory"). Each attempt runs unconfined in a fresh tree (the control:
// it must work) and sandboxed under a compiled rule file whose files.read,
// write, create and remove grant the work directory, with denies below it
// (it must fail with one of the errnos listed). A second control runs the
// first attempt sandboxed without the denies: it works, so it is the deny
// that stops it. Then: a rule no layer in force holds refuses the launch,
// naming file:line:col, unless it says `unenforceable: run`.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "bulwark/policy/compiler.h"
#include "bulwark/policy/instantiate.h"
#include "spawn_fixture.h"
#include "private_runtime.h"
#include "sandbox/spawner.h"

using namespace bulwark;
namespace fs = std::filesystem;

namespace {

std::string deep(const std::string& root, int levels, const std::string& leaf) {
    std::string p = root;
    for (int i = 0; i < levels; ++i) p += "/d";
    return p + "/" + leaf;
}

void write_file(const std::string& p) {
    fs::create_directories(fs::path(p).parent_path());
    std::ofstream(p) << "secret\n";
}

// The tree every attempt starts from (owned by 65534, the tool's uid).
void lay_tree(const std::string& w) {
    for (const auto& e : fs::directory_iterator(w)) fs::remove_all(e.path());
    write_file(w + "/secret/x");
    write_file(deep(w + "/secret", 300, "x"));
    write_file(w + "/sub/deep/x");
    write_file(w + "/ro/f");
    write_file(w + "/a");
    fs::create_directories(w + "/other");
    for (const auto& e : fs::recursive_directory_iterator(w)) REQUIRE(::lchown(e.path().c_str(), 65534, 65534) == 0);
}

std::string rules(bool denies, const std::string& extra = "") {
    std::string r = "tool: denyprobe\nextends: base/minimal\nbinaries: [" DENY_PROBE "]\n"
                    "files:\n  read: [\"${workdir}\", " DENY_PROBE "]\n  write: [\"${workdir}\"]\n"
                    "  create: [\"${workdir}\"]\n  remove: [\"${workdir}\"]\n";
    if (denies)
        r += "  deny:\n    - \"${workdir}/secret\"\n    - \"${workdir}/sub/deep\"\n"
             "    - { path: \"${workdir}/ro\", rights: [write, create, remove] }\n    - \"${workdir}/later\"\n";
    r += "exec: { allow: [" DENY_PROBE "] }\n" + extra;
    return r;
}

policy::Bundle bundle_for(const std::string& text, const std::string& workdir) {
    policy::CompileOptions o;
    o.rules_dirs = {BULWARK_RULES_DIR};
    auto c = policy::compile_string(text, "denyprobe.yaml", o);
    INFO(policy::render_diagnostics(c));
    REQUIRE(c.ok());
    policy::TaskVars vars{{"workdir", workdir}, {"home", "/nonexistent-home"}, {"tmp", "/tmp"}, {"task_id", "t"}};
    auto b = policy::instantiate(*c.bundle, vars, [](std::string_view h) -> std::expected<std::vector<std::string>, std::string> {
        return std::unexpected("no host names in this test: " + std::string(h));
    });
    REQUIRE(b);
    return *b;
}

std::string verdict(const std::string& out) {
    auto nl = out.find('\n');
    return out.substr(0, nl);
}

std::string unconfined(const std::vector<std::string>& args, const std::string& cwd) {
    return verdict(test::run_unconfined(DENY_PROBE, args, cwd));
}

std::vector<std::string> probe_argv(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {DENY_PROBE};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
}

// Bound to the host's BPF programs as they are here: the cgroup socket
// programs in force, the BPF LSM refused, so the mount layer alone holds the
// denies below the work directory.
RunReport sandboxed(test::PrivateRuntime& rt, const policy::Bundle& b, const std::vector<std::string>& args,
                    const std::string& w) {
    static uint64_t run_id = 0;
    return rt.run(b, ++run_id, probe_argv(args), w);
}

// With no BPF binding at all.
RunReport unbound(const policy::Bundle& b, const std::vector<std::string>& args, const std::string& w) {
    RunRequest req;
    req.argv = probe_argv(args);
    req.workdir = w;
    req.bpf_unavailable = "not bound in this test";
    return run_tool(b, req);
}

// A private runtime for one test case, or the case fails saying why.
std::unique_ptr<test::PrivateRuntime> runtime_for(const std::string& tag) {
    auto rt = std::make_unique<test::PrivateRuntime>("bulwark-deny-" + tag + "-" + std::to_string(::getpid()));
    if (!rt->rt) FAIL("BPF runtime: " << rt->error);
    return rt;
}

struct Attempt {
    const char* name;
    std::vector<std::string> args;       // relative to the work directory unless absolute
    std::set<std::string> contained;     // accepted sandboxed verdicts
    std::function<void(const std::string& w)> after_launch;  // changes the host tree while the tool waits
};

}  // namespace

TEST_CASE("denies below an allowed subtree hold without the BPF LSM, at any depth, for what exists and what comes later") {
    std::string w = test::make_workdir("deny");
    auto rt = runtime_for("subtree");
    const std::string d300 = deep("secret", 300, "x");
    const std::set<std::string> acc{"DENIED EACCES"}, moved{"DENIED EACCES", "DENIED EXDEV"},
        busy{"DENIED EBUSY"}, rofs{"DENIED EROFS"},
        rofs_or_perm{"DENIED EROFS", "DENIED EPERM"};
    std::vector<Attempt> battery = {
        {"read", {"read", "secret/x"}, acc, {}},
        {"read at depth 300", {"read", d300}, acc, {}},
        {"read through //, /./ and the absolute path", {"read", w + "//secret/./x"}, acc, {}},
        {"read through /proc/self/cwd", {"read", "/proc/self/cwd/secret/x"}, acc, {}},
        {"write", {"write", "secret/x"}, acc, {}},
        {"write at depth 300", {"write", d300}, acc, {}},
        {"create", {"create", "secret/new"}, acc, {}},
        {"mkdir", {"mkdir", "secret/newdir"}, acc, {}},
        {"create at depth 300", {"create", deep("secret", 300, "new")}, acc, {}},
        {"unlink", {"unlink", "secret/x"}, acc, {}},
        {"rename into", {"rename", "a", "secret/a"}, moved, {}},
        {"rename out", {"rename", "secret/x", "x2"}, moved, {}},
        {"hard link into", {"link", "a", "secret/a"}, moved, {}},
        {"hard link out", {"link", "secret/x", "x2"}, moved, {}},
        {"symlink through it", {"symlink_read", "secret", "lnk", "x"}, acc, {}},
        {"move the denied directory away", {"rename", "secret", "moved"}, busy, {}},
        {"exchange it with another directory", {"exchange", "secret", "other"}, busy, {}},
        {"chmod it", {"chmod", "secret"}, rofs_or_perm, {}},
        {"move its parent away and rebuild the path", {"rebuild", "sub", "sub2", "sub/deep"}, busy, {}},
        {"subtree made after launch, read at depth 300",
         {"wait", "go", "read", deep("secret/later", 300, "y")},
         acc,
         [](const std::string& wd) {
             write_file(deep(wd + "/secret/later", 300, "y"));
             std::ofstream(wd + "/go") << "";
         }},
        {"write to a read-only deny", {"write", "ro/f"}, rofs, {}},
        {"create in a read-only deny", {"create", "ro/n"}, rofs, {}},
        {"unlink in a read-only deny", {"unlink", "ro/f"}, rofs, {}},
        {"absent at launch: make it and write in it", {"mkdirs_create", "later"}, acc, {}},
        {"absent at launch: create it as a file", {"create", "later"}, {"DENIED EEXIST", "DENIED EACCES"}, {}},
    };
    auto with = rules(true);
    SECTION("each attempt: the control works, the sandboxed one is refused") for (const auto& a : battery) {
        INFO(a.name);
        lay_tree(w);
        if (a.after_launch) a.after_launch(w);
        CHECK(unconfined(a.args, w) == "OK");
        lay_tree(w);
        auto b = bundle_for(with, w);
        RunReport r;
        std::thread t;
        if (a.after_launch) t = std::thread([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            a.after_launch(w);
        });
        r = sandboxed(*rt, b, a.args, w);
        if (t.joinable()) t.join();
        INFO("error: " << r.error << "\nstderr: " << r.stderr_data);
        REQUIRE(r.outcome == RunOutcome::Exited);
        std::string v = verdict(r.stdout_data);
        INFO("sandboxed: " << v);
        CHECK(a.contained.contains(v));
        // Nothing of the placeholder stays behind.
        CHECK_FALSE(fs::exists(w + "/later"));
    }

    SECTION("what the denies leave alone still works") {
        lay_tree(w);
        auto b = bundle_for(with, w);
        for (const std::vector<std::string>& args :
             std::vector<std::vector<std::string>>{{"read", "ro/f"}, {"read", "sub/x2"}, {"create", "other/n"},
                                                   {"rename", "a", "other/a"}}) {
            if (args[1] == "sub/x2") {
                write_file(w + "/sub/x2");
                REQUIRE(::lchown((w + "/sub/x2").c_str(), 65534, 65534) == 0);
            }
            auto r = sandboxed(*rt, b, args, w);
            INFO(args[0] << " " << args[1] << ": " << r.error << r.stderr_data);
            CHECK(verdict(r.stdout_data) == "OK");
        }
    }

    SECTION("the same attempts work sandboxed without the denies") {
        lay_tree(w);
        auto b = bundle_for(rules(false), w);
        for (const auto& args : std::vector<std::vector<std::string>>{{"read", "secret/x"}, {"read", d300}}) {
            auto r = sandboxed(*rt, b, args, w);
            INFO(r.error << r.stderr_data);
            CHECK(verdict(r.stdout_data) == "OK");
        }
    }

    SECTION("the run report names the mount layer for each deny") {
        lay_tree(w);
        auto r = sandboxed(*rt, bundle_for(with, w), {"read", "a"}, w);
        REQUIRE(r.outcome == RunOutcome::Exited);
        int masked = 0;
        for (const auto& row : r.coverage) {
            std::string text = row["rule"]["text"];
            if (!text.starts_with("files.deny") || text.find("${workdir}") == std::string::npos) continue;
            INFO(row.dump());
            CHECK(row["held"] == true);
            CHECK(row["enforced_by"] == nlohmann::json::array({"mount"}));
            CHECK(row["not_in_force"].contains("bpf_lsm"));
            ++masked;
        }
        CHECK(masked == 4);
        CHECK(r.unenforced.empty());
        CHECK(r.coverage_summary.find("0 held by no layer here") != std::string::npos);
    }
    test::remove_tree(w);
}

TEST_CASE("a rule no layer in force holds refuses the launch, naming it; unenforceable: run lets it start") {
    std::string w = test::make_workdir("unheld");
    write_file(w + "/a");
    // Unbound, nothing holds the network rules (the cgroup socket programs)
    // nor the refusal of unix sockets no rule names (the cgroup unix
    // programs or the BPF LSM).
    const std::string net = "network:\n  connect:\n    - { cidr: 127.0.0.1/32, ports: [9] }\n";
    auto r = unbound(bundle_for(rules(false, net), w), {"read", "a"}, w);
    INFO(r.error);
    CHECK(r.outcome == RunOutcome::Refused);
    CHECK(r.exit_status() == kExitRefused);
    CHECK(r.refusal_code == "rule_unenforced");
    CHECK(r.error.find("denyprobe.yaml:12:7: network.connect: {cidr: 127.0.0.1/32, ports: [9]}: no layer in force "
                       "here holds it: sock_addr: not bound in this test") != std::string::npos);
    CHECK(r.error.find("network.unix: a connect or addressed send to a unix socket no rule names is refused (a file "
                       "grant is not a connect right): no layer in force here holds it: sock_unix: not bound in this "
                       "test; bpf_lsm: not bound in this test") != std::string::npos);
    // in the host's network namespace an abstract name is the host's: only the BPF LSM (or a seccomp bind deny) holds it
    CHECK(r.error.find("binding an abstract unix name no bind rule names is refused") != std::string::npos);
    CHECK(r.error.find("unenforceable: run") != std::string::npos);
    CHECK(r.stdout_data.empty());

    // The rule's own opt-out covers that rule (and the default deny of the
    // network rules, every one of which may now run unheld), not the unix default.
    const std::string optout = "network:\n  connect:\n    - { cidr: 127.0.0.1/32, ports: [9], unenforceable: run }\n";
    auto still = unbound(bundle_for(rules(false, optout), w), {"read", "a"}, w);
    CHECK(still.outcome == RunOutcome::Refused);
    CHECK(still.error.find("2 rule(s) of denyprobe") != std::string::npos);
    CHECK(still.error.find("network.unix: a connect") != std::string::npos);

    // The file's opt-out lets it start, with every gap on record.
    auto whole = unbound(bundle_for("unenforceable: run\n" + rules(false, optout), w), {"read", "a"}, w);
    INFO(whole.error);
    CHECK(whole.outcome == RunOutcome::Exited);
    CHECK(verdict(whole.stdout_data) == "OK");
    REQUIRE(whole.unenforced.size() == 4);
    CHECK(whole.unenforced[0].find("denyprobe.yaml:13:7") != std::string::npos);
    CHECK(whole.unenforced[1].find("everything the network rules do not allow is denied") != std::string::npos);
    CHECK(whole.unenforced[2].find("a file grant is not a connect right") != std::string::npos);
    CHECK(whole.unenforced[3].find("binding an abstract unix name") != std::string::npos);
    CHECK(to_json(whole)["rules"]["unenforced"].size() == 4);

    // Bound to the host's BPF programs, the cgroup unix programs hold the
    // connect default; the abstract binds of a host-netns tool stay unheld
    // without the BPF LSM: the narrow opt-out, network.unix.unenforceable,
    // starts it with that one gap on record.
    auto rt = runtime_for("held");
    if (!rt->rt->layer_states()["bpf_lsm"].empty()) {
        auto unix_gap = sandboxed(*rt, bundle_for(rules(false, net), w), {"read", "a"}, w);
        CHECK(unix_gap.outcome == RunOutcome::Refused);
        CHECK(unix_gap.error.find("1 rule(s) of denyprobe") != std::string::npos);
        auto narrow = sandboxed(*rt, bundle_for(rules(false, net + "  unix:\n    unenforceable: run\n"), w),
                                {"read", "a"}, w);
        INFO(narrow.error);
        CHECK(narrow.outcome == RunOutcome::Exited);
        REQUIRE(narrow.unenforced.size() == 1);
        CHECK(narrow.unenforced[0].find("binding an abstract unix name") != std::string::npos);
    }
    // Control: a tool that never binds (seccomp refuses bind) has every rule held, and runs.
    auto held = sandboxed(*rt, bundle_for(rules(false, net + "syscalls:\n  deny: [bind]\n"), w), {"read", "a"}, w);
    INFO(held.error);
    CHECK(held.outcome == RunOutcome::Exited);
    CHECK(verdict(held.stdout_data) == "OK");
    CHECK(held.unenforced.empty());
    CHECK(held.coverage_summary.find("0 held by no layer here") != std::string::npos);
    test::remove_tree(w);
}
