// libFuzzer target: any bytes as a container's config.json under bulwark-oci
// (agentd/oci: the annotations that ask for a policy, requested_tool and
// container_policy with its org.bulwark.grant JSON and org.bulwark.workdir;
// pod_identity from the CRI annotations; confine_spec, every step that
// rewrites the spec; confine_process, an exec's process). The spec comes
// from the engine but carries what the image and the pod's author wrote.
// The root filesystem is pinned to the fuzzer's own directory (confine_spec
// creates placeholder directories below it for masked paths). Invariants
// beyond "no crash, no sanitizer report": a confined spec has
// noNewPrivileges set and no capability left in any set, and runs the
// launcher first.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "oci/confine_spec.h"
#include "oci/container_policy.h"
#include "oci/launch_policy.h"
#include "oci_box_rule.h"

using nlohmann::json;
using namespace bulwark::oci;

namespace {

struct Dirs {
    std::string root, bundle, launch;
    RuntimeConfig cfg;
};

const Dirs& dirs() {
    static const Dirs d = [] {
        Dirs d;
        char tmpl[] = "/tmp/bulwark-fuzz-oci-XXXXXX";
        if (!::mkdtemp(tmpl)) std::abort();
        d.root = tmpl;
        d.bundle = d.root + "/bundle";
        d.launch = d.root + "/launch";
        std::filesystem::create_directories(d.bundle + "/rootfs/work");
        std::filesystem::create_directories(d.root + "/rules");
        std::filesystem::create_directories(d.launch);
        std::ofstream(d.root + "/rules/box.yaml") << bulwark::test::kOciBoxRule;
        d.cfg.rules_dir = d.root + "/rules";
        return d;
    }();
    return d;
}

void check_confined(const json& s) {
    const auto& p = s.at("process");
    if (p.value("noNewPrivileges", false) != true) std::abort();
    if (p.contains("capabilities"))
        for (const auto& [set, caps] : p["capabilities"].items())
            if (!caps.empty()) std::abort();
    if (!p.contains("args") || p["args"].empty() || p["args"][0] != std::string(kLauncherInContainer)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const Dirs& d = dirs();
    json spec = json::parse(reinterpret_cast<const char*>(data), reinterpret_cast<const char*>(data) + size, nullptr,
                            false);
    if (spec.is_discarded()) return 0;
    if (spec.is_object() && spec.contains("root") && spec["root"].is_object()) spec["root"]["path"] = "rootfs";
    (void)requested_tool(spec);
    (void)pod_identity(spec);
    if (spec.is_object() && spec.contains("process")) {
        auto proc = confine_process(spec["process"]);
        if (proc) {
            if (proc->value("noNewPrivileges", false) != true) std::abort();
        }
    }
    auto policy = container_policy(d.cfg, spec, "fuzz-ctr");
    if (!policy) return 0;
    auto c = confine_spec(spec, *policy, d.bundle, d.launch);
    if (c) check_confined(c->spec);
    return 0;
}
