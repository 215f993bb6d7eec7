#include "telemetry/ocsf.h"

#include <bulwark_abi.h>

namespace bulwark::telemetry {
namespace {

using audit::RecordKind;

void file_activity(OcsfClass& c, uint32_t id, std::string_view name, std::string_view type) {
    c.type_name = type;
    c.class_uid = 1001;
    c.class_name = "File System Activity";
    c.category_uid = 1;
    c.category_name = "System Activity";
    c.activity_id = id;
    c.activity_name = name;
}

void process_activity(OcsfClass& c, uint32_t id, std::string_view name, std::string_view type) {
    c.type_name = type;
    c.class_uid = 1007;
    c.class_name = "Process Activity";
    c.category_uid = 1;
    c.category_name = "System Activity";
    c.activity_id = id;
    c.activity_name = name;
}

void network_activity(OcsfClass& c, uint32_t id, std::string_view name, std::string_view type) {
    c.type_name = type;
    c.class_uid = 4001;
    c.class_name = "Network Activity";
    c.category_uid = 4;
    c.category_name = "Network Activity";
    c.activity_id = id;
    c.activity_name = name;
}

// Base Event: activity Other, its name saying what happened.
void other(OcsfClass& c, std::string_view name, std::string_view type) {
    c.activity_name = name;
    c.type_name = type;
}

// The class and activity of an operation (BW_OP_*). An activity that OCSF's
// list for the class does not have is Other (99) with its own name, as the
// schema asks.
void classify_op(OcsfClass& c, unsigned op) {
    switch (op) {
    case BW_OP_FILE_OPEN: return file_activity(c, 14, "Open", "File System Activity: Open");
    case BW_OP_FILE_CREATE: return file_activity(c, 1, "Create", "File System Activity: Create");
    case BW_OP_MKDIR: return file_activity(c, 1, "Create", "File System Activity: Create");
    case BW_OP_FILE_LINK: return file_activity(c, 1, "Create", "File System Activity: Create");  // a new name for the file
    case BW_OP_FILE_UNLINK: return file_activity(c, 4, "Delete", "File System Activity: Delete");
    case BW_OP_FILE_RENAME: return file_activity(c, 5, "Rename", "File System Activity: Rename");
    case BW_OP_FILE_TRUNCATE: return file_activity(c, 3, "Update", "File System Activity: Update");
    case BW_OP_FILE_SETATTR: return file_activity(c, 6, "Set Attributes", "File System Activity: Set Attributes");
    case BW_OP_MOUNT: return file_activity(c, 12, "Mount", "File System Activity: Mount");
    case BW_OP_MMAP_EXEC: return file_activity(c, 99, "Map Executable", "File System Activity: Map Executable");
    case BW_OP_EXEC:
    case BW_OP_PROC_EXEC:
    case BW_OP_PROC_FORK: return process_activity(c, 1, "Launch", "Process Activity: Launch");
    case BW_OP_PROC_EXIT: return process_activity(c, 2, "Terminate", "Process Activity: Terminate");
    case BW_OP_PTRACE: return process_activity(c, 3, "Open", "Process Activity: Open");
    case BW_OP_SIGNAL: return process_activity(c, 99, "Signal", "Process Activity: Signal");
    case BW_OP_CONNECT: return network_activity(c, 1, "Open", "Network Activity: Open");
    case BW_OP_SENDMSG: return network_activity(c, 6, "Traffic", "Network Activity: Traffic");
    case BW_OP_BIND: return network_activity(c, 99, "Bind", "Network Activity: Bind");
    case BW_OP_SOCK_CREATE: return network_activity(c, 99, "Socket Create", "Network Activity: Socket Create");
    case BW_OP_SYSCALL: return other(c, "System Call", "Base Event: System Call");
    case BW_OP_BPF: return other(c, "BPF", "Base Event: BPF");
    default: return other(c, "Decision", "Base Event: Decision");
    }
}

void decision_outcome(OcsfClass& c, unsigned decision) {
    c.has_action = true;
    switch (decision) {
    case BW_DECISION_DENY:
        c.severity_id = 3, c.severity = "Medium";
        c.status_id = 2, c.status = "Failure";
        c.action_id = 2, c.action = "Denied";
        c.disposition_id = 2, c.disposition = "Blocked";
        break;
    case BW_DECISION_AUDIT:  // would be denied; allowed because the policy is in audit mode
        c.severity_id = 2, c.severity = "Low";
        c.action_id = 1, c.action = "Allowed";
        c.disposition_id = 15, c.disposition = "Detected";
        break;
    case BW_DECISION_OBSERVE:  // a monitor record: the operation went on, nothing was judged
        c.action_id = 1, c.action = "Allowed";
        c.disposition_id = 17, c.disposition = "Logged";
        break;
    default:
        c.action_id = 1, c.action = "Allowed";
        c.disposition_id = 1, c.disposition = "Allowed";
        break;
    }
}

}  // namespace

OcsfClass classify(const audit::AuditRecord& r, const nlohmann::json& detail) {
    OcsfClass c;
    switch (r.kind) {
    case RecordKind::Decision:
        classify_op(c, r.op);
        decision_outcome(c, r.decision);
        break;
    case RecordKind::RunStart: process_activity(c, 1, "Launch", "Process Activity: Launch"); break;
    case RecordKind::RunExit:
        process_activity(c, 2, "Terminate", "Process Activity: Terminate");
        // detail.reason: exit, signal, oom, timeout; only a plain exit is routine
        if (!detail.is_object() || detail.value("reason", std::string()) != "exit") c.severity_id = 2, c.severity = "Low";
        break;
    case RecordKind::PolicyEpoch: other(c, "Policy Epoch", "Base Event: Policy Epoch"); break;
    case RecordKind::Gap:
        other(c, "Records Lost", "Base Event: Records Lost");
        c.severity_id = 4, c.severity = "High";
        c.status_id = 2, c.status = "Failure";
        break;
    case RecordKind::HostStatus: other(c, "Host Status", "Base Event: Host Status"); break;
    case RecordKind::Finding:
        // OCSF Detection Finding (category Findings): a run unusual for its tool.
        c.class_uid = 2004, c.class_name = "Detection Finding";
        c.category_uid = 2, c.category_name = "Findings";
        c.activity_id = 1, c.activity_name = "Create";
        c.type_name = "Detection Finding: Create";
        c.severity_id = 3, c.severity = "Medium";
        break;
    case RecordKind::Profile: other(c, "Profile", "Base Event: Profile"); break;
    }
    return c;
}

}  // namespace bulwark::telemetry
