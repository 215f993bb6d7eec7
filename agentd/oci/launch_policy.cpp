#include "oci/launch_policy.h"

namespace bulwark::oci {

using nlohmann::json;

LaunchPolicy launch_policy_of(const policy::Bundle& b, const std::string& workdir) {
    LaunchPolicy p;
    p.tool = b.tool;
    p.workdir = workdir;
    p.landlock = b.landlock;
    p.landlock.gaps.clear();
    p.seccomp.program = b.seccomp.program;
    p.timeout_ms = b.limits.timeout_ms;
    p.output_bytes = b.limits.output_bytes;
    return p;
}

json launch_policy_to_json(const LaunchPolicy& p) {
    json paths = json::array(), ports = json::array(), prog = json::array();
    for (const auto& r : p.landlock.paths) paths.push_back({{"path", r.path}, {"access", r.access}, {"rule", r.rule_id}});
    for (const auto& r : p.landlock.ports) ports.push_back({{"port", r.port}, {"access", r.access}, {"rule", r.rule_id}});
    for (const auto& f : p.seccomp.program) prog.push_back(json::array({f.code, f.jt, f.jf, f.k}));
    json j{{"tool", p.tool},
           {"workdir", p.workdir},
           {"landlock",
            {{"handled_fs", p.landlock.handled_fs},
             {"handled_net", p.landlock.handled_net},
             {"scoped", p.landlock.scoped},
             {"paths", paths},
             {"ports", ports}}},
           {"seccomp", prog}};
    if (p.timeout_ms) j["timeout_ms"] = *p.timeout_ms;
    if (p.output_bytes) j["output_bytes"] = *p.output_bytes;
    return j;
}

std::expected<LaunchPolicy, std::string> launch_policy_from_json(const json& j) {
    try {
        LaunchPolicy p;
        p.tool = j.at("tool").get<std::string>();
        p.workdir = j.at("workdir").get<std::string>();
        const auto& l = j.at("landlock");
        p.landlock.handled_fs = l.at("handled_fs").get<uint64_t>();
        p.landlock.handled_net = l.at("handled_net").get<uint64_t>();
        p.landlock.scoped = l.at("scoped").get<uint64_t>();
        for (const auto& r : l.at("paths"))
            p.landlock.paths.push_back({r.at("path").get<std::string>(), r.at("access").get<uint64_t>(),
                                        r.at("rule").get<uint32_t>()});
        for (const auto& r : l.at("ports"))
            p.landlock.ports.push_back(
                {r.at("port").get<uint16_t>(), r.at("access").get<uint64_t>(), r.at("rule").get<uint32_t>()});
        for (const auto& f : j.at("seccomp")) {
            if (!f.is_array() || f.size() != 4) return std::unexpected("seccomp: instructions are [code, jt, jf, k]");
            p.seccomp.program.push_back(
                sock_filter{f[0].get<uint16_t>(), f[1].get<uint8_t>(), f[2].get<uint8_t>(), f[3].get<uint32_t>()});
        }
        if (j.contains("timeout_ms")) p.timeout_ms = j["timeout_ms"].get<uint64_t>();
        if (j.contains("output_bytes")) p.output_bytes = j["output_bytes"].get<uint64_t>();
        return p;
    } catch (const json::exception& e) {
        return std::unexpected(std::string("policy: ") + e.what());
    }
}

}  // namespace bulwark::oci
