#include "oci/confine_spec.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "bulwark/policy/coverage.h"
#include "oci/launch_policy.h"
#include "sandbox/rule_coverage.h"

namespace bulwark::oci {

using nlohmann::json;

namespace {

using Step = std::expected<void, std::string>;

json& at_path(json& j, std::initializer_list<const char*> keys) {
    json* p = &j;
    for (const char* k : keys) {
        if (!p->contains(k) || !(*p)[k].is_object()) (*p)[k] = json::object();
        p = &(*p)[k];
    }
    return *p;
}

// Every capability set of an OCI process, empty.
json no_capabilities() {
    json caps = json::object();
    for (const char* set : {"bounding", "effective", "inheritable", "permitted", "ambient"}) caps[set] = json::array();
    return caps;
}

// Lowers a numeric field to `limit` (sets it when absent or not lower).
uint64_t lower(json& obj, const char* key, uint64_t limit) {
    if (obj.contains(key) && obj[key].is_number_integer()) {
        const int64_t cur = obj[key].get<int64_t>();
        if (cur > 0 && static_cast<uint64_t>(cur) <= limit) return static_cast<uint64_t>(cur);
    }
    obj[key] = limit;
    return limit;
}

class Confine {
public:
    Confine(const json& spec, const ContainerPolicy& p, std::string bundle_dir, std::string launch_dir,
            std::string report_dir)
        : p_(p), bundle_dir_(std::move(bundle_dir)), launch_dir_(std::move(launch_dir)), report_dir_(std::move(report_dir)) {
        out_.spec = spec;
    }
    ConfinedSpec take() { return std::move(out_); }

    Step check_spec() {
        json& s = out_.spec;
        if (!s.is_object()) return std::unexpected("config.json: not a JSON object");
        if (!s.contains("process") || !s["process"].is_object())
            return std::unexpected("config.json: process: required (the container's first program)");
        if (!s["process"].contains("args") || !s["process"]["args"].is_array() || s["process"]["args"].empty())
            return std::unexpected("config.json: process.args: required, non-empty");
        if (!s.contains("root") || !s["root"].contains("path") || !s["root"]["path"].is_string())
            return std::unexpected("config.json: root.path: required");
        std::filesystem::path root = s["root"]["path"].get<std::string>();
        if (root.is_relative()) root = std::filesystem::path(bundle_dir_) / root;
        rootfs_ = std::filesystem::weakly_canonical(root).string();
        s["root"]["path"] = rootfs_;
        out_.terminal = s["process"].value("terminal", false);
        return {};
    }

    Step no_new_privs() {
        out_.spec["process"]["noNewPrivileges"] = true;
        out_.report["no_new_privs"] = true;
        return {};
    }

    Step capabilities() {
        out_.spec["process"]["capabilities"] = no_capabilities();
        out_.report["capabilities"] = "none (every set emptied)";
        return {};
    }

    Step rlimits() {
        json& proc = out_.spec["process"];
        if (!proc.contains("rlimits") || !proc["rlimits"].is_array()) proc["rlimits"] = json::array();
        json done = json::object();
        auto set = [&](const char* type, std::optional<uint64_t> v) {
            if (!v) return;
            for (auto& r : proc["rlimits"])
                if (r.value("type", "") == type) {
                    lower(r, "hard", *v);
                    lower(r, "soft", r["hard"].get<uint64_t>());
                    done[type] = r["hard"];
                    return;
                }
            proc["rlimits"].push_back({{"type", type}, {"hard", *v}, {"soft", *v}});
            done[type] = *v;
        };
        set("RLIMIT_NOFILE", p_.bundle.limits.open_files);
        set("RLIMIT_FSIZE", p_.bundle.limits.file_size_bytes);
        out_.report["rlimits"] = done;
        return {};
    }

