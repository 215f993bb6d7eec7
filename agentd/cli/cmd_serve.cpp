// `agentd serve`: the daemon. Opens the audit store, starts the API server
// (unix socket, optional loopback HTTP) and runs until SIGTERM/SIGINT.
// `agentd token-hash`: prints the SHA-256 of a token read from stdin, for
// api.tokens_sha256 in the config file.
#include "cli/cmd_serve.h"

#include <CLI/CLI.hpp>
#include <signal.h>
#include <sys/stat.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include <spdlog/spdlog.h>

#include "audit/audit_db.h"
#include "bpf/bpf_runtime.h"
#include "sandbox/cgroup.h"
#include "cli/config.h"
#include "api/dashboard.h"
#include "audit/event_bus.h"
#include "api/http_api.h"
#include "api/http_server.h"
#include "api/http_tasks.h"
#include "cli/host_layers.h"
#include "kaudit/kernel_audit.h"
#include "tasks/reconcile.h"
#include "kaudit/run_registry.h"
#include "tasks/tasks.h"
#include "tasks/tool_catalog.h"
#include "sandbox/tool_coverage.h"
#include "audit/metrics.h"

namespace bulwark {
namespace {

struct ServeArgs {
    std::string config;
    std::string state_dir;
    std::string rules_dir;
    std::string work_root;
    std::string socket;
    std::string http;
    std::string dashboard_assets;
    std::string log_level;
    std::string bpf_pin_root = "/sys/fs/bpf/bulwark";
    std::string bpf_cgroup_parent;
    bool no_bpf = false;
};

bool ensure_dir(const std::filesystem::path& p, mode_t mode) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) return true;
    std::filesystem::create_directories(p, ec);
    if (ec) {
        spdlog::critical("mkdir {}: {}", p.string(), ec.message());
        return false;
    }
    ::chmod(p.c_str(), mode);
    return true;
}

