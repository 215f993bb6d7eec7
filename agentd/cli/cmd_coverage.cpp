// agentd coverage --rules DIR [--tool NAME ...] [--workdir DIR] [--json]
//
// For each tool (every rule file of DIR by default): the launch is planned
// exactly as `agentd run` plans it (layers proven by their canaries, the BPF
// programs this host runs, the mount masks) and stopped before anything
// starts; each rule is listed with the layers in force that hold it.
// Exit status: 0 when every rule of every tool is held (or marked
// `unenforceable: run`), 1 when a tool would be refused for a rule no layer
// in force holds, 3 when a tool's launch stops before its rules are judged
// (e.g. a required hardening property its binary lacks), 2 on bad input.
#include "cli/cmd_coverage.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>

#include "bpf/bpf_runtime.h"
#include "cli/bpf_options.h"
#include "cli/cmd_run.h"
#include "sandbox/run_report.h"
#include "sandbox/tool_coverage.h"

namespace bulwark {
namespace {

struct Opts {
    std::string rules, workdir;
    std::vector<std::string> tools;
    bool json = false;
    BpfCliOptions bpf;
};

std::vector<std::string> tools_of(const std::string& dir) {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
        if (e.is_regular_file() && e.path().extension() == ".yaml") out.push_back(e.path().stem().string());
    std::sort(out.begin(), out.end());
    return out;
}

// Where no layer holds it: the rule rows nothing holds, for the text form.
std::string text_of(const std::string& tool, const RunReport& rep) {
    std::string s = tool + ": ";
    if (rep.refusal_code == "rule_unenforced") return s + "REFUSED: " + rep.error + "\n";
    if (rep.coverage_summary.empty()) return s + "not planned: " + rep.error + "\n";
    s += rep.coverage_summary + "\n";
    for (const auto& u : rep.unenforced) s += "  unenforced (unenforceable: run): " + u + "\n";
    for (const auto& w : rep.warnings) s += "  note: " + w + "\n";
    return s;
}

int run(const Opts& o) {
    if (!spdlog::get("agentd-coverage")) spdlog::set_default_logger(spdlog::stderr_color_mt("agentd-coverage"));
    spdlog::set_level(spdlog::level::warn);
    std::vector<std::string> tools = o.tools.empty() ? tools_of(o.rules) : o.tools;
    if (tools.empty()) {
        std::cerr << "agentd coverage: no rule files in " << o.rules << "\n";
        return 2;
    }
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path scratch;
    std::string workdir = o.workdir;
    if (workdir.empty()) {
        // A fresh work directory, as a task gets: masks for denies inside it
        // are planned (and their mask points made) there, then it goes.
        scratch = fs::temp_directory_path() / ("bulwark-coverage-" + std::to_string(::getpid()));
        fs::create_directories(scratch, ec);
        if (ec) {
            std::cerr << "agentd coverage: " << scratch << ": " << ec.message() << "\n";
            return 2;
        }
        workdir = scratch.string();
    }
    workdir = fs::canonical(workdir, ec).string();
    std::map<std::string, std::string> bpf_layers;
    bpf::RuntimeOptions ro;
    ro.sink = [](audit::AuditRecord) {};
    auto [rt, bpf_unavailable] = start_bpf_runtime(o.bpf, std::move(ro));
    if (rt) bpf_layers = rt->layer_states();
    PlanContext ctx{workdir, bpf_layers, bpf_unavailable, rt ? rt->cgroup_parent() : std::string()};
    int status = 0;
    nlohmann::json doc = nlohmann::json::object();
    for (const auto& tool : tools) {
        auto bundle = load_tool_bundle(o.rules, tool, workdir, planning_resolver());
        RunReport rep;
        if (bundle) {
            rep = plan_tool_launch(*bundle, ctx);
        } else {
            rep.tool = tool;
            rep.error = bundle.error();
        }
        if (rep.refusal_code == "rule_unenforced") status = 1;
        else if (plan_refused(rep) && status == 0) status = 3;
        if (o.json) {
            nlohmann::json j = to_json(rep);
            doc[tool] = plan_summary_json(rep);
            doc[tool]["layers"] = j["layers"];
            doc[tool]["rules"] = j["rules"];
            doc[tool]["warnings"] = rep.warnings;
        } else {
            std::cout << text_of(tool, rep);
        }
    }
    if (o.json) std::cout << doc.dump(2) << "\n";
    if (!scratch.empty()) fs::remove_all(scratch, ec);
    return status;
}

}  // namespace

void register_coverage(CLI::App& app) {
    auto o = std::make_shared<Opts>();
    auto* sub = app.add_subcommand("coverage", "list, per tool, the layers in force here that hold each rule");
    sub->add_option("--rules", o->rules, "directory of rule files")->required();
    sub->add_option("--tool", o->tools, "tool name (repeatable; default: every rule file of --rules)");
    sub->add_option("--workdir", o->workdir, "work directory to plan with (default: a fresh one, removed after)");
    sub->add_flag("--json", o->json, "one JSON document: tool -> layers and per-rule coverage");
    o->bpf.reuse_proof = true;
    o->bpf.add_to(*sub, "plan without the BPF layer");
    sub->callback([o] { throw CLI::RuntimeError(run(*o)); });
}

}  // namespace bulwark
