#include "oci/runtime.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bulwark/policy/compiler.h"
#include "bulwark/policy/coverage.h"
#include "mcp/agentd_client.h"
#include "oci/confine_spec.h"
#include "oci/container_policy.h"
#include "oci/launch_policy.h"
#include "oci/runc_args.h"
#include "oci/runtime_config.h"
#include "sandbox/landlock.h"
#include "sandbox/rule_coverage.h"
#include "sandbox/seccomp_install.h"

namespace bulwark::oci {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {


std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

bool write_file(const std::string& path, const std::string& text, mode_t mode = 0600) {
    const std::string tmp = path + ".tmp";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) return false;
    size_t off = 0;
    while (off < text.size()) {
        ssize_t n = ::write(fd, text.data() + off, text.size() - off);
        if (n <= 0) {
            ::close(fd);
            return false;
        }
        off += static_cast<size_t>(n);
    }
    ::close(fd);
    return ::rename(tmp.c_str(), path.c_str()) == 0;
}

std::string rfc3339_now() {
    char buf[64];
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

// execv's argv: the words, then a null.
std::vector<char*> c_argv(const std::vector<std::string>& words) {
    std::vector<char*> a;
    for (const auto& w : words) a.push_back(const_cast<char*>(w.c_str()));
    a.push_back(nullptr);
    return a;
}

// Runs the delegate and waits for it; its exit status.
int run_delegate(const std::vector<std::string>& argv) {
    pid_t pid = ::fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        auto a = c_argv(argv);
        ::execv(a[0], a.data());
        std::fprintf(stderr, "bulwark-oci: exec %s: %s\n", a[0], std::strerror(errno));
        _exit(127);
    }
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

// Runs the delegate and returns what it wrote to stdout (stderr discarded),
// or nullopt when it failed.
std::optional<std::string> delegate_output(const std::vector<std::string>& argv) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
    pid_t pid = ::fork();
    if (pid < 0) return std::nullopt;
    if (pid == 0) {
        ::dup2(fds[1], 1);
        int null_fd = ::open("/dev/null", O_WRONLY);
        if (null_fd >= 0) ::dup2(null_fd, 2);
        auto a = c_argv(argv);
        ::execv(a[0], a.data());
        _exit(127);
    }
    ::close(fds[1]);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        out.append(buf, static_cast<size_t>(n));
    }
    ::close(fds[0]);
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return std::nullopt;
    return out;
}

[[noreturn]] void exec_delegate(const std::vector<std::string>& argv) {
    auto a = c_argv(argv);
    ::execv(a[0], a.data());
    std::fprintf(stderr, "bulwark-oci: exec %s: %s\n", a[0], std::strerror(errno));
    std::exit(127);
}

// One invocation: the configuration, the parsed words, and where errors go.
class Runtime {
public:
    Runtime(RuntimeConfig cfg, RuncArgs args) : cfg_(std::move(cfg)), args_(std::move(args)) {}

    int dispatch() {
        if (args_.command == "create") return create();
        if (args_.command == "run") return run();
        if (args_.command == "exec") return exec();
        if (args_.command == "delete") return remove();
        exec_delegate(args_.argv(cfg_.delegate));
    }

    // An error as runc reports it: stderr, and the --log file in its format.
    int fail(const std::string& msg) {
        std::cerr << "bulwark-oci: " << msg << "\n";
        if (auto log = args_.global_option("log")) {
            std::ofstream out(*log, std::ios::app);
            if (args_.global_option("log-format").value_or("text") == "json")
                out << json{{"level", "error"}, {"msg", "bulwark-oci: " + msg}, {"time", rfc3339_now()}}.dump() << "\n";
            else
                out << "time=\"" << rfc3339_now() << "\" level=error msg=\"bulwark-oci: " << msg << "\"\n";
        }
        return 1;
    }

private:
    std::string container_id() const { return args_.args.empty() ? "" : args_.args.front(); }
    std::string state_dir(const std::string& id) const { return cfg_.state_root + "/" + id; }
    // A confined container's state directory, or "" when the container is
    // not one of ours. Engines do not pass --bulwark-config to every command
    // (podman's delete has no runtime flags), so when the configured state
    // root does not have it the delegate's own state names the confined
    // bundle, which lies in the state directory.
    std::string find_state(const std::string& id) const {
        if (fs::exists(state_dir(id) + "/container.json")) return state_dir(id);
        RuncArgs st = args_;
        st.command = "state";
        st.options.clear();
        st.dashdash = false;
        st.args = {id};
        auto out = delegate_output(st.argv(cfg_.delegate));
        if (!out) return "";
        auto j = json::parse(*out, nullptr, false);
        if (!j.is_object() || !j["bundle"].is_string()) return "";
        const auto dir = fs::path(j["bundle"].get<std::string>()).parent_path().string();
        return fs::exists(dir + "/container.json") ? dir : "";
    }

