#include "sandbox/run_report.h"

#include <nlohmann/json.hpp>

#include <csignal>
#include <cstring>

namespace bulwark {

int RunReport::exit_status() const {
    switch (outcome) {
        case RunOutcome::Refused: return kExitRefused;
        case RunOutcome::SetupFailed: return kExitSetupFailed;
        case RunOutcome::ExecFailed: return kExitExecFailed;
        case RunOutcome::Signaled: return timed_out ? kExitTimeout : 128 + signal;
        case RunOutcome::Exited: return timed_out ? kExitTimeout : exit_code;
    }
    return kExitSetupFailed;
}

const LayerStatus* RunReport::layer(const std::string& name) const {
    for (const auto& l : layers)
        if (l.name == name) return &l;
    return nullptr;
}

const char* to_string(LayerState s) {
    switch (s) {
        case LayerState::Enforcing: return "enforcing";
        case LayerState::Unavailable: return "unavailable";
        case LayerState::NotRequested: return "not-requested";
    }
    return "?";
}

const char* to_string(RunOutcome o) {
    switch (o) {
        case RunOutcome::Exited: return "exited";
        case RunOutcome::Signaled: return "signaled";
        case RunOutcome::Refused: return "refused";
        case RunOutcome::SetupFailed: return "setup-failed";
        case RunOutcome::ExecFailed: return "exec-failed";
    }
    return "?";
}

nlohmann::json to_json(const RunReport& r) {
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& l : r.layers)
        layers.push_back({{"name", l.name},
                          {"state", to_string(l.state)},
                          {"detail", l.detail},
                          {"dropped", l.dropped}});
    nlohmann::json j = {
        {"tool", r.tool},
        {"argv", r.argv},
        {"outcome", to_string(r.outcome)},
        {"exit_status", r.exit_status()},
        {"exit_code", r.exit_code},
        {"signal", r.signal},
        {"timed_out", r.timed_out},
        {"oom_killed", r.oom_killed},
        {"stdout", {{"data", r.stdout_data}, {"truncated", r.stdout_truncated}}},
        {"stderr", {{"data", r.stderr_data}, {"truncated", r.stderr_truncated}}},
        {"usage",
         {{"wall_us", r.usage.wall_us},
          {"cpu_user_us", r.usage.cpu_user_us},
          {"cpu_system_us", r.usage.cpu_system_us},
          {"peak_memory_bytes", r.usage.peak_memory_bytes},
          {"source", r.usage.source},
          {"setup_us", r.usage.setup_us}}},
        {"layers", layers},
        {"hardening", r.hardening},
        {"warnings", r.warnings},
        {"denials", r.denials},
        {"network", r.network},
        {"error", r.error},
        {"rules", {{"summary", r.coverage_summary}, {"coverage", r.coverage.is_null() ? nlohmann::json::array() : r.coverage},
                   {"unenforced", r.unenforced}}},
    };
    if (!r.refusal_code.empty()) j["refusal_code"] = r.refusal_code;
    if (!r.cgroups_left.empty()) {
        nlohmann::json left = nlohmann::json::array();
        for (const auto& [path, why] : r.cgroups_left) left.push_back({{"path", path}, {"error", why}});
        j["cgroups_left"] = std::move(left);
    }
    if (r.workdir_vanished) j["workdir_vanished"] = true;
    if (!r.microvm.is_null()) j["microvm"] = r.microvm;
    if (!r.counted.is_null()) j["counted"] = r.counted;
    return j;
}

