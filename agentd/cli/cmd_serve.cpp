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
#include <memory>
#include <optional>

#include <spdlog/spdlog.h>

#include "audit/audit_db.h"
#include "bpf/bpf_runtime.h"
#include "cli/bpf_options.h"
#include "sandbox/cgroup.h"
#include "sandbox/self_privilege.h"
#include "cli/config.h"
#include "api/dashboard.h"
#include "audit/event_bus.h"
#include "api/http_api.h"
#include "api/http_server.h"
#include "api/http_profiles.h"
#include "api/http_tasks.h"
#include "cli/host_layers.h"
#include "kaudit/kernel_audit.h"
#include "profiles/profile_book.h"
#include "tasks/containers.h"
#include "tasks/reconcile.h"
#include "kaudit/run_registry.h"
#include "tasks/tasks.h"
#include "vm/microvm_run.h"
#include "tasks/tool_catalog.h"
#include "sandbox/tool_coverage.h"
#include "audit/metrics.h"
#include "telemetry/otlp_exporter.h"

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
    std::string otlp_endpoint;
    std::string otlp_encoding;
    std::string self_seccomp;
    BpfCliOptions bpf;
};

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
                    rt ? std::string() : bpf_unavailable, rt ? rt->cgroup_parent() : std::string(),
                    /*profile_scoring=*/true};
    for (const auto& t : catalog.tools()) {
        policy::TaskVars vars = policy::task_vars(ctx.workdir, "coverage");
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

// Why the daemon did not start: the exit status (2: the command line or the
// configuration, printed to stderr; 1: the host, logged), and what failed.
struct StartError {
    int status = 1;
    std::string message;
};
using Started = std::expected<void, StartError>;

std::unexpected<StartError> usage_error(std::string m) { return std::unexpected(StartError{2, std::move(m)}); }
std::unexpected<StartError> host_error(std::string m) { return std::unexpected(StartError{1, std::move(m)}); }

Started ensure_dir(const std::filesystem::path& p, mode_t mode) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) return {};
    std::filesystem::create_directories(p, ec);
    if (ec) return host_error("mkdir " + p.string() + ": " + ec.message());
    ::chmod(p.c_str(), mode);
    return {};
}

// The daemon, start-up step by step (run_serve orders them); members are
// declared in start-up order, so they are torn down in reverse.
class Daemon {
public:
    Daemon(const ServeArgs& a, CapabilityDrop privilege) : a_(a), privilege_(std::move(privilege)) {}

    Started take_signals();
    Started read_config();
    Started confine_self();
    Started open_store();
    Started start_telemetry();
    Started reap_previous();
    Started start_bpf();
    Started readopt_containers();
    Started reconcile();
    Started load_rules();
    Started check_own_filter();
    Started start_kernel_audit();
    Started start_tasks();
    Started prepare_dashboard();
    Started register_routes();
    Started record_start();
    Started start_server();
    // Until SIGTERM/SIGINT; then running runs are cancelled, the server
    // stops and the store is flushed. Returns the exit status.
    int serve_until_signal();

private:
    nlohmann::json bpf_status() const;
    nlohmann::json kaudit_status() const;
    nlohmann::json host_now() const;

    const ServeArgs& a_;
    CapabilityDrop privilege_;
    std::optional<SelfFilter> self_filter_;
    sigset_t signals_{};
    DaemonConfig cfg_;
    Metrics metrics_;
    audit::EventBus bus_{&metrics_};
    std::unique_ptr<audit::AuditStore> store_;
    std::unique_ptr<telemetry::OtlpExporter> otlp_;  // stopped before the store closes
    ReconcileReport recon_;
    std::optional<ToolCatalog> catalog_;
    std::unique_ptr<bpf::BpfRuntime> bpf_rt_;
    std::string bpf_unavailable_;
    std::shared_ptr<const nlohmann::json> reconciliation_;
    RunRegistry runs_;
    std::optional<ContainerManager> containers_;
    std::set<uint64_t> containers_kept_;  // run ids of re-adopted containers: reconcile leaves them open
    std::unique_ptr<KernelAuditReader> kaudit_;
    std::string kaudit_error_;
    LeftCgroups left_cgroups_;  // run cgroups not removed at their run's end, retried until they go
    vm::MicroVmHost microvm_;   // what this host offers the microVM tier
    std::optional<profiles::ProfileBook> profiles_;
    TaskOptions topts_;
    std::optional<TaskManager> tasks_;
    bool default_listener_ = false;
    std::string dashboard_token_;
    std::shared_ptr<const dashboard::Assets> assets_;
    http::Router router_;
    http::ApiContext ctx_;
    std::shared_ptr<const nlohmann::json> host_layers_, tools_coverage_;
    std::unique_ptr<http::HttpServer> server_;
};

