#include "tasks/containers.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "audit/audit_record.h"
#include "bulwark/policy/compiler.h"
#include "bulwark/policy/instantiate.h"
#include "common/clock.h"
#include "common/procfs.h"

namespace bulwark {

using nlohmann::json;

namespace {

TaskErrc errc_of(const bpf::BindError& e) {
    using Code = bpf::BindError::Code;
    switch (e.code) {
        case Code::CgroupOutside: return TaskErrc::BadRequest;
        case Code::NetProgramsDown: return TaskErrc::RuleUnenforced;
        default: return TaskErrc::BpfUnavailable;
    }
}

bool is_dir(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

ContainerManager::~ContainerManager() {
    std::lock_guard lk(mu_);
    for (auto& [id, c] : containers_)
        if (c->attachment) c->attachment->keep_bound();
}

bool ContainerManager::valid_id(const std::string& id) {
    if (id.empty() || id.size() > 1024 || id == "." || id == "..") return false;
    for (char c : id)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '+' || c == '.' || c == '-'))
            return false;
    return true;
}

std::filesystem::path ContainerManager::file_of(const std::string& id) const {
    return opts_.state_dir / "containers" / (id + ".json");
}

json ContainerManager::Container::summary() const {
    return {{"id", id},         {"made_cgroup", made_cgroup},         {"run_id", run_id},       {"tool", tool},     {"cgroup", cgroup},
            {"cgroup_id", cgroup_id}, {"started_ns", started_ns}, {"identity", identity}, {"bpf", bpf},
            {"policy", bundle ? bundle->hash : ""}, {"report", report}};
}

RunContext ContainerManager::context_of(const Container& c) const {
    RunContext ctx;
    ctx.task_id = 0;
    ctx.run_id = c.run_id;
    ctx.tool = c.tool;
    ctx.policy_version = 1;
    ctx.bundle = c.bundle;
    json who = c.identity;
    who["id"] = c.id;
    ctx.container = std::make_shared<const json>(std::move(who));
    return ctx;
}

std::expected<void, TaskError> ContainerManager::save(const Container& c, const json& bundle_json) const {
    std::error_code ec;
    std::filesystem::create_directories(file_of(c.id).parent_path(), ec);
    if (ec) return task_error(TaskErrc::Internal, "mkdir " + file_of(c.id).parent_path().string() + ": " + ec.message());
    json doc = c.summary();
    doc["bundle"] = bundle_json;
    const auto tmp = file_of(c.id).string() + ".tmp";
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << doc.dump();
        out.flush();
        if (!out) return task_error(TaskErrc::Internal, "write " + tmp + " failed");
    }
    std::filesystem::rename(tmp, file_of(c.id), ec);
    if (ec) return task_error(TaskErrc::Internal, "rename " + tmp + ": " + ec.message());
    return {};
}

