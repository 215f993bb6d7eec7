// bulwark-oci-launch: the first program of a container confined by
// bulwark-oci, static, bind-mounted read-only at /.bulwark/launch. The
// runtime replaces the container's process with
//     /.bulwark/launch -- <the process's args>
// and this program, inside the container (after the OCI runtime set up its
// namespaces, mounts, capabilities, no_new_privs and the spec's seccomp
// filter), in order:
//   1. reads /.bulwark/policy.json (oci/launch_policy.h: the bundle agentd
//      bound, its hash checked);
//   2. the supervisor's checks at launch, as agentd's spawner makes them
//      (sandbox/launch_inputs.h): the command must resolve to one of the
//      policy's binaries (content-pinned where the policy says so), opened
//      once and executed by that descriptor; the environment plan; the ELF
//      properties `hardening:` requires of it and its libraries, and MTE;
//   3. restricts itself with the tool's Landlock ruleset (the container's
//      paths; the same code as agentd's sandbox) and its compiled seccomp
//      program (the exact program the compiler verified);
//   4. supervises the tool: forks it, relays its stdout and stderr counting
//      bytes against the output limit, kills it at the timeout, forwards
//      termination signals, reaps every orphan (it is PID 1 of the
//      container's PID namespace), and exits with the tool's status.
// Any failure before the tool's exec exits 126 with the reason on stderr:
// nothing runs unconfined. With --report FILE (the container's first
// process), how it ended is also written there for the container's exit
// record: {"code": N} and "refused" or "killed" with the reason.
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "oci/launch_policy.h"
#include "sandbox/landlock.h"
#include "sandbox/launch_inputs.h"
#include "sandbox/seccomp_install.h"

namespace {

using namespace bulwark;

// --report FILE: how the process ended, for the container's exit record
// (oci/launch_policy.h kReportInContainer). Opened before Landlock restricts
// this process (which may grant no write there), written once at the end;
// -1 when not asked (exec) or not openable: the report is the audit's,
// never a reason to fail the tool.
int g_report_fd = -1;

void open_report(const char* file) {
    g_report_fd = ::open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
}

void write_report(const nlohmann::json& r) {
    if (g_report_fd < 0) return;
    const std::string text = r.dump();
    (void)!::write(g_report_fd, text.data(), text.size());
    ::close(g_report_fd);
    g_report_fd = -1;
}

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "bulwark-oci-launch: %s; the tool was not started\n", what.c_str());
    write_report({{"code", 126}, {"refused", what}});
    std::exit(126);
}

oci::LaunchPolicy read_policy(const char* file) {
    std::ifstream in(file);
    if (!in) die(std::string("cannot read ") + file + ": " + std::strerror(errno));
    std::stringstream ss;
    ss << in.rdbuf();
    auto j = nlohmann::json::parse(ss.str(), nullptr, false);
    if (j.is_discarded()) die(std::string(file) + ": not JSON");
    auto p = oci::launch_policy_from_json(j);
    if (!p) die(std::string(file) + ": " + p.error());
    return std::move(*p);
}

void restrict_self(const oci::LaunchPolicy& p, int binary_fd) {
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die(std::string("no_new_privs: ") + std::strerror(errno));
    const auto& landlock = p.bundle.landlock;
    if (landlock.handled_fs || landlock.handled_net || landlock.scoped) {
        std::vector<std::string> warnings;
        // The runtime proved Landlock on this kernel (the container's): no canary here.
        auto prep = prepare_landlock(p.bundle, binary_fd, p.workdir, warnings, false);
        if (!prep) die(prep.error().message());
        if (!prep->ruleset) die("Landlock is not in force here: " + prep->status.detail);
        if (int rc = landlock_child_apply(*prep); rc != 0)
            die(std::string("landlock_restrict_self: ") + std::strerror(-rc));
    }
    if (p.bundle.seccomp.program.empty()) die("the policy has no seccomp program");
    auto sc = prepare_seccomp(p.bundle.seccomp);
    if (!sc) die("seccomp: " + sc.error());
    sc->finalize();
    if (int rc = seccomp_child_install(*sc); rc != 0) die(std::string("seccomp: ") + std::strerror(-rc));
}

struct Relay {
    int from = -1;
    int to = -1;
};