    std::expected<AgentdReply, std::string> agentd(std::string_view method, const std::string& target,
                                                   const std::optional<json>& body = std::nullopt,
                                                   std::string socket = {}) const {
        if (socket.empty()) socket = cfg_.agentd_socket;
        AgentdClient client(socket);
        auto r = client.call(method, target, body);
        if (!r) return std::unexpected("agentd at " + socket + ": " + r.error().message);
        return *r;
    }

    // The bundle's spec and whether it asks for a policy; a spec that asks
    // for none is handed to the delegate as the command stands (or refused).
    std::expected<json, int> confined_spec_request(const std::string& bundle_dir);
    int create();
    int run();
    int exec();
    int remove();
    // Releases the binding (agentd removes the cgroup it made) and the state.
    void undo_create(const std::string& id, bool bound);

    RuntimeConfig cfg_;
    RuncArgs args_;
};

// The layers a confined container has, for per-rule coverage.
LayersInForce container_layers(const ConfinedSpec& c, const ContainerPolicy& p, const json& bound) {
    LayersInForce in;
    const int abi = landlock_abi();
    const std::string& ll = landlock_canary();
    in.state["landlock"] = abi == 0 ? "the kernel has no Landlock" : ll;
    in.landlock_fs = abi ? (p.bundle.landlock.handled_fs & ll::fs_rights_for_abi(abi)) : 0;
    in.state["seccomp"] = seccomp_canary();
    in.state["mount"] = "";
    in.state["netns"] = c.own_netns ? "" : "the container shares the host's network namespace";
    in.state["cgroup"] = "";
    in.state["rlimit"] = "";
    // The launcher (oci_launch.cpp) makes the supervisor's launch checks
    // (binaries, environment, hardening) and keeps timeout and output; the
    // runtime checks `mandatory:` below. Output it cannot count on a terminal.
    in.state["supervisor"] = "";
    if (c.terminal)
        in.supervisor = [](const policy::RuleCoverage& rc) -> std::string {
            return rc.kind == "limits.output" ? "the container has a terminal: the launcher cannot count its output" : "";
        };
    const json layers = bound.value("layers", json::object());
    for (const char* l : {"sock_addr", "bpf_lsm"})
        in.state[l] = layers.contains(l) && layers[l].is_string() ? layers[l].get<std::string>()
                                                                  : "agentd did not report this layer";
    in.state["sock_unix"] = bound.value("unix_enforcing", false) ? "" : "the cgroup unix socket programs are not enforcing";
    in.state["microvm"] = "a container runs on the host's kernel";
    in.state["tee"] = "a container runs on the host's kernel";
    in.mount = [masks = c.masks](const policy::RuleCoverage& rc) -> std::string {
        for (const auto& m : masks)
            if (m.rule_id == rc.rule_id) return m.held ? "" : m.how;
        return "no mask was planned for this rule";
    };
    return in;
}

// The host uid and gid of the container's process (process.user mapped
// through linux.uidMappings / gidMappings; unmapped: the same ids).
std::pair<uid_t, gid_t> host_ids_of_process(const json& spec) {
    auto map = [&](const char* key, uint32_t id) -> uint32_t {
        if (!spec.contains("linux") || !spec["linux"].contains(key) || !spec["linux"][key].is_array()) return id;
        for (const auto& m : spec["linux"][key]) {
            const uint32_t in = m.value("containerID", 0u), out = m.value("hostID", 0u), size = m.value("size", 0u);
            if (id >= in && id - in < size) return out + (id - in);
        }
        return 65534;  // unmapped: the overflow id, which owns nothing here
    };
    const json user = spec.contains("process") ? spec["process"].value("user", json::object()) : json::object();
    return {map("uidMappings", user.value("uid", 0u)), map("gidMappings", user.value("gid", 0u))};
}

