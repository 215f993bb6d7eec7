#pragma once
// One audit record as one OTLP log record (opentelemetry-proto logs/v1
// LogRecord): its time, severity, event name, a one-line body, the trace
// context of the request that caused its run, and attributes: OCSF
// (telemetry/ocsf.h, prefix `ocsf.`), Bulwark's own (`bulwark.`: task, run,
// tool, policy version, rule file:line and text, layer, decision, object)
// and the run's container (OpenTelemetry's `container.id`, `k8s.pod.name`,
// `k8s.namespace.name`, `k8s.pod.uid`, `k8s.container.name`: a container
// run's records carry detail.container {id, pod_name, pod_namespace,
// pod_uid, container_name}). The table: docs/telemetry.md.
//
// Strings are views into the record and the run info where they can be
// (both must outlive the log record); text that is not valid UTF-8 (a file
// name's bytes) is carried as a copy with each bad byte replaced by U+FFFD,
// since OTLP strings are UTF-8 in both encodings.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "audit/audit_record.h"
#include "common/trace_context.h"

namespace bulwark::telemetry {

// What the exporter knows of a run beyond each record: read from the run's
// start record (detail.traceparent, detail.container).
struct RunInfo {
    std::optional<TraceContext> trace;
    std::string container_id, pod_name, pod_namespace, pod_uid, container_name;
};
// The run info a start record's detail carries (a traceparent that does not
// parse is left out: it was checked when the run was asked for).
RunInfo run_info_from_detail(const nlohmann::json& detail);

// An attribute value: a string (a view, or a copy it owns), an integer or a
// boolean (opentelemetry-proto common/v1 AnyValue).
struct AttrValue {
    enum class Kind : uint8_t { String, Int, Bool } kind = Kind::String;
    std::string_view view;  // String: the text, unless `owned` is used
    std::string owned;
    bool uses_owned = false;
    int64_t i = 0;
    bool b = false;
    std::string_view text() const { return uses_owned ? std::string_view(owned) : view; }
};

struct Attribute {
    std::string_view key;  // always a literal
    AttrValue value;
};

// Severity of a log record (opentelemetry-proto SeverityNumber).
enum class Severity : uint8_t { Info = 9, Warn = 13, Error = 17 };

struct LogRecord {
    int64_t time_ns = 0;           // when it happened (the record's ts_ns)
    int64_t observed_ns = 0;       // when the exporter took it
    Severity severity = Severity::Info;
    std::string_view event_name;   // bulwark.decision, bulwark.run_start, ...
    std::string body;              // one line, for people reading logs
    std::vector<Attribute> attributes;
    bool has_trace = false;
    std::array<uint8_t, 16> trace_id{};
    std::array<uint8_t, 8> span_id{};
    uint32_t flags = 0;            // W3C trace flags in the low byte

    const AttrValue* find(std::string_view key) const;  // tests
};

std::string_view severity_text(Severity s);

// The record as a log record. `run`: the record's run info (nullptr: none
// known); `observed_ns`: now.
LogRecord to_log_record(const audit::AuditRecord& r, const RunInfo* run, int64_t observed_ns);
// The same into `out`, whose room (attributes, body) is reused: the
// exporter keeps its batch's log records from one batch to the next.
void to_log_record(const audit::AuditRecord& r, const RunInfo* run, int64_t observed_ns, LogRecord& out);

// A log record of the exporter's own: `count` records were not exported
// (why: the drop reason).
LogRecord export_gap_record(uint64_t count, std::string_view why, int64_t now_ns);

// UTF-8 as written, or nullopt when valid (no copy needed).
std::optional<std::string> sanitize_utf8(std::string_view s);

}  // namespace bulwark::telemetry