// agentd's own seccomp filter (--self-seccomp: the bundle `policyc compile`
// made of deploy/systemd/agentd-self.yaml), in force from here on, before the
// first thread starts and before any input but the command line and the
// configuration file is read: kernel audit records, ring-buffer events and
// API requests all reach a process under it, and so does every sandbox it
// creates (a tool's own filter stacks on top).
//
// Installed by agentd rather than written as a systemd SystemCallFilter=
// drop-in: the filter is the compiler's own program, checked like every
// tool's (the classic-BPF interpreter runs it for every syscall number and
// architecture), not a second compilation by systemd from syscall names with
// its own group semantics; it holds wherever agentd runs (systemd, the
// Kubernetes DaemonSet, a shell), and it can be tested on a host whose PID 1
// is not systemd.
Started Daemon::confine_self() {
    if (a_.self_seccomp.empty()) return {};
    auto f = load_self_filter(a_.self_seccomp);
    if (!f) return usage_error("--self-seccomp: " + f.error());
    if (auto r = install_self_filter(*f); !r) return host_error("own seccomp filter: " + r.error());
    spdlog::info("own seccomp filter: {} ({}, {} instructions)", f->path, f->hash, f->program.size());
    self_filter_ = std::move(*f);
    return {};
}

// Signals are taken by sigwait: blocked before any thread starts.
Started Daemon::take_signals() {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGINT);
    sigaddset(&signals_, SIGTERM);
    sigaddset(&signals_, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
    return {};
}

// The configuration file (or the defaults), then the command line over it.
Started Daemon::read_config() {
    auto cfg = a_.config.empty() ? std::expected<DaemonConfig, std::string>(default_config()) : load_config(a_.config);
    if (!cfg) return usage_error(cfg.error());
    cfg_ = std::move(*cfg);
    if (!a_.state_dir.empty()) cfg_.state_dir = a_.state_dir;
    if (!a_.rules_dir.empty()) cfg_.rules_dir = a_.rules_dir;
    if (!a_.work_root.empty()) cfg_.work_root = a_.work_root;
    if (!a_.socket.empty()) cfg_.api.unix_path = a_.socket;
    if (a_.http == "off") {
        cfg_.api.tcp_host.reset();
        cfg_.dashboard.listen.reset();
    } else if (!a_.http.empty()) {
        auto l = parse_listen(a_.http);
        if (!l) return usage_error("--http: " + l.error());
        cfg_.api.tcp_host = l->first;
        cfg_.api.tcp_port = l->second;
    }
    if (!a_.dashboard_assets.empty()) cfg_.dashboard.assets_dir = a_.dashboard_assets;
    if (!a_.log_level.empty()) cfg_.log_level = a_.log_level;
    if (a_.otlp_endpoint == "off") {
        cfg_.otlp.endpoint = {};
    } else if (!a_.otlp_endpoint.empty()) {
        auto ep = telemetry::parse_endpoint(a_.otlp_endpoint);
        if (!ep) return usage_error("--otlp-endpoint: " + ep.error());
        cfg_.otlp.endpoint = std::move(*ep);
    }
    if (!a_.otlp_encoding.empty()) {
        auto e = telemetry::parse_encoding(a_.otlp_encoding);
        if (!e) return usage_error("--otlp-encoding: must be protobuf or json, not '" + a_.otlp_encoding + "'");
        cfg_.otlp.encoding = *e;
    }
    spdlog::set_level(spdlog::level::from_str(cfg_.log_level));
    return {};
}

Started Daemon::open_store() {
    if (auto r = ensure_dir(cfg_.state_dir, 0700); !r) return r;
    if (cfg_.api.unix_path)
        if (auto r = ensure_dir(std::filesystem::path(*cfg_.api.unix_path).parent_path(), 0755); !r) return r;
    if (cfg_.audit.path.empty()) cfg_.audit.path = cfg_.state_dir / "audit.db";
    auto store = audit::AuditStore::open(cfg_.audit, &metrics_, &bus_);
    if (!store) return host_error("audit store: " + store.error().message);
    store_ = std::move(*store);
    if (!store_->accepting_runs()) spdlog::error("audit store refuses new runs: {}", store_->status().reason);
    return {};
}

