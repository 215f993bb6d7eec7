// agentd run --rules DIR --tool NAME [--workdir DIR] [--json] -- CMD ARGS...
//
// Exit status: the tool's own; 128+N when it died of signal N; 124 when the
// wall-clock limit killed it; 125 when the policy refused the launch; 126
// when the sandbox could not be built (nothing ran); 127 when exec of the
// verified binary failed. The report (layers in force, hardening, usage,
// denials) goes to stderr, or as one JSON document to stdout with --json
// (the tool's output is then inside the document).
#include "cmd_run.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>

#include "bulwark/policy/compiler.h"
#include "bulwark/policy/instantiate.h"
#include "kernel_audit.h"
#include "run_registry.h"
#include "run_report.h"
#include "spawner.h"
#include "tool_catalog.h"

namespace bulwark {

std::expected<policy::Bundle, std::string> load_tool_bundle(const std::string& rules_dir,
                                                           const std::string& tool,
                                                           const std::string& workdir) {
    namespace fs = std::filesystem;
    fs::path file = fs::path(rules_dir) / (tool + ".yaml");
    if (!fs::exists(file)) return std::unexpected("no rule file " + file.string() + " for tool " + tool);
    policy::CompileOptions opts;
    opts.rules_dirs = {rules_dir};
    auto compiled = policy::compile_file(file.string(), opts);
    if (!compiled.ok())
        return std::unexpected("cannot compile " + file.string() + ":\n" + policy::render_diagnostics(compiled));
    // One-shot runs are their own task: ${workdir} is the bound directory,
    // ${home} the caller's home (so rules about ~/.ssh mean the real one),
    // ${tmp} the sandbox's private /tmp.
    policy::TaskVars vars;
    vars["workdir"] = workdir;
    const char* home = std::getenv("HOME");
    vars["home"] = (home && home[0] == '/' && std::string_view(home) != "/") ? std::string(home) : workdir;
    vars["tmp"] = "/tmp";
    vars["task_id"] = "run-" + std::to_string(::getpid());
    return instantiate_tool(*compiled.bundle, vars);
}

void register_run(CLI::App& app) {
    struct Opts {
        std::string rules, tool, workdir;
        bool json = false;
        std::vector<std::string> cmd;
    };
    auto o = std::make_shared<Opts>();
    auto* run = app.add_subcommand("run", "run one tool in its sandbox and report");
    run->add_option("--rules", o->rules, "directory of rule files")->required();
    run->add_option("--tool", o->tool, "tool name (rules/<tool>.yaml)")->required();
    run->add_option("--workdir", o->workdir, "directory bound read-write as the tool's cwd");
    run->add_flag("--json", o->json, "print the run report as JSON on stdout");
    run->add_option("cmd", o->cmd, "command and arguments (after --)")->required();
    run->callback([o] {
        std::error_code ec;
        std::string workdir = o->workdir.empty() ? std::filesystem::current_path(ec).string()
                                                 : std::filesystem::canonical(o->workdir, ec).string();
        auto bundle = ec ? std::expected<policy::Bundle, std::string>(std::unexpected(
                               "workdir " + o->workdir + ": " + ec.message()))
                         : load_tool_bundle(o->rules, o->tool, workdir);
        RunReport rep;
        // Kernel audit source: Landlock and seccomp denials of this run
        // become the report's decisions (docs/kernel-audit.md).
        RunRegistry registry;
        std::mutex mu;
        std::vector<audit::AuditRecord> decisions;
        uint64_t lost = 0;
        KernelAuditOptions kopts;
        kopts.resolve = [&](const kaudit::KernelDenial& d) { return registry.resolve(d); };
        kopts.sink = [&](audit::AuditRecord r) {
            std::lock_guard lk(mu);
            decisions.push_back(std::move(r));
        };
        kopts.on_lost = [&](const std::string&, uint64_t n) {
            std::lock_guard lk(mu);
            lost += n;
        };
        std::unique_ptr<KernelAuditReader> reader;
        nlohmann::json kaudit_status;
        if (bundle) {
            if (auto r = KernelAuditReader::start(std::move(kopts))) {
                reader = std::move(*r);
            } else {
                kaudit_status = {{"state", "unavailable: " + r.error()}};
            }
        }
        if (!bundle) {
            rep.tool = o->tool;
            rep.argv = o->cmd;
            rep.outcome = RunOutcome::Refused;
            rep.error = bundle.error();
        } else {
            RunRequest req;
            req.argv = o->cmd;
            req.workdir = workdir;
            std::string cgroup;
            req.on_cgroup = [&](const std::string& path, pid_t pid) {
                cgroup = path;
                registry.add(path, pid, RunContext{0, 0, o->tool, 0});
            };
            rep = run_tool(*bundle, req);
            if (reader) {
                // Records arrive asynchronously: wait (bounded) until the
                // reader has consumed the audit queue up to the run's end.
                bool drained = reader->barrier(std::chrono::milliseconds(2000));
                if (!drained) rep.warnings.push_back("kernel audit: the backlog up to the run's end was not consumed within 2 s; decisions may be incomplete");
                kaudit_status = reader->status();
                kaudit_status["state"] = drained ? "read" : "incomplete";
            }
            registry.remove(cgroup);
        }
        nlohmann::json dj = nlohmann::json::array();
        {
            std::lock_guard lk(mu);
            for (const auto& d : decisions) dj.push_back(audit::to_json(d));
            if (lost) {
                kaudit_status["lost_during_run"] = lost;
                rep.warnings.push_back("kernel audit: " + std::to_string(lost) +
                                       " record(s) lost during the run (kernel lost counter / socket overruns); "
                                       "decisions may be incomplete");
            }
        }
        if (o->json) {
            nlohmann::json out = to_json(rep);
            out["decisions"] = std::move(dj);
            if (!kaudit_status.is_null()) out["kernel_audit"] = std::move(kaudit_status);
            std::cout << out.dump(2) << std::endl;
        } else {
            std::cout << rep.stdout_data << std::flush;
            std::string lines;
            for (const auto& d : dj)
                lines += "  decision: " + d.value("layer", "") + " " + d.value("decision", "") + " " +
                         d.value("op", "") + " " + d.value("object", "") + " (pid " +
                         std::to_string(d.value("pid", 0u)) + " " + d.value("comm", "") + ")\n";
            std::cerr << rep.stderr_data << summary(rep) << lines << std::flush;
        }
        throw CLI::RuntimeError(rep.exit_status());
    });
}

}  // namespace bulwark
