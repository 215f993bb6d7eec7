// agentd run --rules DIR --tool NAME [--workdir DIR] [--json] [--self-seccomp BUNDLE] -- CMD ARGS...
//
// Exit status: the tool's own; 128+N when it died of signal N; 124 when the
// wall-clock limit killed it; 125 when the policy refused the launch; 126
// when the sandbox could not be built (nothing ran); 127 when exec of the
// verified binary failed. The report (layers in force, hardening, usage,
// denials) goes to stderr, or as one JSON document to stdout with --json
// (the tool's output is then inside the document).
#include "cli/cmd_run.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "audit/audit_record.h"
#include "bpf/bpf_runtime.h"
#include "cli/bpf_options.h"
#include "bulwark/policy/compile_cache.h"
#include "bulwark/policy/compiler.h"
#include "bulwark/policy/instantiate.h"
#include "kaudit/kernel_audit.h"
#include "kaudit/run_registry.h"
#include "tasks/run_binding.h"
#include "sandbox/run_report.h"
#include "sandbox/self_privilege.h"
#include "sandbox/spawner.h"
#include "tasks/tool_catalog.h"
#include "vm/microvm_run.h"

namespace bulwark {

// One-shot runs are their own task: ${workdir} is the bound directory,
// ${home} the caller's home (so rules about ~/.ssh mean the real one), ${tmp}
// the sandbox's private /tmp. The tool's rules and its VMM's read the same.
policy::TaskVars one_shot_vars(const std::string& workdir) {
    const char* home = std::getenv("HOME");
    return policy::task_vars(
        workdir, "run-" + std::to_string(::getpid()),
        home && home[0] == '/' && std::string_view(home) != "/" ? std::optional<std::string>(home) : std::nullopt);
}

std::expected<policy::Bundle, std::string> load_tool_bundle(const std::string& rules_dir,
                                                           const std::string& tool,
                                                           const std::string& workdir,
                                                           const policy::Resolver& resolve,
                                                           std::string* cache) {
    namespace fs = std::filesystem;
    fs::path file = fs::path(rules_dir) / (tool + ".yaml");
    if (!fs::exists(file)) return std::unexpected("no rule file " + file.string() + " for tool " + tool);
    policy::CompileOptions opts;
    opts.rules_dirs = {rules_dir};
    static std::string no_cache;
    static const std::optional<policy::CompileCache> bundles = policy::CompileCache::from_environment(no_cache);
    policy::CompileResult compiled;
    if (bundles) {
        auto c = bundles->compile_file(file.string(), opts);
        compiled = std::move(c.result);
        if (cache) *cache = std::move(c.cache);
    } else {
        compiled = policy::compile_file(file.string(), opts);
        if (cache) *cache = no_cache;
    }
    if (!compiled.ok())
        return std::unexpected("cannot compile " + file.string() + ":\n" + policy::render_diagnostics(compiled));
    policy::TaskVars vars = one_shot_vars(workdir);
    return resolve ? instantiate_tool(*compiled.bundle, vars, resolve) : instantiate_tool(*compiled.bundle, vars);
}

std::string decision_line(const audit::AuditRecord& d) {
    std::string line = std::string(audit::decision_name(d.decision)) + " " + std::string(audit::layer_name(d.layer)) +
                       " " + std::string(audit::op_name(d.op)) + " " + d.object;
    if (d.err) line += " (errno " + std::to_string(d.err) + ")";
    if (!d.rule_file.empty())
        line += " by " + d.rule_file + ":" + std::to_string(d.rule_line) + " " + d.rule_text;
    else if (d.rule_id == BW_NO_RULE)
        line += " by the policy's default";
    return line;
}

namespace {
// Milliseconds since the last lap (or since it was made), kept under a name.
class Laps {
public:
    void lap(const char* name) {
        auto now = std::chrono::steady_clock::now();
        ms_[name] = std::round(std::chrono::duration<double, std::milli>(now - at_).count() * 100) / 100;
        at_ = now;
    }
    nlohmann::json take() { return std::move(ms_); }

private:
    std::chrono::steady_clock::time_point at_ = std::chrono::steady_clock::now();
    nlohmann::json ms_ = nlohmann::json::object();
};
}  // namespace

OneShotRun run_one_shot(const OneShot& o, const std::expected<policy::Bundle, std::string>& bundle) {
    Laps laps;
    RunReport rep;
    // This run's decisions: the BPF runtime's ring buffer (cgroup socket
    // programs, the monitor, BPF LSM where the kernel has it) and the
    // kernel audit source (Landlock and seccomp denials,
    // docs/kernel-audit.md). Both tag them with the run's id.
    const uint64_t run_id = o.run_id;
    std::mutex mu;
    std::vector<audit::AuditRecord> decisions;
    std::vector<std::string> gaps;
    nlohmann::json bpf_status = nullptr;
    RunRegistry registry;
    KernelAuditOptions kopts;
    kopts.resolve = [&](const kaudit::KernelDenial& d) { return registry.resolve(d); };
    kopts.sink = [&](audit::AuditRecord r) {
        std::lock_guard lk(mu);
        decisions.push_back(std::move(r));
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
    laps.lap("kernel_audit");
    if (!bundle) {
        rep.tool = o.tool;
        rep.argv = o.argv;
        rep.outcome = RunOutcome::Refused;
        rep.error = bundle.error();
    } else {
        RunRequest req;
        req.argv = o.argv;
        req.workdir = o.workdir;
        req.host_view = o.host_view;
        DecisionSources sources;
        sources.kaudit = reader.get();
        sources.registry = &registry;
        bpf::RuntimeOptions ro;
        ro.sink = [&](audit::AuditRecord r) {
            std::lock_guard lk(mu);
            decisions.push_back(std::move(r));
        };
        ro.on_drops = [&](const std::string& source, uint64_t n) {
            std::lock_guard lk(mu);
            gaps.push_back(std::to_string(n) + " record(s) lost: " + source);
        };
        auto [rt, bpf_unavailable] = start_bpf_runtime(o.bpf, std::move(ro));
        sources.bpf = rt.get();
        sources.bpf_unavailable = bpf_unavailable;
        if (rt) {
            bpf_status = rt->status();
            rt->scan_readers_ahead();
        }
        laps.lap("bpf_layer");
        // The tool's VM when its rules ask for one and this host can
        // run it; then the VMM is the run this process binds.
        std::vector<std::string> route_warnings;
        std::optional<vm::MicroVmLaunch> launch;
        std::string vm_error;
        if (bundle->microvm.mode != policy::MicroVmMode::Off) {
            auto host = vm::probe_microvm_host({o.rules_dir}, vm::guest_image_dirs());
            if (vm::route(*bundle, host, req, route_warnings)) {
                auto l = vm::plan_microvm(*bundle, host, one_shot_vars(o.workdir));
                if (l) launch = std::move(*l);
                else vm_error = l.error();
            }
        }
        const policy::Bundle& bound = launch ? launch->vmm_bundle : *bundle;
        {
            RunBinding binding(sources, bound,
                               RunContext{0, run_id, o.tool, 0, std::make_shared<const policy::Bundle>(bound)});
            if (!vm_error.empty()) {
                rep.tool = o.tool;
                rep.argv = o.argv;
                rep.outcome = RunOutcome::SetupFailed;
                rep.error = "microVM: " + vm_error;
            } else if (launch) {
                RunRequest vreq;
                binding.prepare(vreq);
                rep = vm::run_in_microvm(*launch, *bundle, req, std::move(vreq));
            } else {
                binding.prepare(req);
                rep = run_tool(*bundle, req);
            }
            for (auto& w : route_warnings) rep.warnings.push_back(std::move(w));
            laps.lap("run");
            auto end = binding.finish(rep);
            if (reader) {
                kaudit_status = reader->status();
                kaudit_status["state"] = end.kaudit_read ? "read" : "incomplete";
                if (end.kaudit_lost) kaudit_status["lost_during_run"] = end.kaudit_lost;
            }
        }
        rt.reset();
    }
    reader.reset();
    std::vector<audit::AuditRecord> mine;
    {
        std::lock_guard lk(mu);
        for (auto& d : decisions)
            if (d.run_id == run_id && d.task_id == 0) mine.push_back(std::move(d));
        for (const auto& g : gaps) rep.warnings.push_back("audit gap: " + g);
    }
    std::sort(mine.begin(), mine.end(),
              [](const audit::AuditRecord& a, const audit::AuditRecord& b) { return a.ts_ns < b.ts_ns; });
    laps.lap("finish");
    return {std::move(rep), std::move(mine), std::move(bpf_status), std::move(kaudit_status), laps.take()};
}

void start_one_shot_process(const std::string& who) {
    // stdout carries the tool's output or a JSON document: logs go to stderr.
    if (!spdlog::get("agentd-run")) spdlog::set_default_logger(spdlog::stderr_color_mt("agentd-run"));
    spdlog::set_level(spdlog::level::warn);
    // The capabilities of sandbox/self_privilege.cpp's table and no other,
    // before any thread starts (they inherit them).
    if (auto d = drop_own_capabilities(); !d) {
        std::cerr << who << ": dropping capabilities: " << d.error() << "\n";
        throw CLI::RuntimeError(126);
    }
}

void register_run(CLI::App& app) {
    struct Opts {
        std::string rules, tool, workdir, self_seccomp;
        bool json = false;
        BpfCliOptions bpf;
        std::vector<std::string> cmd;
    };
    auto o = std::make_shared<Opts>();
    auto* run = app.add_subcommand("run", "run one tool in its sandbox and report");
    run->add_option("--rules", o->rules, "directory of rule files")->required();
    run->add_option("--tool", o->tool, "tool name (rules/<tool>.yaml)")->required();
    run->add_option("--workdir", o->workdir, "directory bound read-write as the tool's cwd");
    run->add_flag("--json", o->json, "print the run report as JSON on stdout");
    run->add_option("--self-seccomp", o->self_seccomp,
                    "agentd's own seccomp filter: the bundle policyc compiled from deploy/systemd/agentd-self.yaml, "
                    "installed before anything else is read (the tool's filter stacks on it)");
    o->bpf.reuse_proof = true;
    o->bpf.add_to(*run, "run without the BPF layer (tools with network rules are refused)");
    run->add_option("cmd", o->cmd, "command and arguments (after --)")->required();
    run->callback([o] {
        start_one_shot_process("agentd run");
        // Its own seccomp filter, like `agentd serve --self-seccomp`: before
        // the rule files, the kernel audit records and the ring buffer are
        // read, and before any thread starts (TSYNC covers them anyway).
        std::optional<SelfFilter> self_filter;
        if (!o->self_seccomp.empty()) {
            auto f = load_self_filter(o->self_seccomp);
            if (!f) {
                std::cerr << "agentd run: --self-seccomp: " << f.error() << "\n";
                throw CLI::RuntimeError(126);
            }
            if (auto r = install_self_filter(*f); !r) {
                std::cerr << "agentd run: own seccomp filter: " << r.error() << "\n";
                throw CLI::RuntimeError(126);
            }
            self_filter = std::move(*f);
        }
        Laps compiling;
        std::error_code ec;
        std::string workdir = o->workdir.empty() ? std::filesystem::current_path(ec).string()
                                                 : std::filesystem::canonical(o->workdir, ec).string();
        std::string cache;
        auto bundle = ec ? std::expected<policy::Bundle, std::string>(std::unexpected(
                               "workdir " + o->workdir + ": " + ec.message()))
                         : load_tool_bundle(o->rules, o->tool, workdir, {}, &cache);
        if (bundle && self_filter)
            if (auto said = own_filter_warning(*self_filter, o->tool, *bundle); !said.empty()) spdlog::warn("{}", said);
        compiling.lap("compile");
        auto [rep, mine, bpf_status, kaudit_status, timings] =
            run_one_shot(OneShot{o->rules, o->tool, workdir, o->cmd, o->bpf, static_cast<uint64_t>(::getpid())}, bundle);
        if (o->json) {
            nlohmann::json doc = to_json(rep);
            nlohmann::json ds = nlohmann::json::array();
            for (const auto& d : mine) ds.push_back(audit::to_json(d));
            doc["decisions"] = std::move(ds);
            doc["bpf"] = std::move(bpf_status);
            doc["compile_cache"] = cache;
            if (!kaudit_status.is_null()) doc["kernel_audit"] = std::move(kaudit_status);
            timings.update(compiling.take());
            doc["timings_ms"] = std::move(timings);
            std::cout << doc.dump(2) << std::endl;
        } else {
            std::cout << rep.stdout_data << std::flush;
            std::string lines;
            for (const auto& d : mine) lines += "decision: " + decision_line(d) + "\n";
            if (!rep.microvm.is_null())
                for (const auto& d : rep.microvm.value("decisions", nlohmann::json::array())) {
                    lines += "decision (in the guest): " + d.value("decision", std::string()) + " " +
                             d.value("layer", std::string()) + " " + d.value("op", std::string()) + " " +
                             d.value("object", std::string());
                    if (d.contains("rule") && d["rule"].is_object())
                        lines += " by " + d["rule"].value("file", std::string()) + ":" +
                                 std::to_string(d["rule"].value("line", 0)) + " " + d["rule"].value("text", std::string());
                    lines += "\n";
                }
            std::cerr << rep.stderr_data << summary(rep) << lines << std::flush;
        }
        throw CLI::RuntimeError(rep.exit_status());
    });
}

}  // namespace bulwark