// The container's exit record as its launcher reported it: the tool's status,
// or why it never started or was killed. Written inside the container, so
// read as untrusted: size-capped, only the known fields, strings cut.
json exit_of(const std::string& report_file) {
    json exit{{"outcome", "deleted"}};
    std::ifstream in(report_file, std::ios::binary);
    std::string text(4096, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    const json r = json::parse(text, nullptr, false);
    if (!r.is_object()) return exit;
    if (r.contains("code") && r["code"].is_number_integer()) exit["code"] = r["code"].get<int>();
    for (const char* k : {"refused", "killed"})
        if (r.contains(k) && r[k].is_string()) exit[std::string("launcher_") + k] = r[k].get<std::string>().substr(0, 1024);
    return exit;
}

// `mandatory:` layers, each in force in this container or no container
// ("" when met, else why, naming the rule).
std::string mandatory_unmet(const policy::Bundle& b, const LayersInForce& in) {
    // The rule language's names -> this container's layers (its mount and
    // PID namespaces are the OCI runtime's, always its own).
    static const std::map<std::string, std::string> kLayer = {
        {"bpf-lsm", "bpf_lsm"}, {"sock-addr", "sock_addr"}, {"namespaces", "mount"},
        {"seccomp", "seccomp"}, {"landlock", "landlock"},   {"cgroup", "cgroup"}};
    for (const auto& m : b.mandatory_layers) {
        auto it = kLayer.find(m);
        std::string why = it == kLayer.end() ? "no layer of a container is called so" : in.why_not(it->second);
        if (why.empty()) continue;
        std::string where;
        for (const auto& r : b.rules)
            if (r.text.starts_with("mandatory"))
                where = r.loc.text() + ": ";
        return where + "mandatory layer " + m + " is not in force: " + why;
    }
    return "";
}

void Runtime::undo_create(const std::string& id, bool bound) {
    if (bound) (void)agentd("DELETE", "/v1/containers/" + id, json{{"outcome", "create failed"}});
    std::error_code ec;
    fs::remove_all(state_dir(id), ec);
}

std::expected<json, int> Runtime::confined_spec_request(const std::string& bundle_dir) {
    auto spec = json::parse(read_file(bundle_dir + "/config.json"), nullptr, false);
    if (spec.is_discarded()) return std::unexpected(fail(bundle_dir + "/config.json: not readable JSON"));
    const bool pause_container =
        spec.contains("annotations") && spec["annotations"].value("io.kubernetes.cri.container-type", "") == "sandbox";
    if (!requested_tool(spec) || pause_container) {
        if (cfg_.refuse_unannotated && !pause_container)
            return std::unexpected(fail("container " + container_id() + " names no policy (annotation " +
                                        kToolAnnotation + ") and this runtime refuses such containers (" +
                                        cfg_.source + ": unannotated: refuse)"));
        exec_delegate(args_.argv(cfg_.delegate));
    }
    return spec;
}

int Runtime::create() {
    const std::string id = container_id();
    if (id.empty()) return fail(args_.command + ": a container id is required");
    const std::string bundle_dir = args_.option({"bundle", "b"}).value_or(fs::current_path().string());

    // 1. Which policy, if any.
    auto request = confined_spec_request(bundle_dir);
    if (!request) return request.error();
    const json& spec = *request;
    // The container's cgroup is Bulwark's: made by path below agentd's BPF
    // parent and bound before anything runs there, so the delegate is never
    // asked for a systemd scope (one exists only once runc started the init).
    const bool engine_systemd = std::erase_if(args_.global, [](const Option& o) { return o.name == "systemd-cgroup"; }) > 0;
    if (fs::exists(state_dir(id))) return fail("container " + id + " already exists");

    // 2. The policy.
    auto policy = container_policy(cfg_, spec, id, bundle_dir);
    if (!policy) return fail("container " + id + ": " + policy.error());

    // 3. The container's state: the launcher, its policy, the confined bundle.
    const std::string dir = state_dir(id), launch = dir + "/launch", shadow = dir + "/bundle", report_dir = dir + "/report";
    std::error_code ec;
    fs::create_directories(launch + "/report", ec);  // the report's mount point below /.bulwark
    fs::create_directories(shadow, ec);
    fs::create_directories(report_dir, ec);
    ::chmod(dir.c_str(), 0711);
    ::chmod(launch.c_str(), 0755);
    // The launcher writes its report as the container's user, whose host
    // identity the spec's user namespace decides; nobody else can.
    const auto [report_uid, report_gid] = host_ids_of_process(spec);
    if (::chown(report_dir.c_str(), report_uid, report_gid) != 0 || ::chmod(report_dir.c_str(), 0700) != 0)
        ec = std::error_code(errno, std::generic_category());
    if (ec) return undo_create(id, false), fail("state " + dir + ": " + ec.message());
    fs::copy_file(cfg_.launcher, launch + "/launch", fs::copy_options::overwrite_existing, ec);
    if (ec) return undo_create(id, false), fail("launcher " + cfg_.launcher + ": " + ec.message());
    ::chmod((launch + "/launch").c_str(), 0755);
    auto confined = confine_spec(spec, *policy, bundle_dir, launch, report_dir);
    if (!confined) return undo_create(id, false), fail("container " + id + ": " + confined.error());
    const std::string original_cgroup = spec.contains("linux") ? spec["linux"].value("cgroupsPath", "") : "";
    if (!original_cgroup.empty()) confined->report["cgroup"]["engine_path"] = original_cgroup;
    if (engine_systemd)
        confined->report["cgroup"]["engine_driver"] = "systemd (--systemd-cgroup dropped: the cgroup is made by path)";
    if (!write_file(launch + "/policy.json", launch_policy_to_json({policy->workdir, policy->bundle}).dump(), 0644))
        return undo_create(id, false), fail("state " + dir + ": cannot write");

    // 4. The cgroup, made by agentd below its BPF cgroup parent (there every
    // cgroup not bound to a live policy is denied everything: it is Bulwark's
    // alone) and bound before anything runs in it.
    json report = confined->report;
    report["rules"] = policy->rule_file;
    report["workdir"] = policy->workdir;
    report["granted"] = policy->granted;
    auto bound = agentd("POST", "/v1/containers",
                        json{{"id", id}, {"bundle", policy::bundle_to_json(policy->bundle)},
                             {"identity", pod_identity(spec)}, {"report", report}});
    if (!bound)
        return undo_create(id, false),
               fail(bound.error() + " (the node's agentd binds the container's cgroup and keeps its audit)");
    if (bound->status != 201) return undo_create(id, false), fail("agentd refused the binding: " + bound->error_text());
    const std::string cgroup = bound->body.value("cgroup", "");
    confined->spec["linux"]["cgroupsPath"] = bound->body.value("cgroups_path", "");
    if (confined->spec["linux"]["cgroupsPath"] == "")
        return undo_create(id, true), fail("agentd's cgroup " + cgroup + " is not below the cgroup v2 mount");

    // 5. Every rule held by a layer in force, or no container.
    const LayersInForce layers = container_layers(*confined, *policy, bound->body);
    auto verdict = judge_coverage(policy::rule_coverage(policy->bundle), layers);
    if (verdict.launch_refused())
        return undo_create(id, true), fail("container " + id + ": " + refusal_message(policy->bundle, verdict));
    if (std::string unmet = mandatory_unmet(policy->bundle, layers); !unmet.empty())
        return undo_create(id, true), fail("container " + id + ": " + unmet);
    report["coverage"] = coverage_summary(verdict);
    if (!write_file(shadow + "/config.json", confined->spec.dump(2)))
        return undo_create(id, true), fail("state " + dir + ": cannot write");

    // 6. The delegate creates it from the confined bundle.
    RuncArgs a = args_;
    a.command = "create";
    a.remove_option({"detach", "d", "keep"});
    a.set_option({"bundle", "b"}, shadow);
    if (int rc = run_delegate(a.argv(cfg_.delegate)); rc != 0) return undo_create(id, true), rc;
    json state{{"id", id},
               {"tool", policy->tool},
               {"rules", policy->rule_file},
               {"cgroup", cgroup},
               {"bundle", bundle_dir},
               {"agentd_socket", cfg_.agentd_socket},
               {"report", report},
               {"bpf", bound->body.value("bpf", "")}};
    write_file(dir + "/container.json", state.dump(2));
    return 0;
}

int Runtime::run() {
    const std::string id = container_id();
    if (id.empty()) return fail("run: a container id is required");
    if (auto request = confined_spec_request(args_.option({"bundle", "b"}).value_or(fs::current_path().string()));
        !request)
        return request.error();
    const bool detach = args_.flag({"detach", "d"});
    // In the foreground the container's first process is our child once the
    // delegate's create returns (subreaper), so its status is ours.
    if (!detach) ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    std::string pid_file = args_.option({"pid-file"}).value_or("");
    if (pid_file.empty()) {
        pid_file = cfg_.state_root + "/." + id + ".pid";
        args_.set_option({"pid-file"}, pid_file);
    }
    if (int rc = create(); rc != 0) return rc;
    RuncArgs start = args_;
    start.command = "start";
    start.options.clear();
    start.args = {id};
    if (int rc = run_delegate(start.argv(cfg_.delegate)); rc != 0) return rc;
    if (detach) return 0;
    const pid_t pid = static_cast<pid_t>(std::atol(read_file(pid_file).c_str()));
    int st = 0, code = 1;
    while (pid > 0) {
        pid_t w = ::waitpid(-1, &st, 0);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) break;
        if (w == pid) {
            code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            break;
        }
    }
    RuncArgs del = args_;
    del.command = "delete";
    del.options.clear();
    del.args = {id};
    args_ = del;
    remove();
    return code;
}

