#pragma once
// A decision record the guest agent sent (RunReport::microvm["decisions"],
// audit::to_json's shape) as a record of the host's run: the run's identity
// and its bundle's rule (by id: the guest enforces the same bundle) come from
// the host, the decision itself from the guest, and `detail` marks it
// {"in_guest": true, "guest_ts_ns": ...}. A record that does not read as a
// decision is an error (the caller counts it).
#include <expected>
#include <string>

#include <nlohmann/json.hpp>

#include "audit/audit_record.h"
#include "audit/run_context.h"

namespace bulwark::vm {

std::expected<audit::AuditRecord, std::string> guest_record(const nlohmann::json& j, const RunContext& run);

}  // namespace bulwark::vm