// Fleet telemetry: every record committed from here on exported to the
// OTLP endpoint, when one is configured (telemetry/otlp_exporter.h).
Started Daemon::start_telemetry() {
    if (cfg_.otlp.endpoint.url.empty()) return {};
    otlp_ = std::make_unique<telemetry::OtlpExporter>(cfg_.otlp, bus_, store_.get(), &metrics_);
    spdlog::info("otlp: exporting audit records to {} ({})", cfg_.otlp.endpoint.url,
                 telemetry::encoding_name(cfg_.otlp.encoding));
    return {};
}

// What a previous agentd that died left: its sandboxes' cgroups (what still
// runs there is killed), before the BPF runtime starts so that its sweep
// drops their policy bindings; its open runs once the store is up
// (reconcile).
Started Daemon::reap_previous() {
    recon_ = reap_previous_sandboxes(a_.bpf.no_bpf ? std::string() : a_.bpf.cgroup_parent);
    return {};
}

// The BPF layer: programs loaded or re-adopted from the pin root (shared
// with `agentd run` on this host under its lock), decisions into the store,
// ring-buffer losses as gap records. Without it the daemon serves, and
// tools with rules only it holds are refused.
Started Daemon::start_bpf() {
    bpf::RuntimeOptions ro;
    audit::AuditStore* st = store_.get();
    ro.sink = [st](audit::AuditRecord r) { st->enqueue(std::move(r)); };  // a drop becomes a gap record
    ro.on_drops = [st](const std::string& source, uint64_t n) { st->report_source_drops(source, n); };
    // The system call counter puts every task of the host on the syscall
    // tracepoint's path: attached only when a tool's profile counts.
    for (const auto& t : catalog_->tools()) ro.trace_syscalls |= t.bundle.profile.enabled;
    auto started = start_bpf_runtime(a_.bpf, std::move(ro));
    bpf_rt_ = std::move(started.runtime);
    bpf_unavailable_ = std::move(started.unavailable);
    if (bpf_rt_) {
        // The status held by name: a range-for over a member of a temporary
        // would outlive it (C++23's lifetime extension is not in GCC 12).
        const auto status = bpf_rt_->status();
        for (const auto& [sec, state] : status["programs"].items())
            spdlog::info("bpf: {}: {}", sec, state.get<std::string>());
    } else if (!a_.bpf.no_bpf) {
        spdlog::error("bpf: {}; tools with network rules are refused", bpf_unavailable_);
    }
    store_->enqueue(audit::host_status_record({{"event", "bpf_layer"}, {"bpf", bpf_status()}}));
    return {};
}

nlohmann::json Daemon::bpf_status() const {
    if (bpf_rt_) return bpf_rt_->status();
    return {{"state", "unavailable: " + bpf_unavailable_}};
}

// Containers the OCI runtime had bound (their cgroups kept their bindings in
// the pinned maps while no agentd ran): adopted again, or closed when gone.
Started Daemon::readopt_containers() {
    ContainerOptions co;
    co.bpf = bpf_rt_.get();
    co.bpf_unavailable = bpf_unavailable_;
    co.registry = &runs_;
    co.store = store_.get();
    co.state_dir = cfg_.state_dir;
    co.next_run_id = [this] { return tasks_->reserve_run_id(); };
    containers_.emplace(std::move(co));
    containers_kept_ = containers_->readopt();
    return {};
}

Started Daemon::reconcile() {
    if (bpf_rt_) {
        auto c = bpf_rt_->counters();
        recon_.bpf_bindings = c.reaped_bindings;
        recon_.bpf_slots = c.reaped_slots;
    }
    close_abandoned_runs(*store_, recon_, containers_kept_);
    if (recon_.found_anything())
        spdlog::warn("reconciled: {}", recon_.summary());
    else
        spdlog::info("reconciled: {}", recon_.summary());
    store_->enqueue(audit::host_status_record({{"event", "reconciled"}, {"reconciliation", recon_.to_json()}}));
    reconciliation_ = std::make_shared<const nlohmann::json>(recon_.to_json());
    return {};
}

