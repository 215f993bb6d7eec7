#pragma once
// A container's policy from its annotations: the tool's rule file compiled
// (<rules_dir>/<tool>.yaml, with its bases), made concrete for the container
// (${workdir}: org.bulwark.workdir or the process's cwd; ${home}: HOME of the
// process or /root; ${tmp}: /tmp; ${task_id}: the container id), narrowed by
// an optional grant (org.bulwark.grant, the grant language's JSON: it may only
// take rights away, as a task's grant), and its seccomp spec exported for the
// OCI spec. Every refusal names the annotation, or the rule at file:line:col.
#include <expected>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "bulwark/policy/bundle.h"
#include "oci/runtime_config.h"

namespace bulwark::oci {

struct ContainerPolicy {
    std::string tool;
    std::string rule_file;
    std::string workdir;
    policy::Bundle bundle;        // instantiated (and narrowed by the grant)
    nlohmann::json oci_seccomp;   // linux.seccomp for the spec
    bool granted = false;
};

// The spec's annotations (nullopt: the container asks for no policy).
std::optional<std::string> requested_tool(const nlohmann::json& spec);

// bundle_dir: where a relative root.path of the spec is found; the rule
// file's `libraries: auto` is resolved inside that root filesystem.
std::expected<ContainerPolicy, std::string> container_policy(const RuntimeConfig& cfg, const nlohmann::json& spec,
                                                             const std::string& container_id,
                                                             const std::string& bundle_dir = ".");

// The pod's identity from the CRI annotations containerd (io.kubernetes.cri.*)
// or CRI-O (io.kubernetes.pod.*) set; empty when there are none.
nlohmann::json pod_identity(const nlohmann::json& spec);

}  // namespace bulwark::oci
