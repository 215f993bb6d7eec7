#pragma once
// A container's OCI spec (config.json) confined by its Bulwark policy, step
// by step (confine_spec orders them). What each step did, and what the mount
// layer holds, go into the report the runtime keeps and sends to agentd.
//
//   no_new_privs        process.noNewPrivileges = true
//   capabilities        every set emptied (a Bulwark tool holds none)
//   rlimits             RLIMIT_NOFILE (limits.open_files), RLIMIT_FSIZE
//                       (limits.file_size): set, or lowered where the spec's are higher
//   cgroup limits       linux.resources memory.limit, pids.limit, cpu quota (lowered, never raised)
//   seccomp             the tool's filter as linux.seccomp when the spec has none;
//                       an engine's profile is kept (both apply: the launcher
//                       installs the tool's exact program after it)
//   network namespace   a tool without network rules gets an empty one when the
//                       spec shares the host's
//   deny masks          every files.deny below an allowed directory masked
//                       (linux.maskedPaths); an absent path gets an empty
//                       placeholder directory first, so the mask has something to cover
//   launcher            /.bulwark bind-mounted read-only (launcher + policy),
//                       its report directory writable below it (when given),
//                       process.args = [/.bulwark/launch, --report FILE, --, args...]
#include <expected>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "oci/container_policy.h"

namespace bulwark::oci {

struct MaskResult {
    uint32_t rule_id = 0;
    std::string path;
    bool held = false;
    std::string how;  // held: how; else why not
};

struct ConfinedSpec {
    nlohmann::json spec;
    nlohmann::json report = nlohmann::json::object();  // step -> what it did
    std::vector<MaskResult> masks;
    bool own_netns = false;
    bool terminal = false;
};

// bundle_dir: the directory the spec came from (a relative root.path is
// resolved against it); launch_dir: the host directory bind-mounted at
// /.bulwark; report_dir: the host directory mounted writable at
// /.bulwark/report where the launcher reports how the process ended ("" none).
std::expected<ConfinedSpec, std::string> confine_spec(const nlohmann::json& spec, const ContainerPolicy& policy,
                                                      const std::string& bundle_dir, const std::string& launch_dir,
                                                      const std::string& report_dir = "");

// An exec's process (runc exec --process, or the one built from its words)
// under the same policy: no_new_privs, no capabilities (engines copy the
// container's configured sets into every exec: they are emptied, as at
// create; `exec --cap` asking for more is refused by the runtime), the
// launcher first.
std::expected<nlohmann::json, std::string> confine_process(nlohmann::json process);

}  // namespace bulwark::oci