// Every rule file must compile, or the daemon does not start.
Started Daemon::load_rules() {
    auto catalog = ToolCatalog::load(cfg_.rules_dir);
    if (!catalog) return host_error("rules " + cfg_.rules_dir.string() + ": " + catalog.error());
    catalog_.emplace(std::move(*catalog));
    spdlog::info("serving {} tools from {}", catalog_->tools().size(), catalog_->rules_dir().string());
    return {};
}

// A seccomp filter is inherited: a tool whose rules allow a syscall agentd's
// own filter refuses gets that filter's errno (131) for it. Said at start,
// per tool, with the rule that allows each, so the rule's author sees why
// the call fails (the stricter answer is the safe one: not a refusal to start).
Started Daemon::check_own_filter() {
    if (!self_filter_) return {};
    for (const auto& t : catalog_->tools())
        if (auto said = own_filter_warning(*self_filter_, t.name, t.bundle); !said.empty()) spdlog::warn("{}", said);
    return {};
}

// Kernel audit source: Landlock and seccomp denials of the runs, from the
// kernel's audit records, into the store (docs/kernel-audit.md).
Started Daemon::start_kernel_audit() {
    KernelAuditOptions ko;
    ko.resolve = [this](const kaudit::KernelDenial& d) { return runs_.resolve(d); };
    ko.sink = [s = store_.get()](audit::AuditRecord r) { s->enqueue(std::move(r)); };
    ko.on_lost = [s = store_.get()](std::string source, uint64_t n) { s->report_source_drops(std::move(source), n); };
    if (auto r = KernelAuditReader::start(std::move(ko))) {
        kaudit_ = std::move(*r);
        spdlog::info("kernel audit source: audit {}", kaudit_->status().value("audit", ""));
    } else {
        kaudit_error_ = r.error();
        spdlog::error("kernel audit source unavailable: {}; Landlock and seccomp denials are not recorded",
                      kaudit_error_);
    }
    return {};
}

nlohmann::json Daemon::kaudit_status() const {
    return kaudit_ ? kaudit_->status() : nlohmann::json{{"state", "unavailable: " + kaudit_error_}};
}

// The task manager. Every run is bound to the BPF runtime and the kernel
// audit reader (tasks/run_binding.h); grant updates rebind running tools.
Started Daemon::start_tasks() {
    topts_.work_root = cfg_.work_root;
    topts_.metrics = &metrics_;
    topts_.left_cgroups = &left_cgroups_;
    topts_.sources.bpf = bpf_rt_.get();
    topts_.sources.bpf_unavailable = bpf_unavailable_;
    topts_.sources.kaudit = kaudit_.get();
    topts_.sources.registry = &runs_;
    microvm_ = vm::probe_microvm_host({cfg_.rules_dir.string()}, vm::guest_image_dirs());
    if (microvm_.unavailable.empty())
        spdlog::info("microVM tier: {} ({}), guest image {}", microvm_.vmm->binary, microvm_.vmm->accel,
                     microvm_.image->digest);
    else
        spdlog::info("microVM tier unavailable: {}", microvm_.unavailable);
    topts_.microvm = &microvm_;
    // The tools whose rules keep a profile, each rebuilt from the store.
    std::map<std::string, policy::ProfilePlan> profiled;
    for (const auto& t : catalog_->tools())
        if (t.bundle.profile.enabled) profiled[t.name] = t.bundle.profile;
    profiles_.emplace(store_.get());
    for (const auto& e : profiles_->load(profiled))
        spdlog::error("profile of {}; it starts empty and learns again", e);
    if (!profiled.empty()) spdlog::info("profiles: {} tool(s) learned and scored", profiled.size());
    topts_.profiles = &*profiles_;
    if (auto r = ensure_dir(topts_.work_root, 0711); !r) return r;
    tasks_.emplace(*catalog_, store_.get(), topts_);
    return {};
}

// The dashboard: with no api.http configured it gets a loopback listener of
// its own (a soft default: skipped when the port is taken), and the browser
// a fresh token in <state_dir>/dashboard.token.
Started Daemon::prepare_dashboard() {
    if (!cfg_.api.tcp_host && cfg_.dashboard.enabled && cfg_.dashboard.listen) {
        cfg_.api.tcp_host = cfg_.dashboard.listen->first;
        cfg_.api.tcp_port = cfg_.dashboard.listen->second;
        default_listener_ = true;
    }
    if (cfg_.api.tcp_host && cfg_.dashboard.enabled) {
        auto t = dashboard::create_token(cfg_.state_dir);
        if (!t) return host_error("dashboard token: " + t.error());
        dashboard_token_ = std::move(*t);
        cfg_.api.token_sha256.push_back(sha256(dashboard_token_));
    }
    if (cfg_.dashboard.enabled) {
        auto dir = cfg_.dashboard.assets_dir.empty() ? dashboard::default_assets_dir() : cfg_.dashboard.assets_dir;
        auto loaded = dashboard::Assets::load(dir);
        if (loaded)
            assets_ = std::make_shared<const dashboard::Assets>(std::move(*loaded));
        else
            spdlog::warn("dashboard assets: {}; the page is not served", loaded.error());
    }
    return {};
}

