#pragma once
// Which run something belongs to, as every decision source and the records
// name it: one type for the BPF runtime's bindings, the kernel audit
// registry, the run binding and the records built from kernel events.
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace bulwark {
namespace policy {
struct Bundle;
}

struct RunContext {
    uint64_t task_id = 0;
    uint64_t run_id = 0;
    std::string tool;
    uint64_t policy_version = 0;
    // The run's policy: a decision's rule id is named from it (file:line and
    // text), and a seccomp denial from the kernel's audit log is judged
    // against its filter for the rule and errno (null: left unnamed).
    std::shared_ptr<const policy::Bundle> bundle;
    // A container's run (the OCI runtime, bulwark-oci): its identity (id and,
    // when known, the pod's name, namespace and UID), carried into the detail
    // of every decision record as "container". Null for a tool run.
    std::shared_ptr<const nlohmann::json> container;
};

}  // namespace bulwark