// Every tool's launch planned once at start-up (tool_coverage.h): per tool,
// whether a run would be refused for a rule no layer in force here holds,
// for /v1/health's host.tools and the log.
nlohmann::json plan_catalog(const ToolCatalog& catalog, const std::filesystem::path& work_root,
                            const bpf::BpfRuntime* rt, const std::string& bpf_unavailable) {
    nlohmann::json out = nlohmann::json::object();
    std::error_code ec;
    auto dir = work_root / (".coverage-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir, ec);
    if (ec) {
        spdlog::warn("coverage: {}: {}; per-tool coverage not reported", dir.string(), ec.message());
        return out;
    }
    PlanContext ctx{dir.string(), rt ? rt->layer_states() : std::map<std::string, std::string>{},
                    rt ? std::string() : bpf_unavailable, rt ? rt->cgroup_parent() : std::string()};
    for (const auto& t : catalog.tools()) {
        policy::TaskVars vars{{"workdir", ctx.workdir}, {"home", ctx.workdir}, {"tmp", "/tmp"}, {"task_id", "coverage"}};
        auto b = instantiate_tool(t.bundle, vars, planning_resolver());
        RunReport plan;
        if (b) {
            plan = plan_tool_launch(*b, ctx);
        } else {
            plan.error = b.error();
        }
        out[t.name] = plan_summary_json(plan);
        if (plan_refused(plan)) spdlog::warn("tool {}: a run would be refused here: {}", t.name, plan.error);
        for (const auto& u : plan.unenforced) spdlog::warn("tool {}: runs with a rule no layer holds: {}", t.name, u);
    }
    std::filesystem::remove_all(dir, ec);
    return out;
}

int run_serve(const ServeArgs& a) {
    // Signals are taken by sigwait below: block them before any thread starts.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    ::signal(SIGPIPE, SIG_IGN);

    auto cfg = a.config.empty() ? std::expected<DaemonConfig, std::string>(default_config()) : load_config(a.config);
    if (!cfg) {
        std::cerr << cfg.error() << "\n";
        return 2;
    }
    if (!a.state_dir.empty()) cfg->state_dir = a.state_dir;
    if (!a.rules_dir.empty()) cfg->rules_dir = a.rules_dir;
    if (!a.work_root.empty()) cfg->work_root = a.work_root;
    if (!a.socket.empty()) cfg->api.unix_path = a.socket;
    if (a.http == "off") {
        cfg->api.tcp_host.reset();
        cfg->dashboard.listen.reset();
    } else if (!a.http.empty()) {
        auto l = parse_listen(a.http);
        if (!l) {
            std::cerr << "--http: " << l.error() << "\n";
            return 2;
        }
        cfg->api.tcp_host = l->first;
        cfg->api.tcp_port = l->second;
    }
    if (!a.dashboard_assets.empty()) cfg->dashboard.assets_dir = a.dashboard_assets;
    if (!a.log_level.empty()) cfg->log_level = a.log_level;
    spdlog::set_level(spdlog::level::from_str(cfg->log_level));

    if (!ensure_dir(cfg->state_dir, 0700)) return 1;
    if (cfg->api.unix_path && !ensure_dir(std::filesystem::path(*cfg->api.unix_path).parent_path(), 0755)) return 1;
    if (cfg->audit.path.empty()) cfg->audit.path = cfg->state_dir / "audit.db";

    Metrics metrics;
    audit::EventBus bus(&metrics);
    auto store = audit::AuditStore::open(cfg->audit, &metrics, &bus);
    if (!store) {
        spdlog::critical("audit store: {}", store.error().message);
        return 1;
    }
    if (!(*store)->accepting_runs())
        spdlog::error("audit store refuses new runs: {}", (*store)->status().reason);

    // What a previous agentd that died left: its sandboxes' cgroups (what
    // still runs there is killed), before the BPF runtime starts so that its
    // sweep drops their policy bindings; its open runs, once the store is up.
    ReconcileReport recon = reap_previous_sandboxes(a.no_bpf ? std::string() : a.bpf_cgroup_parent);

    // The BPF layer: programs loaded or re-adopted from the pin root (shared
    // with `agentd run` on this host under its lock), decisions into the store,
    // ring-buffer losses as gap records.
    std::unique_ptr<bpf::BpfRuntime> bpf_rt;
    std::string bpf_unavailable;
    if (a.no_bpf) {
        bpf_unavailable = "BPF layer switched off (--no-bpf)";
    } else {
        bpf::RuntimeOptions ro;
        ro.pin_root = a.bpf_pin_root;
        ro.cgroup_parent = a.bpf_cgroup_parent;
        audit::AuditStore* st = store->get();
        ro.sink = [st](audit::AuditRecord r) { st->enqueue(std::move(r)); };  // a drop becomes a gap record
        ro.on_drops = [st](const std::string& source, uint64_t n) { st->report_source_drops(source, n); };
        auto rt = bpf::BpfRuntime::start(std::move(ro));
        if (!rt) {
            bpf_unavailable = "BPF runtime did not start: " + rt.error().message();
            spdlog::error("bpf: {}; tools with network rules are refused", bpf_unavailable);
        } else {
            bpf_rt = std::move(*rt);
            for (const auto& [sec, state] : bpf_rt->status()["programs"].items())
                spdlog::info("bpf: {}: {}", sec, state.get<std::string>());
        }
    }
    auto bpf_status = [&bpf_rt, &bpf_unavailable]() -> nlohmann::json {
        if (bpf_rt) return bpf_rt->status();
        return {{"state", "unavailable: " + bpf_unavailable}};
    };
    (*store)->enqueue(audit::host_status_record({{"event", "bpf_layer"}, {"bpf", bpf_status()}}));

    if (bpf_rt) {
        auto c = bpf_rt->counters();
        recon.bpf_bindings = c.reaped_bindings;
        recon.bpf_slots = c.reaped_slots;
    }
    close_abandoned_runs(**store, recon);
    if (recon.found_anything()) spdlog::warn("reconciled: {}", recon.summary());
    else spdlog::info("reconciled: {}", recon.summary());
    (*store)->enqueue(audit::host_status_record({{"event", "reconciled"}, {"reconciliation", recon.to_json()}}));
    auto reconciliation = std::make_shared<const nlohmann::json>(recon.to_json());

    // Every rule file must compile, or the daemon does not start.
    auto catalog = ToolCatalog::load(cfg->rules_dir);
    if (!catalog) {
        spdlog::critical("rules {}: {}", cfg->rules_dir.string(), catalog.error());
        return 1;
    }
    spdlog::info("serving {} tools from {}", catalog->tools().size(), catalog->rules_dir().string());
    // Kernel audit source: Landlock and seccomp denials of the runs, from
    // the kernel's audit records, into the store (docs/kernel-audit.md).
    RunRegistry runs;
    std::unique_ptr<KernelAuditReader> kaudit;
    std::string kaudit_error;
    {
        KernelAuditOptions ko;
        ko.resolve = [&runs](const kaudit::KernelDenial& d) { return runs.resolve(d); };
        ko.sink = [s = store->get()](audit::AuditRecord r) { s->enqueue(std::move(r)); };
        ko.on_lost = [s = store->get()](std::string source, uint64_t n) { s->report_source_drops(std::move(source), n); };
        if (auto r = KernelAuditReader::start(std::move(ko))) {
            kaudit = std::move(*r);
            spdlog::info("kernel audit source: audit {}", kaudit->status().value("audit", ""));
        } else {
            kaudit_error = r.error();
            spdlog::error("kernel audit source unavailable: {}; Landlock and seccomp denials are not recorded",
                          kaudit_error);
        }
    }
    // Run cgroups that could not be removed when their run ended, retried
    // until they go.
    LeftCgroups left_cgroups;
    TaskOptions topts;
    topts.work_root = cfg->work_root;
    topts.metrics = &metrics;
    topts.left_cgroups = &left_cgroups;
    // Every run is bound to the BPF runtime and the kernel audit reader
    // (tasks/run_binding.h); grant updates rebind running tools.
    topts.sources.bpf = bpf_rt.get();
    topts.sources.bpf_unavailable = bpf_unavailable;
    topts.sources.kaudit = kaudit.get();
    topts.sources.registry = &runs;
    if (!ensure_dir(topts.work_root, 0711)) return 1;
    TaskManager tasks(*catalog, store->get(), topts);

    // The dashboard: with no api.http configured it gets a loopback listener
    // of its own (a soft default: skipped when the port is taken), and the
    // browser a fresh token in <state_dir>/dashboard.token.
    bool default_listener = false;
    if (!cfg->api.tcp_host && cfg->dashboard.enabled && cfg->dashboard.listen) {
        cfg->api.tcp_host = cfg->dashboard.listen->first;
        cfg->api.tcp_port = cfg->dashboard.listen->second;
        default_listener = true;
    }
    std::string dashboard_token;
    if (cfg->api.tcp_host && cfg->dashboard.enabled) {
        auto t = dashboard::create_token(cfg->state_dir);
        if (!t) {
            spdlog::critical("dashboard token: {}", t.error());
            return 1;
        }
        dashboard_token = std::move(*t);
        cfg->api.token_sha256.push_back(sha256(dashboard_token));
    }
    std::shared_ptr<const dashboard::Assets> assets;
    if (cfg->dashboard.enabled) {
        auto dir = cfg->dashboard.assets_dir.empty() ? dashboard::default_assets_dir() : cfg->dashboard.assets_dir;
        auto loaded = dashboard::Assets::load(dir);
        if (loaded)
            assets = std::make_shared<const dashboard::Assets>(std::move(*loaded));
        else
            spdlog::warn("dashboard assets: {}; the page is not served", loaded.error());
    }

    http::Router router;
    http::ApiContext ctx;
    ctx.store = store->get();
    ctx.bus = &bus;
    ctx.metrics = &metrics;
    ctx.openapi_json = std::string(http::openapi_document());
    // The layers are probed once (canaries); the BPF layers follow the
    // runtime's live status, the kernel audit reader's state is live too.
    auto host_status = std::make_shared<const nlohmann::json>(probe_host_layers(nullptr));
    auto tools_coverage = std::make_shared<const nlohmann::json>(plan_catalog(*catalog, topts.work_root, bpf_rt.get(),
                                                                              bpf_unavailable));
    auto host_now = [host_status, tools_coverage, reconciliation, &kaudit, &kaudit_error, bpf_status,
                     &left_cgroups] {
        nlohmann::json j = *host_status;
        j["cgroups_left"] = nlohmann::json::array();
        for (const auto& e : left_cgroups.list())
            j["cgroups_left"].push_back({{"path", e.path}, {"error", e.error}, {"run_id", e.run_id},
                                         {"since_ns", e.since_ns}, {"attempts", e.attempts}});
        j["tools"] = *tools_coverage;
        j["reconciliation"] = *reconciliation;
        nlohmann::json bpf = bpf_status();
        nlohmann::json bpf_layers = bpf_layers_from_status(bpf);
        for (auto& [name, l] : bpf_layers.items()) j["layers"][name] = l;
        j["bpf"] = std::move(bpf);
        j["kernel_audit"] = kaudit ? kaudit->status() : nlohmann::json{{"state", "unavailable: " + kaudit_error}};
        return j;
    };
    (*store)->enqueue(audit::host_status_record({{"event", "host_layers"}, {"host", host_now()}}));
    ctx.host_status = host_now;
    http::register_v1_routes(router, ctx);
    http::register_task_routes(router, {.catalog = &*catalog, .tasks = &tasks, .store = store->get()});
    if (cfg->dashboard.enabled) dashboard::register_routes(router, assets);

    // The start is on record (committed) before the first request is served.
    if (auto seq = (*store)->enqueue(audit::host_status_record(
            {{"event", "daemon_start"}, {"pid", getpid()}, {"audit_state", (*store)->status().to_json()},
             {"kernel_audit", kaudit ? kaudit->status() : nlohmann::json{{"state", "unavailable: " + kaudit_error}}}})))
        (*store)->wait_committed(*seq, std::chrono::seconds(5));
    // Start-up parsed the rule files, the BPF objects and the kernel's BTF;
    // what it freed goes back to the system instead of idling in the heap.
    ::malloc_trim(0);
    auto server = http::HttpServer::start(cfg->api, router, &metrics);
    if (!server && default_listener) {
        spdlog::warn("dashboard listener {}:{}: {}; serving without it (set dashboard.listen or --http)",
                     *cfg->api.tcp_host, cfg->api.tcp_port, server.error());
        cfg->api.tcp_host.reset();
        dashboard_token.clear();
        server = http::HttpServer::start(cfg->api, router, &metrics);
    }
    if (!server) {
        spdlog::critical("API server: {}", server.error());
        return 1;
    }
    if (!dashboard_token.empty()) {
        std::string host = *cfg->api.tcp_host == "::1" ? "[::1]" : *cfg->api.tcp_host;
        // The token opens the API. Under systemd (JOURNAL_STREAM: stdout
        // goes to the journal, which more users read) only the file is named;
        // the token is in <state_dir>/dashboard.token (0600) either way.
        auto tf = (cfg->state_dir / "dashboard.token").string();
        if (std::getenv("JOURNAL_STREAM"))
            std::cout << "dashboard: http://" << host << ":" << (*server)->tcp_port() << "/#token=$(cat " << tf
                      << ")" << std::endl;
        else
            std::cout << "dashboard: http://" << host << ":" << (*server)->tcp_port() << "/#token=" << dashboard_token
                      << std::endl;
        spdlog::info("dashboard on http://{}:{}/ (token in {})", host, (*server)->tcp_port(),
                     (cfg->state_dir / "dashboard.token").string());
    }
    spdlog::info("agentd serving: socket {}{}; audit store {}", cfg->api.unix_path.value_or("(none)"),
                 cfg->api.tcp_host ? ", http " + *cfg->api.tcp_host + ":" + std::to_string((*server)->tcp_port()) : "",
                 cfg->audit.path.string());

    int sig = 0;
    while (sigwait(&set, &sig) == 0 && sig == SIGHUP) spdlog::info("SIGHUP: nothing to reload yet");
    spdlog::info("signal {}: shutting down", sig);
    if (size_t n = tasks.cancel_all()) spdlog::info("cancelled {} running tool run(s)", n);
    server->reset();
    (*store)->enqueue(audit::host_status_record({{"event", "daemon_stop"}, {"signal", sig}}));
    (*store)->flush(std::chrono::seconds(10));
    return 0;
}

}  // namespace

