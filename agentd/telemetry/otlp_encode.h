#pragma once
// OTLP/HTTP request bodies for logs: an ExportLogsServiceRequest
// (opentelemetry-proto collector/logs/v1) holding one ResourceLogs (the
// daemon's resource attributes) with one ScopeLogs of log records, in either
// OTLP encoding:
//   protobuf  application/x-protobuf, the wire format of the .proto files,
//             written directly (each message's size is computed before it is
//             written, so the body is built in one pass without copies);
//   json      application/json, the OTLP JSON mapping (lowerCamelCase keys,
//             trace and span ids as hex, enums as numbers, 64-bit integers
//             as decimal strings).
// And the answer's ExportLogsServiceResponse, for its partial success.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "telemetry/otlp_log.h"

namespace bulwark::telemetry {

enum class OtlpEncoding { Protobuf, Json };

std::string_view encoding_name(OtlpEncoding e);       // protobuf, json
std::string_view content_type(OtlpEncoding e);        // application/x-protobuf, application/json
std::optional<OtlpEncoding> parse_encoding(std::string_view s);

// Who is exporting: resource attributes (service.name, host.name, ...) and
// the instrumentation scope.
struct OtlpResource {
    std::vector<std::pair<std::string, std::string>> attributes;
    std::string scope_name = "bulwark.audit";
    std::string scope_version;
};

// Appends the request body to `out` (cleared first).
void encode_logs_request(OtlpEncoding e, const OtlpResource& res, std::span<const LogRecord> records,
                         std::string& out);

// ExportLogsServicePartialSuccess of an answer's body: rejected log records
// and the message. nullopt: none (or a body that is not a response).
struct PartialSuccess {
    int64_t rejected = 0;
    std::string message;
};
std::optional<PartialSuccess> parse_export_response(std::string_view content_type, std::string_view body);

}  // namespace bulwark::telemetry