// /v1/health's host document: the layers probed once at start (canaries),
// the BPF layers and the kernel audit reader as they are now, every tool's
// launch as planned at start, the reconciliation, the leftover cgroups.
nlohmann::json Daemon::host_now() const {
    nlohmann::json j = *host_layers_;
    j["cgroups_left"] = nlohmann::json::array();
    for (const auto& e : left_cgroups_.list())
        j["cgroups_left"].push_back({{"path", e.path}, {"error", e.error}, {"run_id", e.run_id},
                                     {"since_ns", e.since_ns}, {"attempts", e.attempts}});
    j["tools"] = *tools_coverage_;
    j["reconciliation"] = *reconciliation_;
    nlohmann::json bpf = bpf_status();
    nlohmann::json bpf_layers = bpf_layers_from_status(bpf);
    for (auto& [name, l] : bpf_layers.items()) j["layers"][name] = l;
    j["bpf"] = std::move(bpf);
    j["kernel_audit"] = kaudit_status();
    j["hardening"]["privilege"] = own_privilege_json(&privilege_, self_filter_ ? &*self_filter_ : nullptr);
    return j;
}

Started Daemon::register_routes() {
    ctx_.store = store_.get();
    ctx_.bus = &bus_;
    ctx_.metrics = &metrics_;
    ctx_.openapi_json = std::string(http::openapi_document());
    host_layers_ = std::make_shared<const nlohmann::json>(probe_host_layers(nullptr));
    tools_coverage_ = std::make_shared<const nlohmann::json>(
        plan_catalog(*catalog_, topts_.work_root, bpf_rt_.get(), bpf_unavailable_));
    store_->enqueue(audit::host_status_record({{"event", "host_layers"}, {"host", host_now()}}));
    ctx_.host_status = [this] { return host_now(); };
    ctx_.telemetry_status = [this] {
        return nlohmann::json{{"otlp", otlp_ ? otlp_->status() : nlohmann::json{{"state", "off"}}}};
    };
    http::register_v1_routes(router_, ctx_);
    http::register_task_routes(router_, {.catalog = &*catalog_, .tasks = &*tasks_, .store = store_.get(),
                                         .containers = &*containers_});
    http::register_profile_routes(router_, &*profiles_, &*catalog_);
    if (cfg_.dashboard.enabled) dashboard::register_routes(router_, assets_);
    return {};
}

// The start is on record (committed) before the first request is served.
// Start-up parsed the rule files, the BPF objects and the kernel's BTF; what
// it freed goes back to the system instead of idling in the heap.
Started Daemon::record_start() {
    if (auto seq = store_->enqueue(audit::host_status_record({{"event", "daemon_start"},
                                                               {"pid", getpid()},
                                                               {"audit_state", store_->status().to_json()},
                                                               {"kernel_audit", kaudit_status()},
                                                               {"privilege", own_privilege_json(&privilege_, self_filter_ ? &*self_filter_ : nullptr)}})))
        store_->wait_committed(*seq, std::chrono::seconds(5));
    ::malloc_trim(0);
    return {};
}