int Runtime::exec() {
    const std::string id = container_id();
    const std::string dir = id.empty() ? "" : find_state(id);
    if (dir.empty()) exec_delegate(args_.argv(cfg_.delegate));
    if (args_.option({"cap", "c"}))
        return fail("exec --cap: a process in container " + id + " (a Bulwark container) holds no capability");
    if (auto file = args_.option({"process", "p"})) {
        auto proc = json::parse(read_file(*file), nullptr, false);
        if (proc.is_discarded()) return fail("exec --process " + *file + ": not readable JSON");
        auto confined = confine_process(std::move(proc));
        if (!confined) return fail("exec into " + id + ": " + confined.error());
        char name[] = "/exec-XXXXXX";
        std::string path = dir + name;
        std::vector<char> buf(path.begin(), path.end());
        buf.push_back('\0');
        int fd = ::mkstemp(buf.data());
        if (fd < 0) return fail("exec: " + std::string(std::strerror(errno)));
        ::close(fd);
        path = buf.data();
        if (!write_file(path, confined->dump())) return fail("exec: cannot write " + path);
        args_.set_option({"process", "p"}, path);
    } else {
        if (args_.args.size() < 2) return fail("exec: a command is required");
        std::vector<std::string> a{id, kLauncherInContainer, "--"};
        a.insert(a.end(), args_.args.begin() + 1, args_.args.end());
        args_.args = std::move(a);
        args_.dashdash = false;
        args_.options.push_back(Option{"no-new-privs", std::nullopt, false});
    }
    exec_delegate(args_.argv(cfg_.delegate));
}

