#pragma once
// What one sandboxed run did and under which protections: the result of
// run_tool() and the document `agentd run --json` prints.
#include <cstdint>
#include <expected>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bulwark {

// Exit statuses of `agentd run` besides the tool's own (documented in
// docs/agentd-run.md). A tool killed by signal N yields 128 + N.
inline constexpr int kExitTimeout = 124;       // wall-clock limit hit; tool killed
inline constexpr int kExitRefused = 125;       // policy refused the launch (nothing ran)
inline constexpr int kExitSetupFailed = 126;   // sandbox could not be built (nothing ran)
inline constexpr int kExitExecFailed = 127;    // execveat of the verified binary failed

enum class LayerState : uint8_t { Enforcing, Unavailable, NotRequested };

struct LayerStatus {
    std::string name;                  // "seccomp", "landlock", "namespaces", ...
    LayerState state = LayerState::NotRequested;
    std::string detail;                // what is in force, or why it is not
    std::vector<std::string> dropped;  // rights/features asked for but not in force
};

enum class RunOutcome : uint8_t { Exited, Signaled, Refused, SetupFailed, ExecFailed };

struct RunUsage {
    uint64_t wall_us = 0;
    uint64_t cpu_user_us = 0;
    uint64_t cpu_system_us = 0;
    uint64_t peak_memory_bytes = 0;  // memory cgroup high-water mark (or ru_maxrss)
    std::string source;              // where the figures come from
    // run_tool's launch steps in order (spawner.cpp's p1..p13b), each one's
    // time in microseconds: where a launch's time goes before the tool runs.
    std::vector<std::pair<std::string, uint64_t>> setup_us;
};

struct RunReport {
    std::string tool;
    std::vector<std::string> argv;
    RunOutcome outcome = RunOutcome::SetupFailed;
    int exit_code = -1;  // Exited
    int signal = 0;      // Signaled
    bool timed_out = false;
    bool oom_killed = false;
    bool stdout_truncated = false;
    bool stderr_truncated = false;
    std::string stdout_data;
    std::string stderr_data;
    RunUsage usage;
    std::vector<LayerStatus> layers;
    std::vector<std::string> hardening;  // "pie: yes", "mte: unsupported on x86_64", ...
    std::vector<std::string> warnings;
    std::vector<std::string> denials;    // supervisor-observed denials (limits, posture, ...)
    std::string network;                 // network design in force for this run
    std::string error;                   // why the launch was refused / failed
    // Why it was refused, for callers that answer with a code of their own:
    // "rule_unenforced" (a rule no layer in force holds), "bpf_binding" (the
    // run's BPF policy could not be bound, e.g. the pin root's lock is held
    // by a stuck peer), else "".
    std::string refusal_code;
    // Per rule: the layers in force that hold it (rule_coverage.h), the
    // one-line summary, and the rules run with no layer holding them
    // (`unenforceable: run`), each as describe_gap() says it.
    nlohmann::json coverage;
    std::string coverage_summary;
    std::vector<std::string> unenforced;
    // Empty directories this run made on the host for deny masks (removed
    // when the run ends; a restarted daemon removes those a crash left).
    std::vector<std::string> placeholders;
    // Cgroup leaves of the run that could not be removed: path, why.
    std::vector<std::pair<std::string, std::string>> cgroups_left;
    // The work directory was gone (removed or replaced) when the run ended.
    bool workdir_vanished = false;
    // The microVM the tool ran in (vm/microvm_run.h): VMM, acceleration,
    // guest image digest, guest kernel and its facts, the VMM's own layers on
    // the host, the guest's decision records; null for the host sandbox.
    nlohmann::json microvm;
    // What the monitor counted of the run when its rules keep a profile
    // (BW_POL_COUNT_USAGE): {"syscalls": {name: count} (the native ABI),
    // "compat_syscalls", "unknown_syscalls", "sent_bytes", "sent_packets"};
    // null when nothing was counted.
    nlohmann::json counted;

    // The status `agentd run` exits with.
    int exit_status() const;
    const LayerStatus* layer(const std::string& name) const;
};

const char* to_string(LayerState s);
const char* to_string(RunOutcome o);
nlohmann::json to_json(const RunReport& r);
// The inverse of to_json (a guest agent's report read on the host); fields
// it lacks keep their defaults, a field of the wrong type is an error.
std::expected<RunReport, std::string> report_from_json(const nlohmann::json& j);
// Human-readable summary (stderr of `agentd run` without --json).
std::string summary(const RunReport& r);

}  // namespace bulwark