void register_serve(CLI::App& app) {
    auto args = std::make_shared<ServeArgs>();
    auto* serve = app.add_subcommand("serve", "run the daemon: audit store and API server");
    serve->add_option("--config", args->config, "YAML configuration file")->check(CLI::ExistingFile);
    serve->add_option("--state-dir", args->state_dir, "state directory (default /var/lib/bulwark)");
    serve->add_option("--rules", args->rules_dir, "directory of rule files served as tools (default: the shipped rules)");
    serve->add_option("--work-root", args->work_root, "default task work directories (default /var/lib/bulwark-tasks)");
    serve->add_option("--socket", args->socket, "unix socket path (default /run/bulwark/agentd.sock)");
    serve->add_option("--http", args->http,
                      "HTTP listener, loopback only (default 127.0.0.1:7878 for the dashboard); off: none");
    serve->add_option("--dashboard-assets", args->dashboard_assets, "directory of the built dashboard page");
    serve->add_option("--log-level", args->log_level, "trace, debug, info, warn, error");
    serve->add_option("--bpf-pin-root", args->bpf_pin_root, "bpffs directory of the shared BPF programs and maps");
    serve->add_option("--bpf-cgroup-parent", args->bpf_cgroup_parent,
                      "cgroup v2 directory the BPF cgroup programs are attached to (default: <own cgroup>/bulwark)");
    serve->add_flag("--no-bpf", args->no_bpf, "serve without the BPF layer (tools with network rules are refused)");
    serve->callback([args] { throw CLI::RuntimeError(run_serve(*args)); });

    auto* th = app.add_subcommand("token-hash", "print the SHA-256 of a token read from stdin (for api.tokens_sha256)");
    th->callback([] {
        std::string token;
        std::getline(std::cin, token);
        if (token.size() < 16) {
            std::cerr << "token-hash: use a token of at least 16 characters\n";
            throw CLI::RuntimeError(2);
        }
        std::cout << to_hex(sha256(token)) << "\n";
        throw CLI::RuntimeError(0);
    });
}

}  // namespace bulwark
