#include "sandbox/supervise.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>

namespace bulwark {
namespace {

using Clock = std::chrono::steady_clock;

// Output still open this long after the tool's exit is cut off.
constexpr auto kDrainAfterExit = std::chrono::seconds(2);

struct OutputSink {
    std::string* data;
    bool* truncated;
    bool open = true;
};

}  // namespace

void reap_pidfd(int pidfd, siginfo_t* info, rusage* usage) {
    siginfo_t si_tmp{};
    rusage ru_tmp{};
    while (::syscall(SYS_waitid, P_PIDFD, pidfd, info ? info : &si_tmp, WEXITED, usage ? usage : &ru_tmp) < 0 &&
           errno == EINTR) {
    }
}

ToolExit supervise(SupervisedTool tool, const SandboxCgroup& cg, RunReport& rep) {
    ToolExit out;
    uint64_t captured = 0;
    ::fcntl(tool.stdout_r.get(), F_SETFL, O_NONBLOCK);
    ::fcntl(tool.stderr_r.get(), F_SETFL, O_NONBLOCK);
    OutputSink sinks[2] = {{&rep.stdout_data, &rep.stdout_truncated}, {&rep.stderr_data, &rep.stderr_truncated}};
    Fd* pipes[2] = {&tool.stdout_r, &tool.stderr_r};
    bool exited = false;
    std::optional<Clock::time_point> deadline;
    if (tool.timeout_ms) deadline = Clock::now() + std::chrono::milliseconds(*tool.timeout_ms);
    std::optional<Clock::time_point> drain_deadline;
    // stdin: fed from the poll loop, closed when written (or when the tool
    // stops reading: EPIPE).
    std::string_view in_left = tool.stdin_data;
    if (tool.stdin_w) {
        ::fcntl(tool.stdin_w.get(), F_SETFL, O_NONBLOCK);
        if (in_left.empty()) tool.stdin_w.reset();
    }
    enum : int { kExit = -1, kStdin = -2, kCancel = -3 };  // else the output stream's index
    bool cancelled = false;
    while (!exited || sinks[0].open || sinks[1].open) {
        pollfd p[5];
        int np = 0;
        int idx[5];
        if (!exited) {
            p[np] = {tool.pidfd, POLLIN, 0};
            idx[np++] = kExit;
        }
        if (tool.stdin_w && !exited) {
            p[np] = {tool.stdin_w.get(), POLLOUT, 0};
            idx[np++] = kStdin;
        }
        if (tool.cancel_fd >= 0 && !cancelled && !exited) {
            p[np] = {tool.cancel_fd, POLLIN, 0};
            idx[np++] = kCancel;
        }
        for (int i = 0; i < 2; ++i)
            if (sinks[i].open) {
                p[np] = {pipes[i]->get(), POLLIN, 0};
                idx[np++] = i;
            }
        int timeout = -1;
        auto now = Clock::now();
        auto limit_tp = exited ? drain_deadline : deadline;
        if (limit_tp) {
            timeout = static_cast<int>(std::max<int64_t>(
                0, std::chrono::duration_cast<std::chrono::milliseconds>(*limit_tp - now).count() + 1));
        }
        int rc = ::poll(p, np, timeout);
        if (rc < 0 && errno == EINTR) continue;
        if (rc == 0) {
            if (!exited && !rep.timed_out) {
                rep.timed_out = true;
                rep.denials.push_back("cgroup: wall-clock timeout of " + std::to_string(*tool.timeout_ms) +
                                      " ms reached; every process of the run killed (cgroup.kill)");
                cg.kill_all();
                deadline.reset();
            } else if (exited) {
                // Output still held open after the tool ended: end it.
                cg.kill_all();
                for (auto& s : sinks) s.open = false;
            }
            continue;
        }
        for (int k = 0; k < np; ++k) {
            if (!p[k].revents) continue;
            if (idx[k] == kStdin) {
                ssize_t n = ::write(tool.stdin_w.get(), in_left.data(), in_left.size());
                if (n > 0) in_left.remove_prefix(static_cast<size_t>(n));
                if ((n < 0 && errno != EAGAIN && errno != EINTR) || in_left.empty() || (p[k].revents & POLLERR))
                    tool.stdin_w.reset();
                continue;
            }
            if (idx[k] == kCancel) {
                cancelled = true;
                std::string why = tool.cancel_reason && *tool.cancel_reason ? (*tool.cancel_reason)() : "";
                if (why.empty()) why = "run cancelled (its task was closed or its caller cancelled it)";
                rep.denials.push_back("supervisor: " + why + "; every process of the run killed (cgroup.kill)");
                cg.kill_all();
                continue;
            }
            if (idx[k] == kExit) {
                reap_pidfd(tool.pidfd, &out.info, &out.usage);
                exited = true;
                // The tool was pid 1 of its namespace: everything else in it is
                // gone with it. Kill the cgroup anyway, then drain the pipes.
                cg.kill_all();
                drain_deadline = Clock::now() + kDrainAfterExit;
                continue;
            }
            auto& s = sinks[idx[k]];
            char buf[65536];
            while (true) {
                ssize_t n = ::read(pipes[idx[k]]->get(), buf, sizeof buf);
                if (n > 0) {
                    uint64_t room = tool.output_bytes > captured ? tool.output_bytes - captured : 0;
                    uint64_t take = std::min<uint64_t>(room, static_cast<uint64_t>(n));
                    s.data->append(buf, take);
                    captured += take;
                    if (take && tool.on_output && *tool.on_output)
                        (*tool.on_output)(idx[k] + 1, std::string_view(buf, take));
                    if (take < static_cast<uint64_t>(n)) *s.truncated = true;
                    continue;
                }
                if (n == 0) s.open = false;
                break;
            }
        }
    }
    return out;
}

}  // namespace bulwark
