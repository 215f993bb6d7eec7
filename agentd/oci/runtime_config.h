#pragma once
// bulwark-oci's configuration: /etc/bulwark/oci.yaml, or the file named by
// the global option --bulwark-config (podman: --runtime-flag
// bulwark-config=FILE) or BULWARK_OCI_CONFIG; every key has a default, an
// unknown key is an error.
//
//   delegate: /usr/sbin/runc       # the OCI runtime that runs the containers (runc or crun)
//   rules_dir: /usr/local/share/bulwark/rules
//   agentd_socket: /run/bulwark/agentd.sock
//   unannotated: run               # run: no Bulwark annotation -> the delegate as is; refuse: create fails
//   state_root: /run/bulwark/oci   # per container: the confined bundle, the launcher's policy
//   launcher: <dir of bulwark-oci>/bulwark-oci-launch
#include <expected>
#include <string>

namespace bulwark::oci {

struct RuntimeConfig {
    std::string delegate = "/usr/sbin/runc";  // Debian's runc
    std::string rules_dir;
    std::string agentd_socket = "/run/bulwark/agentd.sock";
    bool refuse_unannotated = false;
    std::string state_root = "/run/bulwark/oci";
    std::string launcher;
    std::string source;  // the file read, or "defaults"
};

// The annotations a container asks for a policy with.
inline constexpr const char* kToolAnnotation = "org.bulwark.tool";
inline constexpr const char* kGrantAnnotation = "org.bulwark.grant";
inline constexpr const char* kWorkdirAnnotation = "org.bulwark.workdir";

std::expected<RuntimeConfig, std::string> load_runtime_config();

}  // namespace bulwark::oci