int Runtime::remove() {
    const std::string id = args_.args.empty() ? "" : args_.args.back();
    const std::string dir = id.empty() ? "" : find_state(id);
    if (dir.empty()) exec_delegate(args_.argv(cfg_.delegate));
    const int rc = run_delegate(args_.argv(cfg_.delegate));
    if (rc != 0) {  // the delegate's delete failed: keep everything while it still knows the container
        RuncArgs st = args_;
        st.command = "state";
        st.options.clear();
        st.args = {id};
        if (delegate_output(st.argv(cfg_.delegate))) return rc;
    }
    auto state = json::parse(read_file(dir + "/container.json"), nullptr, false);
    const std::string socket = state.is_object() ? state.value("agentd_socket", "") : "";
    auto r = agentd("DELETE", "/v1/containers/" + id, exit_of(dir + "/report/launch.json"), socket);
    if (!r) std::cerr << "bulwark-oci: " << r.error() << " (its binding goes when agentd next starts)\n";
    if (state.is_object()) ::rmdir(state.value("cgroup", "").c_str());
    std::error_code ec;
    fs::remove_all(dir, ec);
    return rc;
}

}  // namespace

int run_runtime(const std::vector<std::string>& words) {
    RuncArgs args = parse_runc_args(words);
    // --bulwark-config FILE (podman: --runtime-flag bulwark-config=FILE): this
    // runtime's own global option, over BULWARK_OCI_CONFIG; never passed on.
    if (auto file = args.global_option("bulwark-config")) ::setenv("BULWARK_OCI_CONFIG", file->c_str(), 1);
    std::erase_if(args.global, [](const Option& o) { return o.name == "bulwark-config"; });
    auto cfg = load_runtime_config();
    if (!cfg) {
        Runtime r(RuntimeConfig{}, args);
        return r.fail(cfg.error());
    }
    if (args.command.empty()) {
        for (const auto& o : args.global)
            if (o.name == "version" || o.name == "v") std::cout << "bulwark-oci (Bulwark), delegating to " << cfg->delegate << "\n";
    }
    Runtime r(std::move(*cfg), std::move(args));
    return r.dispatch();
}

}  // namespace bulwark::oci
