#pragma once
// What bulwark-oci-launch applies inside a container before the tool's first
// instruction, as the runtime writes it (<state>/<id>/launch/policy.json,
// bind-mounted read-only at /.bulwark/policy.json): the tool's Landlock plan
// (paths as the container sees them), its compiled seccomp program, and the
// supervisor's limits (timeout, output). Plain JSON, read by a static
// launcher that links no compiler.
#include <cstdint>
#include <expected>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "bulwark/policy/bundle.h"

namespace bulwark::oci {

// Where the launcher and its policy appear inside every confined container.
inline constexpr const char* kLaunchDir = "/.bulwark";
inline constexpr const char* kLauncherInContainer = "/.bulwark/launch";
inline constexpr const char* kPolicyInContainer = "/.bulwark/policy.json";

struct LaunchPolicy {
    std::string tool;
    std::string workdir;
    policy::LandlockPlan landlock;
    policy::SeccompPlan seccomp;  // program only
    std::optional<uint64_t> timeout_ms;
    std::optional<uint64_t> output_bytes;
};

LaunchPolicy launch_policy_of(const policy::Bundle& instantiated, const std::string& workdir);
nlohmann::json launch_policy_to_json(const LaunchPolicy& p);
std::expected<LaunchPolicy, std::string> launch_policy_from_json(const nlohmann::json& j);

}  // namespace bulwark::oci