    Step cgroup_limits() {
        const auto& l = p_.bundle.limits;
        json done = json::object();
        if (l.memory_bytes) done["memory"] = lower(at_path(out_.spec, {"linux", "resources", "memory"}), "limit", *l.memory_bytes);
        if (l.pids) done["pids"] = lower(at_path(out_.spec, {"linux", "resources", "pids"}), "limit", *l.pids);
        if (l.cpu_percent) {
            json& cpu = at_path(out_.spec, {"linux", "resources", "cpu"});
            const uint64_t period = cpu.value("period", uint64_t{100000});
            cpu["period"] = period;
            done["cpu_quota"] = lower(cpu, "quota", period * *l.cpu_percent / 100);
        }
        out_.report["cgroup"] = done;
        return {};
    }

    Step seccomp() {
        json& linux = at_path(out_.spec, {"linux"});
        if (linux.contains("seccomp") && !linux["seccomp"].is_null()) {
            out_.report["seccomp"] = "the engine's profile kept in the spec; the tool's filter installed by the launcher "
                                     "(a call must pass both)";
        } else {
            linux["seccomp"] = p_.oci_seccomp;
            out_.report["seccomp"] = "the tool's filter in the spec (" + std::to_string(p_.oci_seccomp["syscalls"].size()) +
                                     " rules) and its exact program installed again by the launcher";
        }
        return {};
    }

    Step network_namespace() {
        json& linux = at_path(out_.spec, {"linux"});
        if (!linux.contains("namespaces") || !linux["namespaces"].is_array()) linux["namespaces"] = json::array();
        for (const auto& ns : linux["namespaces"])
            if (ns.value("type", "") == "network") out_.own_netns = true;
        if (!out_.own_netns && p_.bundle.network.mode == policy::NetMode::None) {
            linux["namespaces"].push_back({{"type", "network"}});
            out_.own_netns = true;
            out_.report["network_namespace"] = "an empty one (the tool has no network rules)";
        } else {
            out_.report["network_namespace"] = out_.own_netns ? "the spec's own" : "the host's (the spec shares it)";
        }
        return {};
    }

    Step deny_masks() {
        auto claims = policy::rule_coverage(p_.bundle);
        json& linux = at_path(out_.spec, {"linux"});
        if (!linux.contains("maskedPaths") || !linux["maskedPaths"].is_array()) linux["maskedPaths"] = json::array();
        for (const auto& req : deny_mask_requests(claims)) {
            MaskResult m{req.rule_id, req.path, false, ""};
            auto host = host_path(req.path);
            struct stat st {};
            if (!host) {
                m.how = *host.error().data() ? host.error() : "no host path";
            } else if (::lstat(host->c_str(), &st) == 0) {
                m.held = !S_ISLNK(st.st_mode);
                m.how = m.held ? "masked (linux.maskedPaths)" : "the path is a symbolic link in the container";
            } else {
                std::error_code ec;
                const auto parent = std::filesystem::path(*host).parent_path();
                if (std::filesystem::is_directory(parent, ec) && !std::filesystem::is_symlink(parent, ec) &&
                    std::filesystem::create_directory(*host, ec) && !ec) {
                    m.held = true;
                    m.how = "masked over an empty placeholder directory (absent at create)";
                } else {
                    m.how = "absent at create and no placeholder could be made at " + *host;
                }
            }
            if (m.held && std::find(linux["maskedPaths"].begin(), linux["maskedPaths"].end(), req.path) ==
                              linux["maskedPaths"].end())
                linux["maskedPaths"].push_back(req.path);
            out_.masks.push_back(std::move(m));
        }
        json rows = json::array();
        for (const auto& m : out_.masks) rows.push_back({{"rule", m.rule_id}, {"path", m.path}, {"held", m.held}, {"how", m.how}});
        out_.report["deny_masks"] = rows;
        return {};
    }