std::expected<RunReport, std::string> report_from_json(const nlohmann::json& j) {
    try {
        RunReport r;
        r.tool = j.value("tool", "");
        r.argv = j.value("argv", std::vector<std::string>{});
        const std::string outcome = j.at("outcome").get<std::string>();
        bool known = false;
        for (auto o : {RunOutcome::Exited, RunOutcome::Signaled, RunOutcome::Refused, RunOutcome::SetupFailed,
                       RunOutcome::ExecFailed})
            if (outcome == to_string(o)) {
                r.outcome = o;
                known = true;
            }
        if (!known) return std::unexpected("unknown outcome \"" + outcome + "\"");
        r.exit_code = j.value("exit_code", -1);
        r.signal = j.value("signal", 0);
        r.timed_out = j.value("timed_out", false);
        r.oom_killed = j.value("oom_killed", false);
        if (j.contains("stdout")) r.stdout_truncated = j["stdout"].value("truncated", false);
        if (j.contains("stderr")) r.stderr_truncated = j["stderr"].value("truncated", false);
        if (j.contains("usage")) {
            const auto& u = j["usage"];
            r.usage.wall_us = u.value("wall_us", uint64_t(0));
            r.usage.cpu_user_us = u.value("cpu_user_us", uint64_t(0));
            r.usage.cpu_system_us = u.value("cpu_system_us", uint64_t(0));
            r.usage.peak_memory_bytes = u.value("peak_memory_bytes", uint64_t(0));
            r.usage.source = u.value("source", "");
            r.usage.setup_us = u.value("setup_us", std::vector<std::pair<std::string, uint64_t>>{});
        }
        for (const auto& l : j.value("layers", nlohmann::json::array())) {
            LayerStatus s;
            s.name = l.at("name").get<std::string>();
            std::string st = l.value("state", "");
            s.state = st == "enforcing" ? LayerState::Enforcing
                      : st == "unavailable" ? LayerState::Unavailable
                                            : LayerState::NotRequested;
            s.detail = l.value("detail", "");
            s.dropped = l.value("dropped", std::vector<std::string>{});
            r.layers.push_back(std::move(s));
        }
        r.hardening = j.value("hardening", std::vector<std::string>{});
        r.warnings = j.value("warnings", std::vector<std::string>{});
        r.denials = j.value("denials", std::vector<std::string>{});
        r.network = j.value("network", "");
        r.error = j.value("error", "");
        r.refusal_code = j.value("refusal_code", "");
        if (j.contains("rules")) {
            r.coverage_summary = j["rules"].value("summary", "");
            r.coverage = j["rules"].value("coverage", nlohmann::json::array());
            r.unenforced = j["rules"].value("unenforced", std::vector<std::string>{});
        }
        r.workdir_vanished = j.value("workdir_vanished", false);
        if (j.contains("counted") && j["counted"].is_object()) r.counted = j["counted"];
        return r;
    } catch (const nlohmann::json::exception& e) {
        return std::unexpected(std::string("run report: ") + e.what());
    }
}

std::string summary(const RunReport& r) {
    std::string s = "agentd run: " + r.tool + ": " + to_string(r.outcome);
    if (r.outcome == RunOutcome::Exited) s += " " + std::to_string(r.exit_code);
    if (r.outcome == RunOutcome::Signaled) {
        const char* n = sigabbrev_np(r.signal);
        s += std::string(" SIG") + (n ? n : std::to_string(r.signal).c_str());
    }
    if (r.timed_out) s += " (timed out)";
    if (r.oom_killed) s += " (OOM-killed)";
    if (r.stdout_truncated || r.stderr_truncated) s += " (output truncated)";
    s += "\n";
    if (!r.error.empty()) s += "  error: " + r.error + "\n";
    for (const auto& l : r.layers) {
        s += "  layer " + l.name + ": " + to_string(l.state);
        if (!l.detail.empty()) s += ": " + l.detail;
        s += "\n";
        for (const auto& d : l.dropped) s += "    dropped: " + d + "\n";
    }
    if (!r.microvm.is_null()) {
        const auto& m = r.microvm;
        s += "  microvm: " + m.value("vmm", std::string()) + " (" + m.value("accel", std::string()) + "), image " +
             m["image"].value("digest", std::string()) + ", guest kernel " +
             m["image"].value("kernel_version", std::string());
        if (m.contains("boot_ms") && m["boot_ms"].is_number()) s += ", boot " + std::to_string(m["boot_ms"].get<uint64_t>()) + " ms";
        s += "\n";
        if (m.contains("vmm_run"))
            for (const auto& l : m["vmm_run"].value("layers", nlohmann::json::array()))
                s += "  vmm layer " + l.value("name", std::string()) + ": " + l.value("state", std::string()) +
                     (l.value("detail", std::string()).empty() ? "" : ": " + l.value("detail", std::string())) + "\n";
    }
    for (const auto& h : r.hardening) s += "  hardening: " + h + "\n";
    if (!r.network.empty()) s += "  network: " + r.network + "\n";
    if (!r.coverage_summary.empty()) s += "  rules: " + r.coverage_summary + "\n";
    for (const auto& u : r.unenforced) s += "  unenforced (unenforceable: run): " + u + "\n";
    for (const auto& w : r.warnings) s += "  warning: " + w + "\n";
    for (const auto& d : r.denials) s += "  denial: " + d + "\n";
    return s;
}

}  // namespace bulwark
