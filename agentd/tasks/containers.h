#pragma once
// Containers confined by the OCI runtime (bulwark-oci): the node's agentd
// binds each container's cgroup to its policy in the BPF maps, names its
// decisions (every record carries the container's identity), and keeps the
// binding across its own restarts.
//
//   bind()     after the runtime's `create` and before `start` (the
//              container's first instruction): checks the cgroup lies below
//              the BPF cgroup parent, binds it, records the run's start
//              (durable before the reply), registers the cgroup with the
//              kernel audit source, and writes <state_dir>/containers/<id>.json.
//   release()  at the runtime's `delete`: the ring buffer drained, the
//              binding and its slot freed, the exit recorded, the file removed.
//   readopt()  at agentd's start, before open runs are reconciled: each
//              container file whose cgroup still exists is adopted as bound
//              (enforcement never paused: the pinned maps kept the binding);
//              one whose cgroup is gone gets its exit record ("gone").
#include <sys/types.h>

#include <cstdint>
#include <expected>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "audit/audit_db.h"
#include "bpf/bpf_runtime.h"
#include "bulwark/policy/bundle.h"
#include "kaudit/run_registry.h"
#include "tasks/task_error.h"

namespace bulwark {

struct ContainerRequest {
    std::string id;             // the OCI container id
    // The container's cgroup v2 directory, absolute; empty: agentd makes
    // <BPF cgroup parent>/oci-<id> (and removes it at release).
    std::string cgroup;
    pid_t pid = 0;              // its init process (for the kernel audit source)
    policy::Bundle bundle;      // the instantiated policy the runtime enforces
    nlohmann::json identity = nlohmann::json::object();  // pod_name, pod_namespace, pod_uid, container_name
    nlohmann::json report = nlohmann::json::object();    // the runtime's own layers (spec, launcher)
};

struct ContainerOptions {
    bpf::BpfRuntime* bpf = nullptr;
    std::string bpf_unavailable;  // why bpf is null
    RunRegistry* registry = nullptr;
    audit::AuditStore* store = nullptr;
    std::filesystem::path state_dir;  // <state_dir>/containers/<id>.json
    std::function<uint64_t()> next_run_id;
    std::chrono::milliseconds start_ack{5000};
};

class ContainerManager {
public:
    explicit ContainerManager(ContainerOptions opts) : opts_(std::move(opts)) {}
    ~ContainerManager();  // the bindings stay in the maps (the containers outlive agentd)

    std::expected<nlohmann::json, TaskError> bind(ContainerRequest req);
    std::expected<nlohmann::json, TaskError> release(const std::string& id, const nlohmann::json& exit);
    nlohmann::json list() const;
    std::expected<nlohmann::json, TaskError> get(const std::string& id) const;

    // Adopts what an earlier agentd bound; the run ids of the containers
    // adopted (reconcile leaves their runs open).
    std::set<uint64_t> readopt();
    // A container id the runtime may use (runc's rule: [A-Za-z0-9_+.-]{1,1024},
    // not "." or "..").
    static bool valid_id(const std::string& id);

private:
    struct Container {
        std::string id, cgroup, tool;
        bool made_cgroup = false;  // agentd made it: removed at release
        uint64_t run_id = 0, cgroup_id = 0;
        int64_t started_ns = 0;
        nlohmann::json identity, report;
        std::string bpf;  // what the binding says is in force
        std::shared_ptr<const policy::Bundle> bundle;
        std::shared_ptr<bpf::Attachment> attachment;
        nlohmann::json summary() const;
    };
    std::filesystem::path file_of(const std::string& id) const;
    RunContext context_of(const Container& c) const;
    std::expected<void, TaskError> save(const Container& c, const nlohmann::json& bundle_json) const;

    ContainerOptions opts_;
    mutable std::mutex mu_;
    std::map<std::string, std::shared_ptr<Container>> containers_;
    std::set<std::string> pending_;  // ids being bound
};

}  // namespace bulwark

namespace bulwark {
// POST /v1/containers's body: {id, cgroup? (absent: agentd makes it), pid?, bundle (bundle_to_json),
// identity?: {pod_name, ...: string}, report?: {...}}; a refusal names the field.
std::expected<ContainerRequest, TaskError> container_request_from_json(const nlohmann::json& body);
}  // namespace bulwark