    Step launcher() {
        json& s = out_.spec;
        if (!s.contains("mounts") || !s["mounts"].is_array()) s["mounts"] = json::array();
        for (const auto& m : s["mounts"])
            if (m.value("destination", "") == kLaunchDir)
                return std::unexpected(std::string("config.json: mounts: ") + kLaunchDir + " is Bulwark's own");
        s["mounts"].push_back({{"destination", kLaunchDir},
                               {"type", "bind"},
                               {"source", launch_dir_},
                               {"options", json::array({"rbind", "ro", "nosuid", "nodev"})}});
        json args = json::array({kLauncherInContainer});
        if (!report_dir_.empty()) {
            s["mounts"].push_back({{"destination", kReportDirInContainer},
                                   {"type", "bind"},
                                   {"source", report_dir_},
                                   {"options", json::array({"rbind", "rw", "nosuid", "nodev", "noexec"})}});
            args.push_back("--report");
            args.push_back(kReportInContainer);
        }
        args.push_back("--");
        for (const auto& a : s["process"]["args"]) args.push_back(a);
        s["process"]["args"] = std::move(args);
        out_.report["launcher"] = std::string(kLauncherInContainer) + " (Landlock, the seccomp program, the supervisor)";
        return {};
    }

private:
    // Where a container path is on the host: below the bind mount that holds
    // it, else below the root filesystem.
    std::expected<std::string, std::string> host_path(const std::string& path) const {
        std::string best_dst, best_src;
        for (const auto& m : out_.spec.value("mounts", json::array())) {
            const std::string dst = m.value("destination", ""), type = m.value("type", "");
            const auto opts = m.value("options", json::array());
            const bool bind = type == "bind" || std::find(opts.begin(), opts.end(), "bind") != opts.end() ||
                              std::find(opts.begin(), opts.end(), "rbind") != opts.end();
            if (dst.empty() || (path != dst && !path.starts_with(dst + "/"))) continue;
            if (dst.size() < best_dst.size()) continue;
            best_dst = dst;
            best_src = bind ? m.value("source", "") : "";
        }
        if (!best_dst.empty() && best_src.empty())
            return std::unexpected("below the container's " + best_dst + " mount, which is not a bind mount");
        if (!best_dst.empty()) return best_src + path.substr(best_dst.size());
        return rootfs_ + path;
    }

    const ContainerPolicy& p_;
    std::string bundle_dir_, launch_dir_, report_dir_, rootfs_;
    ConfinedSpec out_;
};

}  // namespace

std::expected<ConfinedSpec, std::string> confine_spec(const json& spec, const ContainerPolicy& policy,
                                                      const std::string& bundle_dir, const std::string& launch_dir,
                                                      const std::string& report_dir) {
    Confine c(spec, policy, bundle_dir, launch_dir, report_dir);
    static constexpr Step (Confine::*kSteps[])() = {
        &Confine::check_spec,         // process, args and root present; root made absolute
        &Confine::no_new_privs,       //
        &Confine::capabilities,       // none
        &Confine::rlimits,            // open files, file size
        &Confine::cgroup_limits,      // memory, pids, cpu
        &Confine::seccomp,            // the tool's filter (or the engine's kept, the launcher adds the tool's)
        &Confine::network_namespace,  // an empty one for a tool without network rules
        &Confine::deny_masks,         // denies below allows
        &Confine::launcher,           // last: it wraps the args the steps above saw
    };
    // A field of the wrong type (nlohmann throws type_error) is a clear error
    // naming the spec, never an exception out of the runtime.
    try {
        for (auto step : kSteps)
            if (auto ok = (c.*step)(); !ok) return std::unexpected(ok.error());
    } catch (const json::exception& e) {
        return std::unexpected(std::string("config.json: a field of the wrong type: ") + e.what());
    }
    return c.take();
}

std::expected<json, std::string> confine_process(json process) {
    if (!process.is_object()) return std::unexpected("process: not a JSON object");
    if (!process.contains("args") || !process["args"].is_array() || process["args"].empty())
        return std::unexpected("process.args: required, non-empty");
    process["capabilities"] = no_capabilities();
    process["noNewPrivileges"] = true;
    json args = json::array({kLauncherInContainer, "--"});
    for (const auto& a : process["args"]) args.push_back(a);
    process["args"] = std::move(args);
    return process;
}

}  // namespace bulwark::oci
