// agentd/oci: runc's command line as engines write it, a container's policy
// from its annotations, the spec and an exec's process confined.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "bulwark/policy/compiler.h"
#include "oci/confine_spec.h"
#include "oci/container_policy.h"
#include "oci/launch_policy.h"
#include "oci/runc_args.h"
#include "oci_box_rule.h"

using namespace bulwark::oci;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct TempDir {
    std::string path;
    TempDir() {
        char t[] = "/tmp/oci-unit-XXXXXX";
        path = ::mkdtemp(t);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

void write(const std::string& p, const std::string& text) {
    fs::create_directories(fs::path(p).parent_path());
    std::ofstream(p) << text;
}

const char* kRule = bulwark::test::kOciBoxRule;

json spec_with(const std::string& rootfs, json annotations) {
    return json{{"ociVersion", "1.0.2"},
                {"process",
                 {{"terminal", false},
                  {"cwd", "/work"},
                  {"args", {"sh", "-c", "true"}},
                  {"env", {"PATH=/bin", "HOME=/home/agent"}},
                  {"capabilities", {{"bounding", {"CAP_CHOWN"}}, {"effective", {"CAP_CHOWN"}}}},
                  {"rlimits", {{{"type", "RLIMIT_NOFILE"}, {"hard", 1024}, {"soft", 1024}}}}}},
                {"root", {{"path", rootfs}}},
                {"mounts", json::array({{{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}}})},
                {"linux",
                 {{"namespaces", {{{"type", "pid"}}, {{"type", "mount"}}}},
                  {"resources", {{"memory", {{"limit", 1 << 30}}}, {"pids", {{"limit", 4}}}}}}},
                {"annotations", annotations}};
}

}  // namespace

TEST_CASE("runc's command line as go-runc and conmon write it", "[oci][args]") {
    SECTION("containerd's shim: global options, create with its options, the id") {
        auto a = parse_runc_args({"--root", "/run/containerd/runc/k8s.io", "--log", "/x/log.json", "--log-format",
                                  "json", "--systemd-cgroup", "create", "--bundle", "/b", "--pid-file", "/b/init.pid",
                                  "--no-pivot", "c1"});
        CHECK(a.command == "create");
        CHECK(a.global_option("root") == "/run/containerd/runc/k8s.io");
        CHECK(a.global_option("log-format") == "json");
        CHECK(a.option({"bundle", "b"}) == "/b");
        CHECK(a.flag({"no-pivot"}));
        REQUIRE(a.args == std::vector<std::string>{"c1"});
        a.set_option({"bundle", "b"}, "/shadow");
        auto argv = a.argv("/usr/sbin/runc");
        CHECK(argv.front() == "/usr/sbin/runc");
        CHECK(std::find(argv.begin(), argv.end(), "/shadow") != argv.end());
        CHECK(std::find(argv.begin(), argv.end(), "/b") == argv.end());
        CHECK(argv.back() == "c1");
    }
    SECTION("--name=value, -b, and the options ending at the id") {
        auto a = parse_runc_args({"--root=/r", "create", "-b", "/b", "--console-socket=/s", "c2"});
        CHECK(a.global_option("root") == "/r");
        CHECK(a.option({"bundle", "b"}) == "/b");
        CHECK(a.option({"console-socket"}) == "/s");
        CHECK(a.args == std::vector<std::string>{"c2"});
        CHECK(a.argv("r") == std::vector<std::string>{"r", "--root=/r", "create", "--b", "/b", "--console-socket=/s", "c2"});
    }
    SECTION("exec: words after the id are the command, its own dashes included") {
        auto a = parse_runc_args({"exec", "--tty", "-e", "A=1", "c3", "sh", "-c", "echo --x"});
        CHECK(a.flag({"tty", "t"}));
        CHECK(a.option({"env", "e"}) == "A=1");
        CHECK(a.args == std::vector<std::string>{"c3", "sh", "-c", "echo --x"});
        auto p = parse_runc_args({"exec", "--process", "/p.json", "--detach", "--pid-file", "/p", "c3"});
        CHECK(p.option({"process", "p"}) == "/p.json");
        CHECK(p.args == std::vector<std::string>{"c3"});
    }
    SECTION("-- ends the options") {
        auto a = parse_runc_args({"exec", "--", "c4", "-x"});
        CHECK(a.dashdash);
        CHECK(a.args == std::vector<std::string>{"c4", "-x"});
        CHECK(a.argv("r") == std::vector<std::string>{"r", "exec", "--", "c4", "-x"});
    }
    SECTION("no command: runc --version") {
        auto a = parse_runc_args({"--version"});
        CHECK(a.command.empty());
        CHECK(a.argv("r") == std::vector<std::string>{"r", "--version"});
    }
}

TEST_CASE("a container's policy from its annotations", "[oci][policy]") {
    TempDir t;
    write(t.path + "/rules/box.yaml", kRule);
    RuntimeConfig cfg;
    cfg.rules_dir = t.path + "/rules";
    SECTION("compiled, instantiated for the container (workdir from its cwd, HOME)") {
        auto p = container_policy(cfg, spec_with(t.path + "/rootfs", {{"org.bulwark.tool", "box"}}), "ctr-1");
        INFO((p ? "" : p.error()));
        REQUIRE(p);
        CHECK(p->workdir == "/work");
        CHECK(p->bundle.hash == bulwark::policy::bundle_hash(p->bundle));
        bool workdir_rule = false;
        for (const auto& f : p->bundle.files) workdir_rule |= f.path == "/work/.git";
        CHECK(workdir_rule);
        CHECK(p->oci_seccomp["defaultAction"] == "SCMP_ACT_ERRNO");
    }
    SECTION("org.bulwark.workdir over the cwd; a cwd of / is refused, naming the annotation") {
        auto s = spec_with(t.path + "/rootfs", {{"org.bulwark.tool", "box"}, {"org.bulwark.workdir", "/data"}});
        auto p = container_policy(cfg, s, "c");
        REQUIRE(p);
        CHECK(p->workdir == "/data");
        s = spec_with(t.path + "/rootfs", {{"org.bulwark.tool", "box"}});
        s["process"]["cwd"] = "/";
        auto bad = container_policy(cfg, s, "c");
        REQUIRE_FALSE(bad);
        CHECK_THAT(bad.error(), Catch::Contains("org.bulwark.workdir"));
    }
    SECTION("a tool name is a rule file's name, never a path") {
        for (const char* name : {"../box", "/etc/passwd", ".hidden", ""}) {
            auto p = container_policy(cfg, spec_with("/r", {{"org.bulwark.tool", name}}), "c");
            REQUIRE_FALSE(p);
            CHECK_THAT(p.error(), Catch::Contains("org.bulwark.tool"));
        }
        auto p = container_policy(cfg, spec_with("/r", {{"org.bulwark.tool", "nosuch"}}), "c");
        REQUIRE_FALSE(p);
        CHECK_THAT(p.error(), Catch::Contains("no rule file"));
    }
    SECTION("a grant narrows; one that widens is refused, naming the annotation") {
        auto s = spec_with("/r", {{"org.bulwark.tool", "box"},
                                  {"org.bulwark.grant", R"({"files": [{"path": "/work/src", "rights": ["read"]},
                                                                      {"path": "/bin", "rights": ["read"]}]})"}});
        auto p = container_policy(cfg, s, "c");
        INFO((p ? "" : p.error()));
        REQUIRE(p);
        CHECK(p->granted);
        s["annotations"]["org.bulwark.grant"] = R"({"files": [{"path": "/etc", "rights": ["read"]}]})";
        auto wide = container_policy(cfg, s, "c");
        REQUIRE_FALSE(wide);
        CHECK_THAT(wide.error(), Catch::Contains("org.bulwark.grant") && Catch::Contains("more than the tool's rules allow"));
        s["annotations"]["org.bulwark.grant"] = R"({"files": {"read": ["/etc"]}})";
        auto malformed = container_policy(cfg, s, "c");
        REQUIRE_FALSE(malformed);
        CHECK_THAT(malformed.error(), Catch::Contains("org.bulwark.grant.files"));
        s["annotations"]["org.bulwark.grant"] = "{not json";
        CHECK_FALSE(container_policy(cfg, s, "c"));
    }
    SECTION("the pod's identity from containerd's or CRI-O's annotations") {
        auto id = pod_identity(spec_with("/r", {{"io.kubernetes.cri.sandbox-name", "p"},
                                                {"io.kubernetes.cri.sandbox-namespace", "ns"},
                                                {"io.kubernetes.cri.sandbox-uid", "u"},
                                                {"io.kubernetes.cri.container-name", "c"}}));
        CHECK(id == json{{"pod_name", "p"}, {"pod_namespace", "ns"}, {"pod_uid", "u"}, {"container_name", "c"}});
        auto crio = pod_identity(spec_with("/r", {{"io.kubernetes.pod.name", "p2"}}));
        CHECK(crio == json{{"pod_name", "p2"}});
        CHECK(pod_identity(spec_with("/r", json::object())).empty());
    }
}

TEST_CASE("the spec confined, step by step", "[oci][spec]") {
    TempDir t;
    write(t.path + "/rules/box.yaml", kRule);
    fs::create_directories(t.path + "/bundle/rootfs/work");
    RuntimeConfig cfg;
    cfg.rules_dir = t.path + "/rules";
    auto spec = spec_with("rootfs", {{"org.bulwark.tool", "box"}});
    auto p = container_policy(cfg, spec, "c");
    REQUIRE(p);
    auto c = confine_spec(spec, *p, t.path + "/bundle", t.path + "/launch");
    INFO((c ? "" : c.error()));
    REQUIRE(c);
    const json& s = c->spec;
    CHECK(s["root"]["path"] == t.path + "/bundle/rootfs");
    CHECK(s["process"]["noNewPrivileges"] == true);
    for (const char* set : {"bounding", "effective", "inheritable", "permitted", "ambient"})
        CHECK(s["process"]["capabilities"][set].empty());
    SECTION("limits lowered, never raised") {
        json nofile, fsize;
        for (const auto& r : s["process"]["rlimits"]) {
            if (r["type"] == "RLIMIT_NOFILE") nofile = r;
            if (r["type"] == "RLIMIT_FSIZE") fsize = r;
        }
        CHECK(nofile["hard"] == 128);
        CHECK(nofile["soft"] == 128);
        CHECK(fsize["hard"] == 1 << 20);
        CHECK(s["linux"]["resources"]["memory"]["limit"] == 64 << 20);
        CHECK(s["linux"]["resources"]["pids"]["limit"] == 4);  // the spec's 4 is lower than the rule's 8
        CHECK(s["linux"]["resources"]["cpu"]["quota"] == 50000);
        CHECK(s["linux"]["resources"]["cpu"]["period"] == 100000);
    }
    SECTION("the tool's seccomp filter in the spec; an engine's profile kept") {
        CHECK(s["linux"]["seccomp"] == p->oci_seccomp);
        auto with_engine = spec;
        with_engine["linux"]["seccomp"] = {{"defaultAction", "SCMP_ACT_ERRNO"}, {"syscalls", json::array()}};
        auto c2 = confine_spec(with_engine, *p, t.path + "/bundle", t.path + "/launch");
        REQUIRE(c2);
        CHECK(c2->spec["linux"]["seccomp"] == with_engine["linux"]["seccomp"]);
        CHECK_THAT(c2->report["seccomp"].get<std::string>(), Catch::Contains("launcher"));
    }
    SECTION("an empty network namespace for a tool without network rules") {
        CHECK(c->own_netns);
        bool net = false;
        for (const auto& ns : s["linux"]["namespaces"]) net |= ns["type"] == "network";
        CHECK(net);
    }
    SECTION("a deny below an allow masked over a placeholder made for it") {
        REQUIRE(c->masks.size() == 1);
        CHECK(c->masks[0].path == "/work/.git");
        CHECK(c->masks[0].held);
        CHECK(fs::is_directory(t.path + "/bundle/rootfs/work/.git"));
        CHECK(std::find(s["linux"]["maskedPaths"].begin(), s["linux"]["maskedPaths"].end(), "/work/.git") !=
              s["linux"]["maskedPaths"].end());
    }
    SECTION("below a mount that is not a bind mount, no mask holds the deny") {
        auto t2 = spec;
        t2["mounts"].push_back({{"destination", "/work"}, {"type", "tmpfs"}, {"source", "tmpfs"}});
        auto c2 = confine_spec(t2, *p, t.path + "/bundle", t.path + "/launch");
        REQUIRE(c2);
        REQUIRE(c2->masks.size() == 1);
        CHECK_FALSE(c2->masks[0].held);
        CHECK_THAT(c2->masks[0].how, Catch::Contains("not a bind mount"));
    }
    SECTION("the launcher first, its directory read-only") {
        CHECK(s["process"]["args"] == json({"/.bulwark/launch", "--", "sh", "-c", "true"}));
        const json& m = s["mounts"].back();
        CHECK(m["destination"] == "/.bulwark");
        CHECK(m["source"] == t.path + "/launch");
        CHECK(std::find(m["options"].begin(), m["options"].end(), "ro") != m["options"].end());
        auto taken = spec;
        taken["mounts"].push_back({{"destination", "/.bulwark"}, {"type", "bind"}, {"source", "/x"}});
        auto bad = confine_spec(taken, *p, t.path + "/bundle", t.path + "/launch");
        REQUIRE_FALSE(bad);
        CHECK_THAT(bad.error(), Catch::Contains("/.bulwark"));
    }
    SECTION("with a report directory: mounted writable, no exec, and the launcher told to report there") {
        auto r = confine_spec(spec, *p, t.path + "/bundle", t.path + "/launch", t.path + "/report");
        REQUIRE(r);
        CHECK(r->spec["process"]["args"] ==
              json({"/.bulwark/launch", "--report", "/.bulwark/report/launch.json", "--", "sh", "-c", "true"}));
        const json& m = r->spec["mounts"].back();
        CHECK(m["destination"] == "/.bulwark/report");
        CHECK(m["source"] == t.path + "/report");
        for (const char* o : {"rw", "noexec", "nosuid", "nodev"})
            CHECK(std::find(m["options"].begin(), m["options"].end(), o) != m["options"].end());
    }
    SECTION("a spec without a process or root is refused") {
        auto no_proc = spec;
        no_proc.erase("process");
        CHECK_FALSE(confine_spec(no_proc, *p, t.path, t.path));
        auto no_root = spec;
        no_root.erase("root");
        CHECK_FALSE(confine_spec(no_root, *p, t.path, t.path));
    }
}

TEST_CASE("an exec's process confined like the container's", "[oci][exec]") {
    auto p = confine_process({{"args", {"cat", "/etc/hostname"}},
                              {"capabilities", {{"bounding", {"CAP_SYS_ADMIN"}}, {"effective", {"CAP_SYS_ADMIN"}}}}});
    REQUIRE(p);
    CHECK((*p)["args"] == json({"/.bulwark/launch", "--", "cat", "/etc/hostname"}));
    CHECK((*p)["noNewPrivileges"] == true);
    for (const char* set : {"bounding", "effective", "inheritable", "permitted", "ambient"})
        CHECK((*p)["capabilities"][set].empty());
    CHECK_FALSE(confine_process({{"args", json::array()}}));
    CHECK_FALSE(confine_process(json::array()));
}

TEST_CASE("the launcher's policy is the container's bundle, its hash checked", "[oci][launch]") {
    TempDir t;
    write(t.path + "/rules/box.yaml", kRule);
    RuntimeConfig cfg;
    cfg.rules_dir = t.path + "/rules";
    auto p = container_policy(cfg, spec_with(t.path + "/rootfs", {{"org.bulwark.tool", "box"}}), "ctr-1");
    REQUIRE(p);
    const json written = launch_policy_to_json({p->workdir, p->bundle});
    auto back = launch_policy_from_json(written);
    REQUIRE(back);
    CHECK(back->workdir == "/work");
    CHECK(back->bundle.hash == p->bundle.hash);
    CHECK(back->bundle.binaries.at(0).path == "/bin/busybox");
    CHECK(back->bundle.seccomp.program.size() == p->bundle.seccomp.program.size());
    CHECK(back->bundle.landlock.paths.size() == p->bundle.landlock.paths.size());
    CHECK(back->bundle.limits.pids == 8u);
    // A policy changed after the runtime wrote it is not applied.
    json widened = written;
    widened["bundle"]["binaries"][0]["path"] = "/bin/other";
    auto refused = launch_policy_from_json(widened);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().find("hash") != std::string::npos);
    json unhashed = written;
    unhashed["bundle"]["hash"] = "";
    CHECK_FALSE(launch_policy_from_json(unhashed));
    CHECK_FALSE(launch_policy_from_json(json::object()));
    CHECK_FALSE(launch_policy_from_json({{"workdir", "/w"}, {"bundle", {{"tool", "x"}}}}));
}
