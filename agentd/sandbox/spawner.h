#pragma once
// agentd run: one tool, one sandbox, one report. run_tool() is the single
// function that orders every isolation step: the parent's, a list of named
// steps in spawner.cpp; the child's (c0..c15) in launch_child.cpp. Each
// concern lives in its own file (ns_*, cgroup, mounts, landlock,
// seccomp_install, caps, hardening, supervise, posture).
#include <sys/types.h>

#include <expected>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bulwark/policy/bundle.h"
#include "sandbox/run_report.h"

namespace bulwark {

struct RunRequest {
    // argv[0]: absolute path of the tool, or a name matching the basename of
    // one of the policy's binaries. It must resolve to a policy binary.
    std::vector<std::string> argv;
    // Host directory bound read-write at the same path and made the cwd.
    std::string workdir;
    // Unprivileged ids the tool runs as (mapped 1:1 in its user namespace).
    // Default: the workdir's owner when that is not root, else 65534.
    std::optional<uid_t> uid;
    std::optional<gid_t> gid;
    // Caller environment the policy's `environment.pass` copies from
    // (default: this process's environ).
    std::optional<std::vector<std::pair<std::string, std::string>>> caller_env;
    // Descriptors (already open in the caller) the tool inherits at the same
    // numbers; everything else >= 3 is closed at exec.
    std::vector<int> keep_fds;
    // Binds the BPF policy to the run's cgroup v2 leaf before the tool's
    // first instruction (cgroup sock_addr programs, BPF LSM policy slot).
    // Required for `network:` rules: such tools stay in the host netns.
    std::function<std::expected<std::string, std::string>(int cgroup_v2_fd, const std::string& cgroup_path)>
        attach_bpf;
    // Called once the run's cgroup v2 leaf exists and the run's first
    // process (the tool, before its exec) is in it, with that process's host
    // pid: the kernel audit source maps records to runs by cgroup
    // (run_registry.h). The caller unregisters after run_tool returns.
    std::function<void(const std::string& cgroup_v2_path, pid_t pid)> on_cgroup;
    // Called once the sandbox is built and its posture checked, while the
    // child waits just before exec: "" lets the tool run, anything else
    // refuses the run with that reason (nothing of the tool has executed).
    // The daemon waits here for the run's start record to be durable, so the
    // fsync overlaps the sandbox setup instead of preceding it.
    std::function<std::string()> before_exec;
    // Called once the launch is planned and every rule's coverage judged
    // (the report's rules fields are filled), before anything is created:
    // "" goes on, anything else refuses the run with that reason.
    std::function<std::string(const RunReport& plan)> on_plan;
    // Why there is no attach_bpf (shown as the bpf layer's detail), e.g.
    // "BPF runtime: bpf_obj_get(...): EPERM".
    std::string bpf_unavailable;
    // With attach_bpf: the BPF layers' states for per-rule coverage
    // (BpfRuntime::layer_states(): "sock_addr", "bpf_lsm" -> "" or why not).
    std::map<std::string, std::string> bpf_layers;
    // The VM layers of this launch for per-rule coverage ("microvm", "tee"
    // -> "" when in force, else why not). Unset: the host sandbox, and the
    // reason says so; the guest agent sets "microvm" in force.
    std::map<std::string, std::string> vm_layers;
    // The run is scored against its tool's profile when it ends, and a
    // finding gets the response the rules ask for (coverage layer "profile":
    // agentd serve sets it; `agentd run` keeps no profiles).
    bool profile_scoring = false;
    // Absolute cgroup v2 directory the run's leaf is created in: the BPF
    // runtime's cgroup parent, where its cgroup programs are attached. Empty:
    // the cgroup this process runs in.
    std::string cgroup_v2_parent;
    // Appended to the run's cgroup leaf names ("[A-Za-z0-9_]*", no "-"), so
    // that a restarted daemon can tell which run a leftover leaf was
    // (agentd serve: "r<run id>").
    std::string cgroup_label;
    // Bytes written to the tool's stdin (then closed); none: /dev/null. The
    // caller ignores SIGPIPE (a tool may stop reading early).
    std::optional<std::string> stdin_data;
    // Called from run_tool's thread with each chunk of captured output
    // (stream 1 = stdout, 2 = stderr), as it arrives.
    std::function<void(int stream, std::string_view data)> on_output;
    // An fd (e.g. an eventfd) that becomes readable to cancel the run: every
    // process of the run is killed (cgroup.kill) and the report says so.
    int cancel_fd = -1;
    // Why the run was cancelled, asked when it is (unset or "": its task was
    // closed or its caller cancelled it).
    std::function<std::string()> cancel_reason;
    std::string hostname = "bulwark";
    // Stop once the launch is planned and every rule's coverage judged
    // (`agentd coverage`): the report says what would be in force; nothing
    // is created but the mask points a deny needs (see plan_mounts).
    bool plan_only = false;
    // `network: none|loopback`: take a recycled lo-only netns from the pool
    // (see NetnsPool) instead of creating one per run.
    bool recycle_netns = true;
    // The host's directories shown read-only in the tool's view (all of
    // /etc, /home, /opt, /srv, /var, ...; /tmp, /proc and /dev stay the
    // sandbox's own, the masks of denies as usual), so that a path its rules
    // do not grant exists and Landlock refuses, and records, what the view
    // would otherwise hide as missing. For `agentd learn` only: the other
    // layers hold as always, the mount layer's narrowing is given up.
    bool host_view = false;
};

RunReport run_tool(const policy::Bundle& bundle, const RunRequest& request);

}  // namespace bulwark
