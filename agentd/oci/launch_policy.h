#pragma once
// What bulwark-oci-launch applies inside a container before the tool's first
// instruction, as the runtime writes it (<state>/<id>/launch/policy.json,
// bind-mounted read-only at /.bulwark/policy.json): the instantiated bundle
// agentd bound to the container's cgroup (paths as the container sees them),
// in the compiler's own JSON with its hash, and the work directory. The
// launcher reads it back through the compiler's reader, which refuses a
// bundle whose content is not what its hash says.
#include <expected>
#include <string>

#include <nlohmann/json.hpp>

#include "bulwark/policy/bundle.h"

namespace bulwark::oci {

// Where the launcher and its policy appear inside every confined container.
inline constexpr const char* kLaunchDir = "/.bulwark";
inline constexpr const char* kLauncherInContainer = "/.bulwark/launch";
inline constexpr const char* kPolicyInContainer = "/.bulwark/policy.json";
// The launcher of a container's first process reports there how it ended
// (a writable bind of <state>/<id>/report): refused before the tool's exec,
// killed at a limit, or the tool's exit status. The runtime's delete hands it
// to agentd with the container's exit record.
inline constexpr const char* kReportDirInContainer = "/.bulwark/report";
inline constexpr const char* kReportInContainer = "/.bulwark/report/launch.json";

struct LaunchPolicy {
    std::string workdir;
    policy::Bundle bundle;  // instantiated: binaries, environment, hardening, Landlock, seccomp, limits
};

nlohmann::json launch_policy_to_json(const LaunchPolicy& p);
std::expected<LaunchPolicy, std::string> launch_policy_from_json(const nlohmann::json& j);

}  // namespace bulwark::oci