Started Daemon::start_server() {
    auto server = http::HttpServer::start(cfg_.api, router_, &metrics_);
    if (!server && default_listener_) {
        spdlog::warn("dashboard listener {}:{}: {}; serving without it (set dashboard.listen or --http)",
                     *cfg_.api.tcp_host, cfg_.api.tcp_port, server.error());
        cfg_.api.tcp_host.reset();
        dashboard_token_.clear();
        server = http::HttpServer::start(cfg_.api, router_, &metrics_);
    }
    if (!server) return host_error("API server: " + server.error());
    server_ = std::move(*server);
    if (!dashboard_token_.empty()) {
        std::string host = *cfg_.api.tcp_host == "::1" ? "[::1]" : *cfg_.api.tcp_host;
        // The token opens the API. Under systemd (JOURNAL_STREAM: stdout goes
        // to the journal, which more users read) only the file is named; the
        // token is in <state_dir>/dashboard.token (0600) either way.
        auto tf = (cfg_.state_dir / "dashboard.token").string();
        if (std::getenv("JOURNAL_STREAM"))
            std::cout << "dashboard: http://" << host << ":" << server_->tcp_port() << "/#token=$(cat " << tf << ")"
                      << std::endl;
        else
            std::cout << "dashboard: http://" << host << ":" << server_->tcp_port() << "/#token=" << dashboard_token_
                      << std::endl;
        spdlog::info("dashboard on http://{}:{}/ (token in {})", host, server_->tcp_port(), tf);
    }
    spdlog::info("agentd serving: socket {}{}; audit store {}", cfg_.api.unix_path.value_or("(none)"),
                 cfg_.api.tcp_host ? ", http " + *cfg_.api.tcp_host + ":" + std::to_string(server_->tcp_port()) : "",
                 cfg_.audit.path.string());
    return {};
}

int Daemon::serve_until_signal() {
    int sig = 0;
    while (sigwait(&signals_, &sig) == 0 && sig == SIGHUP) spdlog::info("SIGHUP: nothing to reload yet");
    spdlog::info("signal {}: shutting down", sig);
    if (size_t n = tasks_->cancel_all()) spdlog::info("cancelled {} running tool run(s)", n);
    server_.reset();
    store_->enqueue(audit::host_status_record({{"event", "daemon_stop"}, {"signal", sig}}));
    store_->flush(std::chrono::seconds(10));
    if (otlp_) {
        otlp_->stop();  // what the store committed is exported, until otlp.shutdown_timeout_ms
        spdlog::info("otlp: stopped: {}", otlp_->status().dump());
    }
    return 0;
}

int run_serve(const ServeArgs& a) {
    static constexpr Started (Daemon::*kStartUp[])() = {
        &Daemon::take_signals,        // before any thread starts
        &Daemon::read_config,         //
        &Daemon::confine_self,        // agentd's own seccomp filter (--self-seccomp)
        &Daemon::open_store,          // the audit store
        &Daemon::start_telemetry,     // the OTLP exporter (when configured)
        &Daemon::reap_previous,       // a dead agentd's sandboxes
        &Daemon::load_rules,          // every rule file compiles, or no start
        &Daemon::start_bpf,           // the BPF layer (or why not), its monitor as the rules need it
        &Daemon::readopt_containers,  // containers bound by a previous agentd
        &Daemon::reconcile,           // a dead agentd's open runs closed
        &Daemon::check_own_filter,    // tools' syscalls agentd's own filter refuses (said)
        &Daemon::start_kernel_audit,  // Landlock and seccomp denials (or why not)
        &Daemon::start_tasks,         //
        &Daemon::prepare_dashboard,   //
        &Daemon::register_routes,     // with /v1/health's host document
        &Daemon::record_start,        // committed before the first request
        &Daemon::start_server,        //
    };
    // agentd keeps the capabilities of sandbox/self_privilege.cpp's table and
    // no other, from here on: first, while this is the only thread
    // (capability sets are per thread; every thread started later inherits
    // these), before the Daemon exists (its members start threads).
    auto privilege = drop_own_capabilities();
    if (!privilege) {
        spdlog::critical("dropping capabilities: {}", privilege.error());
        return 1;
    }
    Daemon daemon(a, std::move(*privilege));
    for (auto step : kStartUp)
        if (auto r = (daemon.*step)(); !r) {
            if (r.error().status == 2)
                std::cerr << r.error().message << "\n";
            else
                spdlog::critical("{}", r.error().message);
            return r.error().status;
        }
    return daemon.serve_until_signal();
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
    serve->add_option("--otlp-endpoint", args->otlp_endpoint,
                      "export every audit record as an OTLP log record to this OTLP/HTTP endpoint "
                      "(http://host:4318/v1/logs); off: none");
    serve->add_option("--otlp-encoding", args->otlp_encoding, "protobuf (default) or json");
    serve->add_option("--self-seccomp", args->self_seccomp,
                      "agentd's own seccomp filter: a bundle compiled by `policyc compile` "
                      "(deploy/systemd/agentd-self.yaml), installed before the daemon reads any input")
        ->check(CLI::ExistingFile);
    args->bpf.add_to(*serve, "serve without the BPF layer (tools with network rules are refused)");
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
