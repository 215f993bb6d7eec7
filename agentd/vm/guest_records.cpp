#include "vm/guest_records.h"

#include <cstdint>

#include "bulwark/policy/bundle.h"

namespace bulwark::vm {

std::expected<audit::AuditRecord, std::string> guest_record(const nlohmann::json& j, const RunContext& run) {
    if (!j.is_object() || j.value("kind", "") != "decision") return std::unexpected("not a decision record");
    audit::AuditRecord r;
    r.kind = audit::RecordKind::Decision;
    r.ts_ns = audit::realtime_now_ns();  // the host's clock: the guest's is its own
    r.task_id = run.task_id;
    r.run_id = run.run_id;
    r.tool = run.tool;
    r.policy_version = run.policy_version;
    auto layer = audit::parse_layer(j.value("layer", ""));
    auto decision = audit::parse_decision(j.value("decision", ""));
    if (!layer || !decision) return std::unexpected("unknown layer or decision");
    r.layer = *layer;
    r.decision = *decision;
    const std::string op = j.value("op", "");
    for (unsigned o = 0; o < BW_OP_MAX; ++o)
        if (audit::op_name(o) == op) r.op = static_cast<uint16_t>(o);
    r.object = j.value("object", "");
    if (j.contains("errno") && j["errno"].is_number_integer()) r.err = j["errno"].get<int32_t>();
    if (j.contains("pid") && j["pid"].is_number_unsigned()) r.pid = j["pid"].get<uint32_t>();
    r.comm = j.value("comm", "");
    if (j.contains("rule") && !j["rule"].is_null()) {
        const auto& id = j["rule"].is_object() ? j["rule"].value("id", nlohmann::json()) : nlohmann::json();
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
            return std::unexpected("a rule without a valid id");
        r.rule_id = static_cast<uint32_t>(id.get<int64_t>());
        const policy::RuleRef* ref = run.bundle ? run.bundle->rule(r.rule_id) : nullptr;
        if (!ref) return std::unexpected("rule " + std::to_string(r.rule_id) + " is not a rule of the run's bundle");
        r.rule_file = ref->loc.file;
        r.rule_line = ref->loc.line;
        r.rule_text = ref->text;
    }
    nlohmann::json detail = {{"in_guest", true}};
    if (j.contains("ts_ns")) detail["guest_ts_ns"] = j["ts_ns"];
    r.detail = detail.dump();
    return r;
}

}  // namespace bulwark::vm
