#include "oci/launch_policy.h"

#include "bulwark/policy/compiler.h"

namespace bulwark::oci {

using nlohmann::json;

json launch_policy_to_json(const LaunchPolicy& p) {
    return {{"workdir", p.workdir}, {"bundle", policy::bundle_to_json(p.bundle)}};
}

std::expected<LaunchPolicy, std::string> launch_policy_from_json(const json& j) {
    if (!j.is_object() || !j.contains("workdir") || !j["workdir"].is_string() || !j.contains("bundle"))
        return std::unexpected("policy: {workdir, bundle} expected");
    auto b = policy::bundle_from_json(j["bundle"]);
    if (!b) return std::unexpected("policy: " + b.error());
    if (b->hash.empty()) return std::unexpected("policy: the bundle carries no hash");
    return LaunchPolicy{j["workdir"].get<std::string>(), std::move(*b)};
}

}  // namespace bulwark::oci
