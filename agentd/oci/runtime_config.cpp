#include "oci/runtime_config.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include <yaml-cpp/yaml.h>

namespace bulwark::oci {

namespace {

std::string default_rules_dir() {
    for (const char* d : {BULWARK_INSTALLED_RULES_DIR, BULWARK_SOURCE_RULES_DIR})
        if (std::filesystem::is_directory(d)) return d;
    return BULWARK_INSTALLED_RULES_DIR;
}

std::string beside_self(const std::string& name) {
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? name : (self.parent_path() / name).string();
}

}  // namespace

std::expected<RuntimeConfig, std::string> load_runtime_config() {
    RuntimeConfig c;
    c.rules_dir = default_rules_dir();
    c.launcher = beside_self("bulwark-oci-launch");
    const char* env = std::getenv("BULWARK_OCI_CONFIG");
    const std::string file = env && *env ? env : "/etc/bulwark/oci.yaml";
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) {
        if (env && *env) return std::unexpected(file + ": no such file (BULWARK_OCI_CONFIG)");
        c.source = "defaults";
        return c;
    }
    c.source = file;
    try {
        YAML::Node root = YAML::LoadFile(file);
        if (!root.IsMap()) return std::unexpected(file + ": expected a mapping");
        static const std::set<std::string> keys{"delegate", "rules_dir", "agentd_socket", "unannotated", "state_root",
                                                "launcher"};
        for (const auto& kv : root) {
            const auto key = kv.first.as<std::string>();
            const auto where = file + ":" + std::to_string(kv.first.Mark().line + 1) + ":" +
                               std::to_string(kv.first.Mark().column + 1);
            if (!keys.contains(key)) return std::unexpected(where + ": unknown key '" + key + "'");
            if (!kv.second.IsScalar()) return std::unexpected(where + ": " + key + ": expected a string");
            const auto v = kv.second.as<std::string>();
            if (key == "unannotated") {
                if (v != "run" && v != "refuse")
                    return std::unexpected(where + ": unannotated: expected run or refuse, not '" + v + "'");
                c.refuse_unannotated = v == "refuse";
                continue;
            }
            if (!v.starts_with("/")) return std::unexpected(where + ": " + key + ": expected an absolute path");
            if (key == "delegate") c.delegate = v;
            if (key == "rules_dir") c.rules_dir = v;
            if (key == "agentd_socket") c.agentd_socket = v;
            if (key == "state_root") c.state_root = v;
            if (key == "launcher") c.launcher = v;
        }
    } catch (const YAML::Exception& e) {
        return std::unexpected(file + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                               ": " + e.msg);
    }
    return c;
}

}  // namespace bulwark::oci
