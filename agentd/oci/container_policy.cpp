#include "oci/container_policy.h"

#include <filesystem>

#include "bulwark/policy/compiler.h"
#include "bulwark/policy/grants.h"
#include "bulwark/policy/instantiate.h"
#include "tasks/grant_json.h"
#include "tasks/tool_catalog.h"

namespace bulwark::oci {

using nlohmann::json;

namespace {

std::string annotation(const json& spec, const char* key) {
    if (!spec.contains("annotations") || !spec["annotations"].is_object()) return "";
    const auto& a = spec["annotations"];
    return a.contains(key) && a[key].is_string() ? a[key].get<std::string>() : "";
}

std::string env_value(const json& spec, const std::string& name) {
    if (!spec.contains("process") || !spec["process"].contains("env")) return "";
    for (const auto& e : spec["process"]["env"]) {
        if (!e.is_string()) continue;
        const std::string s = e;
        if (s.starts_with(name + "=")) return s.substr(name.size() + 1);
    }
    return "";
}

// A tool name is a rule file's base name: no path, no dots leading.
bool valid_tool(const std::string& t) {
    if (t.empty() || t.size() > 128 || t[0] == '.') return false;
    for (char c : t)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
    return true;
}

std::string task_id_of(const std::string& id) {
    std::string t;
    for (char c : id.substr(0, 64)) t += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
    return t.empty() || t == "." || t == ".." ? "container" : t;
}

}  // namespace

std::optional<std::string> requested_tool(const json& spec) {
    auto t = annotation(spec, kToolAnnotation);
    if (t.empty()) return std::nullopt;
    return t;
}

json pod_identity(const json& spec) {
    json id = json::object();
    const std::pair<const char*, const char*> keys[] = {
        {"pod_name", "io.kubernetes.cri.sandbox-name"},     {"pod_namespace", "io.kubernetes.cri.sandbox-namespace"},
        {"pod_uid", "io.kubernetes.cri.sandbox-uid"},       {"container_name", "io.kubernetes.cri.container-name"},
        {"pod_name", "io.kubernetes.pod.name"},             {"pod_namespace", "io.kubernetes.pod.namespace"},
        {"pod_uid", "io.kubernetes.pod.uid"},               {"container_name", "io.kubernetes.container.name"},
    };
    for (const auto& [field, key] : keys)
        if (auto v = annotation(spec, key); !v.empty() && !id.contains(field)) id[field] = v;
    return id;
}

std::expected<ContainerPolicy, std::string> container_policy(const RuntimeConfig& cfg, const json& spec,
                                                             const std::string& container_id,
                                                             const std::string& bundle_dir) {
    ContainerPolicy p;
    p.tool = annotation(spec, kToolAnnotation);
    if (!valid_tool(p.tool))
        return std::unexpected(std::string("annotation ") + kToolAnnotation + ": '" + p.tool +
                               "' is not a tool name (a rule file's name in " + cfg.rules_dir + ")");
    p.rule_file = (std::filesystem::path(cfg.rules_dir) / (p.tool + ".yaml")).string();
    std::error_code ec;
    if (!std::filesystem::is_regular_file(p.rule_file, ec))
        return std::unexpected(std::string("annotation ") + kToolAnnotation + ": no rule file " + p.rule_file);
    policy::CompileOptions co;
    co.rules_dirs = {cfg.rules_dir};
    if (spec.contains("root") && spec["root"].contains("path") && spec["root"]["path"].is_string()) {
        std::filesystem::path rootfs = spec["root"]["path"].get<std::string>();
        if (rootfs.is_relative()) rootfs = std::filesystem::path(bundle_dir) / rootfs;
        co.library_root = std::filesystem::weakly_canonical(rootfs).string();
        if (co.library_root == "/") co.library_root.clear();
    }
    auto compiled = policy::compile_file(p.rule_file, co);
    if (!compiled.ok()) return std::unexpected(policy::render_diagnostics(compiled));
    auto oci = policy::export_oci_seccomp(*compiled.seccomp);
    if (!oci) return std::unexpected(p.rule_file + ": syscalls: " + oci.error().message);
    p.oci_seccomp = std::move(*oci);

    p.workdir = annotation(spec, kWorkdirAnnotation);
    const char* workdir_from = kWorkdirAnnotation;
    if (p.workdir.empty() && spec.contains("process")) {
        p.workdir = spec["process"].value("cwd", "");
        workdir_from = "process.cwd";
    }
    std::string home = env_value(spec, "HOME");
    if (home.empty() || home == "/") home = "/root";
    auto vars = policy::task_vars(p.workdir, task_id_of(container_id), home);
    vars["tmp"] = "/tmp";
    if (auto ok = policy::check_task_variable("workdir", p.workdir); !ok)
        return std::unexpected(std::string(workdir_from) + ": '" + p.workdir + "' cannot be the rules' ${workdir}: " +
                               ok.error() + " (set the annotation " + kWorkdirAnnotation + ")");
    auto inst = instantiate_tool(*compiled.bundle, vars);
    if (!inst) return std::unexpected(inst.error());
    p.bundle = std::move(*inst);

    if (auto g = annotation(spec, kGrantAnnotation); !g.empty()) {
        auto gj = json::parse(g, nullptr, false);
        if (gj.is_discarded())
            return std::unexpected(std::string("annotation ") + kGrantAnnotation + ": not JSON");
        auto grant = grant_from_json(gj, vars, std::string("annotation ") + kGrantAnnotation);
        if (!grant) return std::unexpected(grant.error());
        auto narrowed = policy::apply_grant(p.bundle, *grant, policy::Clock::now(), resolve_host);
        if (!narrowed) {
            std::string why;
            for (const auto& r : narrowed.error().reasons) why += "\n  " + r;
            return std::unexpected(std::string("annotation ") + kGrantAnnotation +
                                   ": the grant asks more than the tool's rules allow:" + why);
        }
        p.bundle = std::move(narrowed->bundle);
        p.granted = true;
    }
    p.bundle.hash = policy::bundle_hash(p.bundle);  // the container's own policy, as agentd will check it
    return p;
}

}  // namespace bulwark::oci
