#pragma once
// Supervision of a tool that runs: its outputs (bounded), stdin fed as it
// reads, its exit through the pidfd, the wall-clock timeout and
// cancellation, each of which kills every process of the run (cgroup.kill,
// which takes double-forked orphans too).
#include <signal.h>
#include <sys/resource.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

#include "common/fd.h"
#include "sandbox/cgroup.h"
#include "sandbox/run_report.h"

namespace bulwark {

struct SupervisedTool {
    int pidfd = -1;
    Fd stdout_r, stderr_r;
    // The write end of the tool's stdin and what is left to write there
    // (none: the tool reads /dev/null).
    Fd stdin_w;
    std::string_view stdin_data;
    // Readable: cancel the run (-1: none).
    int cancel_fd = -1;
    // Why, as the report's denial says it ("" or unset: the task was closed
    // or its caller cancelled the run).
    const std::function<std::string()>* cancel_reason = nullptr;
    std::optional<uint64_t> timeout_ms;
    uint64_t output_bytes = 0;
    // Each chunk captured, as it arrives (the caller's; may be null or empty).
    const std::function<void(int stream, std::string_view data)>* on_output = nullptr;
};

// How the tool's first process ended.
struct ToolExit {
    siginfo_t info{};
    rusage usage{};
};

// Runs until the tool has exited and both outputs are closed (or held open
// 2 s past its exit, when the cgroup is killed again). Fills rep's output,
// truncation and timeout fields, and a denial line for a timeout or a
// cancellation.
ToolExit supervise(SupervisedTool tool, const SandboxCgroup& cg, RunReport& rep);

// Waits for the process behind pidfd to exit (retrying EINTR).
void reap_pidfd(int pidfd, siginfo_t* info = nullptr, rusage* usage = nullptr);

}  // namespace bulwark