std::expected<json, TaskError> ContainerManager::bind(ContainerRequest req) {
    if (!valid_id(req.id)) return task_error(TaskErrc::BadRequest, "id: not a container id: '" + req.id + "'");
    if (!opts_.bpf)
        return task_error(TaskErrc::BpfUnavailable, "the BPF layer is not running here: " + opts_.bpf_unavailable);
    if (!req.cgroup.empty() && (!req.cgroup.starts_with("/") || !is_dir(req.cgroup)))
        return task_error(TaskErrc::BadRequest, "cgroup: not a cgroup v2 directory: '" + req.cgroup + "'");
    if (opts_.store && !opts_.store->accepting_runs())
        return task_error(TaskErrc::StoreRefusing, "the audit store refuses new runs: " + opts_.store->status().reason);
    {
        std::lock_guard lk(mu_);
        if (containers_.contains(req.id) || pending_.contains(req.id))
            return task_error(TaskErrc::ContainerExists, "container " + req.id + " is already bound");
        pending_.insert(req.id);
    }
    struct Unpend {
        ContainerManager* m;
        std::string id;
        ~Unpend() {
            std::lock_guard lk(m->mu_);
            m->pending_.erase(id);
        }
    } unpend{this, req.id};

    auto c = std::make_shared<Container>();
    c->id = req.id;
    c->cgroup = req.cgroup;
    if (c->cgroup.empty()) {
        c->cgroup = opts_.bpf->cgroup_parent() + "/oci-" + req.id;
        if (::mkdir(c->cgroup.c_str(), 0755) != 0)
            return task_error(errno == EEXIST ? TaskErrc::ContainerExists : TaskErrc::Internal,
                              "mkdir " + c->cgroup + ": " + std::strerror(errno));
        c->made_cgroup = true;
    }
    struct Unmake {  // a bind that fails leaves no cgroup it made
        Container* c;
        bool armed = true;
        ~Unmake() {
            if (armed && c->made_cgroup) ::rmdir(c->cgroup.c_str());
        }
    } unmake{c.get()};
    c->tool = req.bundle.tool;
    c->identity = req.identity;
    c->report = req.report;
    c->run_id = opts_.next_run_id();
    c->started_ns = unix_now_ns();
    const json bundle_json = policy::bundle_to_json(req.bundle);
    c->bundle = std::make_shared<const policy::Bundle>(std::move(req.bundle));
    const RunContext ctx = context_of(*c);

    auto att = opts_.bpf->attach(*c->bundle, ctx);
    if (!att) return task_error(errc_of(att.error()), att.error().message);
    auto bound = (*att)->hook()(-1, c->cgroup);
    if (!bound) return task_error(TaskErrc::BpfUnavailable, bound.error());
    c->attachment = std::move(*att);
    c->cgroup_id = c->attachment->cgroup_id();
    c->bpf = std::move(*bound);
    if (auto s = save(*c, bundle_json); !s) return std::unexpected(s.error());

    if (opts_.store) {
        json detail{{"container", *ctx.container}, {"cgroup", c->cgroup},   {"cgroup_id", c->cgroup_id},
                    {"bpf", c->bpf},               {"policy", c->bundle->hash}, {"report", c->report}};
        auto seq = opts_.store->enqueue(audit::run_start_record(0, c->run_id, c->tool, 1, detail));
        if (!seq || !opts_.store->wait_committed(*seq, opts_.start_ack)) {
            c->attachment->release();
            std::error_code ec;
            std::filesystem::remove(file_of(c->id), ec);
            return task_error(TaskErrc::StoreUnacknowledged,
                              "the audit store did not acknowledge the container's start; it is not bound");
        }
    }
    if (opts_.registry) opts_.registry->add(c->cgroup, req.pid, ctx);
    unmake.armed = false;
    json reply = c->summary();
    if (auto v2 = cgroup2_mount(); v2 && c->cgroup.starts_with(*v2 + "/"))
        reply["cgroups_path"] = c->cgroup.substr(v2->size());  // the spec's linux.cgroupsPath
    reply["layers"] = opts_.bpf->layer_states();
    reply["net_enforcing"] = opts_.bpf->net_enforcing();
    reply["unix_enforcing"] = opts_.bpf->unix_enforcing();
    std::lock_guard lk(mu_);
    containers_[c->id] = c;
    return reply;
}

std::expected<json, TaskError> ContainerManager::release(const std::string& id, const json& exit) {
    std::shared_ptr<Container> c;
    {
        std::lock_guard lk(mu_);
        auto it = containers_.find(id);
        if (it == containers_.end()) return task_error(TaskErrc::UnknownContainer, "no container " + id + " is bound");
        c = it->second;
        containers_.erase(it);
    }
    if (c->attachment) c->attachment->release();
    if (opts_.registry) opts_.registry->remove(c->cgroup);
    if (c->made_cgroup) ::rmdir(c->cgroup.c_str());  // the OCI runtime's delete emptied it (EBUSY otherwise: kept)
    if (opts_.store) {
        json extra{{"container", *context_of(*c).container}};
        if (exit.is_object())
            for (const auto& [k, v] : exit.items()) extra[k] = v;
        const int code = exit.is_object() ? exit.value("code", -1) : -1;
        if (auto seq = opts_.store->enqueue(audit::run_exit_record(0, c->run_id, c->tool, "deleted", code, extra)))
            opts_.store->wait_committed(*seq, opts_.start_ack);
    }
    std::error_code ec;
    std::filesystem::remove(file_of(id), ec);
    return c->summary();
}

json ContainerManager::list() const {
    json out = json::array();
    std::lock_guard lk(mu_);
    for (const auto& [id, c] : containers_) out.push_back(c->summary());
    return out;
}

std::expected<json, TaskError> ContainerManager::get(const std::string& id) const {
    std::lock_guard lk(mu_);
    auto it = containers_.find(id);
    if (it == containers_.end()) return task_error(TaskErrc::UnknownContainer, "no container " + id + " is bound");
    return it->second->summary();
}

