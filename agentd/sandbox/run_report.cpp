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
          {"source", r.usage.source}}},
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
    return j;
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
    for (const auto& h : r.hardening) s += "  hardening: " + h + "\n";
    if (!r.network.empty()) s += "  network: " + r.network + "\n";
    if (!r.coverage_summary.empty()) s += "  rules: " + r.coverage_summary + "\n";
    for (const auto& u : r.unenforced) s += "  unenforced (unenforceable: run): " + u + "\n";
    for (const auto& w : r.warnings) s += "  warning: " + w + "\n";
    for (const auto& d : r.denials) s += "  denial: " + d + "\n";
    return s;
}

}  // namespace bulwark
