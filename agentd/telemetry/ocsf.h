#pragma once
// Where an audit record sits in OCSF (the Open Cybersecurity Schema Framework,
// schema 1.1.0): its class, category, activity, type, severity, status and,
// for decisions, the action and disposition. Exported as attributes of the
// record's OTLP log record (telemetry/otlp_log.h); docs/telemetry.md has the
// table.
//
//   file operations            File System Activity (1001), category System Activity (1)
//   exec, fork, exit, ptrace,  Process Activity (1007), category System Activity (1)
//   signal; run start and exit
//   socket, connect, bind,     Network Activity (4001), category Network Activity (4)
//   send (IP and unix)
//   the rest (syscall, bpf,    Base Event (0), category Uncategorized (0), activity Other
//   policy epochs, gaps, host
//   status)
#include <cstdint>
#include <string_view>

#include "audit/audit_record.h"

namespace bulwark::telemetry {

inline constexpr std::string_view kOcsfVersion = "1.1.0";

struct OcsfClass {
    uint32_t class_uid = 0;
    std::string_view class_name = "Base Event";
    uint32_t category_uid = 0;
    std::string_view category_name = "Uncategorized";
    uint32_t activity_id = 99;
    std::string_view activity_name = "Other";
    std::string_view type_name = "Base Event: Other";  // "<class>: <activity>"
    uint32_t severity_id = 1;
    std::string_view severity = "Informational";
    uint32_t status_id = 1;
    std::string_view status = "Success";
    // Decisions only (has_action): what the sandbox did with the operation.
    bool has_action = false;
    uint32_t action_id = 0;
    std::string_view action = "Unknown";
    uint32_t disposition_id = 0;
    std::string_view disposition = "Unknown";

    // OCSF: type_uid = class_uid * 100 + activity_id.
    uint64_t type_uid() const { return uint64_t(class_uid) * 100 + activity_id; }
};

// detail: the record's detail, parsed (a run exit's reason sets its severity).
OcsfClass classify(const audit::AuditRecord& r, const nlohmann::json& detail);

}  // namespace bulwark::telemetry