int supervise(pid_t tool, std::vector<Relay> relays, const policy::Limits& p, int sfd) {
    using Clock = std::chrono::steady_clock;
    const auto deadline = p.timeout_ms ? Clock::now() + std::chrono::milliseconds(*p.timeout_ms) : Clock::time_point::max();
    uint64_t output = 0;
    int status = 0;
    bool tool_done = false;
    std::string why_killed;
    auto kill_all = [&](const std::string& why) {
        if (why_killed.empty()) why_killed = why;
        ::kill(-tool, SIGKILL);
        ::kill(tool, SIGKILL);
    };
    while (!tool_done || std::any_of(relays.begin(), relays.end(), [](const Relay& r) { return r.from >= 0; })) {
        std::vector<pollfd> fds{{sfd, POLLIN, 0}};
        for (const auto& r : relays)
            if (r.from >= 0) fds.push_back({r.from, POLLIN, 0});
        int wait_ms = -1;
        if (deadline != Clock::time_point::max() && !tool_done) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
            if (left <= 0) {
                kill_all("timeout after " + std::to_string(*p.timeout_ms) + " ms (limits.timeout)");
                left = 0;
            }
            wait_ms = static_cast<int>(std::min<int64_t>(left, 1000));
        }
        if (::poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR) break;
        if (fds[0].revents & POLLIN) {
            signalfd_siginfo si{};
            while (::read(sfd, &si, sizeof si) == sizeof si) {
                if (si.ssi_signo == SIGCHLD) continue;
                if (!tool_done) ::kill(tool, static_cast<int>(si.ssi_signo));  // forwarded
            }
        }
        for (;;) {  // PID 1 reaps every orphan
            int st = 0;
            pid_t w = ::waitpid(-1, &st, WNOHANG);
            if (w <= 0) break;
            if (w == tool) {
                status = st;
                tool_done = true;
            }
        }
        size_t i = 1;
        for (auto& r : relays) {
            if (r.from < 0) continue;
            if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
                char buf[65536];
                ssize_t n = ::read(r.from, buf, sizeof buf);
                if (n <= 0) {
                    ::close(r.from);
                    r.from = -1;
                } else {
                    output += static_cast<uint64_t>(n);
                    if (p.output_bytes && output > *p.output_bytes) {
                        kill_all("output over " + std::to_string(*p.output_bytes) + " bytes (limits.output)");
                    } else {
                        for (ssize_t off = 0; off < n;) {
                            ssize_t w = ::write(r.to, buf + off, static_cast<size_t>(n - off));
                            if (w <= 0) break;
                            off += w;
                        }
                    }
                }
            }
            ++i;
        }
        if (tool_done && !why_killed.empty())
            for (auto& r : relays)
                if (r.from >= 0) {
                    ::close(r.from);
                    r.from = -1;
                }
    }
    if (!why_killed.empty()) {
        std::fprintf(stderr, "bulwark-oci-launch: the tool was killed: %s\n", why_killed.c_str());
        write_report({{"code", 137}, {"killed", why_killed}});
        return 137;
    }
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
    write_report({{"code", code}});
    return code;
}

}  // namespace

int main(int argc, char** argv) {
    int first = 1;
    const char* policy_file = oci::kPolicyInContainer;
    for (; first + 1 < argc; first += 2) {
        if (std::strcmp(argv[first], "--policy") == 0) policy_file = argv[first + 1];
        else if (std::strcmp(argv[first], "--report") == 0) open_report(argv[first + 1]);
        else break;
    }
    if (first < argc && std::strcmp(argv[first], "--") == 0) ++first;
    if (first >= argc) die("usage: bulwark-oci-launch [--policy FILE] [--report FILE] -- COMMAND [ARG...]");
    const auto policy = read_policy(policy_file);
    const auto& limits = policy.bundle.limits;

    // The supervisor's checks at launch: the binary, the environment, hardening.
    LayerStatus sup{"supervisor", LayerState::Enforcing, "", {}};
    const char* path = std::getenv("PATH");
    auto binary = open_policy_binary(policy.bundle, argv[first], sup, path ? path : "/usr/local/bin:/usr/bin:/bin");
    if (!binary) die(binary.error());
    auto tool_env = prepare_tool_environment(policy.bundle, binary->fd.get(), binary->path, RunRequest{});
    if (!tool_env) die(tool_env.error());
    std::vector<char*> envp;
    for (auto& kv : tool_env->env) envp.push_back(kv.data());
    envp.push_back(nullptr);
    restrict_self(policy, binary->fd.get());

    // Output through pipes only when it is not a terminal (a relay would
    // take the terminal from the tool); the runtime judged the output limit
    // with that in mind.
    const bool relay = limits.output_bytes && !::isatty(1) && !::isatty(2);
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    if (relay && (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0))
        die(std::string("pipe: ") + std::strerror(errno));
    sigset_t fwd;
    sigemptyset(&fwd);
    for (int s : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD}) sigaddset(&fwd, s);
    sigprocmask(SIG_BLOCK, &fwd, nullptr);
    int sfd = ::signalfd(-1, &fwd, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) die(std::string("signalfd: ") + std::strerror(errno));

    pid_t tool = ::fork();
    if (tool < 0) die(std::string("fork: ") + std::strerror(errno));
    if (tool == 0) {
        sigprocmask(SIG_UNBLOCK, &fwd, nullptr);
        if (!::isatty(0)) ::setpgid(0, 0);  // its own group (killed as one), unless it owns a terminal
        if (relay) {
            ::dup2(out[1], 1);
            ::dup2(err[1], 2);
        }
        if (int rc = hardening_child_apply(tool_env->hardening); rc != 0) {
            std::fprintf(stderr, "bulwark-oci-launch: hardening: %s; the tool was not started\n", std::strerror(-rc));
            _exit(126);
        }
        // The very file that was checked, by its descriptor.
        ::syscall(SYS_execveat, binary->fd.get(), "", argv + first, envp.data(), AT_EMPTY_PATH);
        std::fprintf(stderr, "bulwark-oci-launch: exec %s: %s\n", binary->path.c_str(), std::strerror(errno));
        _exit(126);
    }
    std::vector<Relay> relays;
    if (relay) {
        ::close(out[1]);
        ::close(err[1]);
        relays = {{out[0], 1}, {err[0], 2}};
    }
    return supervise(tool, std::move(relays), limits, sfd);
}
