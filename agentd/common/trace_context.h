#pragma once
// W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent`
// a caller sends with the request that causes a run (the exec API's header or
// body field, MCP's `_meta.traceparent`), read strictly, so the run's records
// can be exported with the caller's trace id and span id and an agent's trace
// links to the decisions its tool call caused.
//
//   traceparent = version "-" trace-id "-" parent-id "-" trace-flags
//   00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
//
// Lowercase hex only; an all-zero trace id or parent id is invalid; version
// ff is invalid; version 00 has exactly these four fields, a later version
// may carry more after a further "-" (they are kept verbatim, not read).
#include <array>
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

namespace bulwark {

struct TraceContext {
    uint8_t version = 0;
    std::array<uint8_t, 16> trace_id{};
    std::array<uint8_t, 8> span_id{};  // the caller's span (the traceparent's parent-id)
    uint8_t flags = 0;                 // trace-flags: bit 0 sampled
    std::string text;                  // the traceparent as received

    std::string trace_id_hex() const;
    std::string span_id_hex() const;
};

// The traceparent value, or why it is not one (a sentence without the field's
// name: callers prefix it, "traceparent: ...").
std::expected<TraceContext, std::string> parse_traceparent(std::string_view value);

}  // namespace bulwark