std::set<uint64_t> ContainerManager::readopt() {
    std::set<uint64_t> kept;
    const auto dir = opts_.state_dir / "containers";
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) return kept;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        if (entry.path().extension() != ".json") continue;
        std::ifstream in(entry.path());
        std::stringstream ss;
        ss << in.rdbuf();
        json doc = json::parse(ss.str(), nullptr, false);
        auto bundle = doc.is_object() && doc.contains("bundle") ? policy::bundle_from_json(doc["bundle"])
                                                                : std::expected<policy::Bundle, std::string>(
                                                                      std::unexpected("no bundle"));
        if (!bundle) {
            spdlog::error("containers: {}: unreadable ({}); left in place", entry.path().string(), bundle.error());
            continue;
        }
        auto c = std::make_shared<Container>();
        c->id = doc.value("id", "");
        c->cgroup = doc.value("cgroup", "");
        c->made_cgroup = doc.value("made_cgroup", false);
        c->tool = doc.value("tool", "");
        c->run_id = doc.value("run_id", uint64_t{0});
        c->started_ns = doc.value("started_ns", int64_t{0});
        c->identity = doc.value("identity", json::object());
        c->report = doc.value("report", json::object());
        c->bundle = std::make_shared<const policy::Bundle>(std::move(*bundle));
        const RunContext ctx = context_of(*c);
        if (!is_dir(c->cgroup)) {
            if (opts_.store)
                opts_.store->enqueue(audit::run_exit_record(0, c->run_id, c->tool, "gone", -1,
                                                            {{"container", *ctx.container},
                                                             {"outcome", "its cgroup was gone when agentd started"}}));
            std::filesystem::remove(entry.path(), ec);
            spdlog::warn("containers: {} (run {}) is gone; its run is closed", c->id, c->run_id);
            continue;
        }
        kept.insert(c->run_id);
        if (opts_.bpf) {
            auto a = opts_.bpf->adopt(c->cgroup, *c->bundle, ctx);
            if (a) {
                c->attachment = std::move(*a);
                c->cgroup_id = c->attachment->cgroup_id();
                c->bpf = "adopted: cgroup " + std::to_string(c->cgroup_id);
            } else {
                c->bpf = "not adopted: " + a.error().message;
                spdlog::error("containers: {}: {}", c->id, c->bpf);
            }
        } else {
            c->bpf = "not adopted: the BPF layer is not running here (" + opts_.bpf_unavailable + ")";
        }
        if (opts_.registry) opts_.registry->add(c->cgroup, 0, ctx);
        spdlog::info("containers: {} (run {}, tool {}) re-adopted: {}", c->id, c->run_id, c->tool, c->bpf);
        std::lock_guard lk(mu_);
        containers_[c->id] = c;
    }
    return kept;
}

std::expected<ContainerRequest, TaskError> container_request_from_json(const json& body) {
    if (!body.is_object()) return task_error(TaskErrc::BadRequest, "body: expected a JSON object");
    ContainerRequest r;
    if (!body.contains("id") || !body["id"].is_string()) return task_error(TaskErrc::BadRequest, "id: required string");
    r.id = body["id"];
    if (body.contains("cgroup")) {
        if (!body["cgroup"].is_string()) return task_error(TaskErrc::BadRequest, "cgroup: expected a string");
        r.cgroup = body["cgroup"];
    }
    if (body.contains("pid")) {
        if (!body["pid"].is_number_unsigned()) return task_error(TaskErrc::BadRequest, "pid: expected a process id");
        r.pid = body["pid"].get<pid_t>();
    }
    if (!body.contains("bundle")) return task_error(TaskErrc::BadRequest, "bundle: required (the compiled policy)");
    auto b = policy::bundle_from_json(body["bundle"]);
    if (!b) return task_error(TaskErrc::BadRequest, "bundle: " + b.error());
    if (!policy::is_instantiated(*b))
        return task_error(TaskErrc::BadRequest, "bundle: not instantiated (variables or host names left)");
    r.bundle = std::move(*b);
    for (const char* k : {"identity", "report"})
        if (body.contains(k)) {
            if (!body[k].is_object()) return task_error(TaskErrc::BadRequest, std::string(k) + ": expected an object");
            (std::string(k) == "identity" ? r.identity : r.report) = body[k];
        }
    for (const auto& [k, v] : r.identity.items())
        if (!v.is_string()) return task_error(TaskErrc::BadRequest, "identity." + k + ": expected a string");
    return r;
}

}  // namespace bulwark
