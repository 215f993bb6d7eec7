#pragma once
// `agentd run`: the one-shot CLI around run_tool().
#include <cstdint>
#include <expected>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "audit/audit_record.h"
#include "bulwark/policy/bundle.h"
#include "bulwark/policy/instantiate.h"
#include "cli/bpf_options.h"
#include "sandbox/run_report.h"

namespace CLI {
class App;
}

namespace bulwark {

// Adds the `run` subcommand. Its callback ends parsing with
// CLI::RuntimeError(status) so main returns the run's exit status.
void register_run(CLI::App& app);

// One-shot runs are their own task: ${workdir} is the bound directory,
// ${home} the caller's home, ${tmp} the sandbox's private /tmp.
policy::TaskVars one_shot_vars(const std::string& workdir);

// The rules loading of `agentd run`: <rules_dir>/<tool>.yaml compiled
// (extends resolved in rules_dir) and instantiated for a one-shot task whose
// ${workdir} is `workdir` (absolute, canonical); host names are resolved
// with the host's resolver. Errors carry the compiler's diagnostics. The
// compile goes through the bundle cache (policy/compile_cache.h) unless
// BULWARK_BUNDLE_CACHE=off; `cache`, when given, says what the cache did.
std::expected<policy::Bundle, std::string> load_tool_bundle(const std::string& rules_dir,
                                                           const std::string& tool,
                                                           const std::string& workdir,
                                                           const policy::Resolver& resolve = {},
                                                           std::string* cache = nullptr);

// One run of a tool as `agentd run` makes it: the BPF runtime and the kernel
// audit reader started for it, the tool in its sandbox (or its microVM), and
// the decisions recorded under `run_id`, oldest first.
struct OneShot {
    std::string rules_dir, tool, workdir;  // workdir absolute and canonical
    std::vector<std::string> argv;
    BpfCliOptions bpf;
    uint64_t run_id = 0;  // the decisions' run id; unique among this process's runs
    bool host_view = false;  // RunRequest::host_view (agentd learn)
};
struct OneShotRun {
    RunReport report;
    std::vector<audit::AuditRecord> decisions;
    nlohmann::json bpf_status, kaudit_status;
    // Milliseconds each step took (kernel_audit, bpf_layer, run, finish), for
    // `agentd run --json` and the CLI benchmark.
    nlohmann::json timings_ms = nlohmann::json::object();
};
// `bundle`: the tool's instantiated rules, or why there are none (the run is
// then reported refused without starting anything).
OneShotRun run_one_shot(const OneShot& o, const std::expected<policy::Bundle, std::string>& bundle);

// What `agentd run` and `agentd learn` do first: logs to stderr, and the
// process's capabilities dropped to self_privilege's table (failing that,
// CLI::RuntimeError(126) after saying why, prefixed with `who`).
void start_one_shot_process(const std::string& who);

// "deny landlock file_open /etc/passwd (errno 13) by perl.yaml:3 files.read: ...": one line of a report.
std::string decision_line(const audit::AuditRecord& d);

}  // namespace bulwark
