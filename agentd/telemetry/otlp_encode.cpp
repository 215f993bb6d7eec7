#include "telemetry/otlp_encode.h"

#include <cstdlib>
#include <cstring>

#include <nlohmann/json.hpp>

#include "common/digest.h"

namespace bulwark::telemetry {
namespace {

// ---- protobuf wire format ----------------------------------------------
// Field numbers of opentelemetry-proto (collector/logs/v1, logs/v1,
// common/v1, resource/v1) used here; every one is below 16, so each tag is
// one byte.
enum Wire : uint8_t { Varint = 0, Fixed64 = 1, Len = 2, Fixed32 = 5 };

size_t varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) v >>= 7, ++n;
    return n;
}
size_t len_field_size(size_t n) { return 1 + varint_size(n) + n; }

// Writes into a buffer already sized to the message (the sizes are
// computed first), without a capacity check per byte.
struct Out {
    char* p;
    void raw(const void* d, size_t n) {
        std::memcpy(p, d, n);
        p += n;
    }
};
void put_varint(Out& o, uint64_t v) {
    while (v >= 0x80) {
        *o.p++ = char(uint8_t(v) | 0x80);
        v >>= 7;
    }
    *o.p++ = char(uint8_t(v));
}
void put_tag(Out& o, unsigned field, Wire w) { *o.p++ = char(uint8_t(field << 3 | w)); }
void put_len(Out& o, unsigned field, size_t n) {
    put_tag(o, field, Len);
    put_varint(o, n);
}
void put_bytes(Out& o, unsigned field, std::string_view b) {
    put_len(o, field, b.size());
    o.raw(b.data(), b.size());
}
void put_fixed64(Out& o, unsigned field, uint64_t v) {
    put_tag(o, field, Fixed64);
    uint8_t b[8];
    for (int i = 0; i < 8; ++i) b[i] = uint8_t(v >> (8 * i));
    o.raw(b, 8);
}
void put_fixed32(Out& o, unsigned field, uint32_t v) {
    put_tag(o, field, Fixed32);
    uint8_t b[4];
    for (int i = 0; i < 4; ++i) b[i] = uint8_t(v >> (8 * i));
    o.raw(b, 4);
}

// AnyValue: string_value = 1, bool_value = 2, int_value = 3 (a oneof: a
// set value is written even when it is the default).
size_t any_size(const AttrValue& v) {
    switch (v.kind) {
    case AttrValue::Kind::Int: return 1 + varint_size(uint64_t(v.i));
    case AttrValue::Kind::Bool: return 2;
    default: return len_field_size(v.text().size());
    }
}
void put_any(Out& o, const AttrValue& v) {
    switch (v.kind) {
    case AttrValue::Kind::Int:
        put_tag(o, 3, Varint);
        put_varint(o, uint64_t(v.i));
        break;
    case AttrValue::Kind::Bool:
        put_tag(o, 2, Varint);
        *o.p++ = char(v.b ? 1 : 0);
        break;
    default: put_bytes(o, 1, v.text());
    }
}
size_t string_any_size(std::string_view s) { return len_field_size(s.size()); }

// KeyValue: key = 1, value = 2.
size_t kv_size(std::string_view key, size_t value_size) {
    return len_field_size(key.size()) + len_field_size(value_size);
}
void put_kv(Out& o, unsigned field, std::string_view key, const AttrValue& v) {
    size_t vs = any_size(v);
    put_len(o, field, kv_size(key, vs));
    put_bytes(o, 1, key);
    put_len(o, 2, vs);
    put_any(o, v);
}
void put_kv_string(Out& o, unsigned field, std::string_view key, std::string_view value) {
    size_t vs = string_any_size(value);
    put_len(o, field, kv_size(key, vs));
    put_bytes(o, 1, key);
    put_len(o, 2, vs);
    put_bytes(o, 1, value);
}

// LogRecord: time_unix_nano = 1 (fixed64), severity_number = 2,
// severity_text = 3, body = 5, attributes = 6, flags = 8 (fixed32),
// trace_id = 9, span_id = 10, observed_time_unix_nano = 11 (fixed64),
// event_name = 12.
size_t log_record_size(const LogRecord& r) {
    size_t n = 0;
    if (r.time_ns) n += 9;
    n += 1 + varint_size(uint64_t(r.severity));
    n += len_field_size(severity_text(r.severity).size());
    n += len_field_size(string_any_size(r.body));
    for (const auto& a : r.attributes) n += len_field_size(kv_size(a.key, any_size(a.value)));
    if (r.flags) n += 5;
    if (r.has_trace) n += len_field_size(16) + len_field_size(8);
    if (r.observed_ns) n += 9;
    if (!r.event_name.empty()) n += len_field_size(r.event_name.size());
    return n;
}
void put_log_record(Out& o, const LogRecord& r, size_t size) {
    put_len(o, 2, size);  // ScopeLogs.log_records = 2
    if (r.time_ns) put_fixed64(o, 1, uint64_t(r.time_ns));
    put_tag(o, 2, Varint);
    put_varint(o, uint64_t(r.severity));
    put_bytes(o, 3, severity_text(r.severity));
    put_len(o, 5, string_any_size(r.body));
    put_bytes(o, 1, r.body);
    for (const auto& a : r.attributes) put_kv(o, 6, a.key, a.value);
    if (r.flags) put_fixed32(o, 8, r.flags);
    if (r.has_trace) {
        put_bytes(o, 9, std::string_view(reinterpret_cast<const char*>(r.trace_id.data()), r.trace_id.size()));
        put_bytes(o, 10, std::string_view(reinterpret_cast<const char*>(r.span_id.data()), r.span_id.size()));
    }
    if (r.observed_ns) put_fixed64(o, 11, uint64_t(r.observed_ns));
    if (!r.event_name.empty()) put_bytes(o, 12, r.event_name);
}

void write_request(Out& o, const OtlpResource& res, std::span<const LogRecord> records, const std::vector<size_t>& sizes,
                   size_t resource, size_t scope, size_t scope_logs, size_t resource_logs);

void encode_protobuf(const OtlpResource& res, std::span<const LogRecord> records, std::string& o) {
    // Resource: attributes = 1.
    size_t resource = 0;
    for (const auto& [k, v] : res.attributes) resource += len_field_size(kv_size(k, string_any_size(v)));
    // InstrumentationScope: name = 1, version = 2.
    size_t scope = len_field_size(res.scope_name.size());
    if (!res.scope_version.empty()) scope += len_field_size(res.scope_version.size());
    // ScopeLogs: scope = 1, log_records = 2.
    std::vector<size_t> sizes(records.size());
    size_t scope_logs = len_field_size(scope);
    for (size_t i = 0; i < records.size(); ++i) {
        sizes[i] = log_record_size(records[i]);
        scope_logs += len_field_size(sizes[i]);
    }
    // ResourceLogs: resource = 1, scope_logs = 2.
    size_t resource_logs = len_field_size(resource) + len_field_size(scope_logs);
    const size_t total = len_field_size(resource_logs);
    o.resize_and_overwrite(total, [&](char* buf, size_t) {
        Out w{buf};
        write_request(w, res, records, sizes, resource, scope, scope_logs, resource_logs);
        if (size_t(w.p - buf) != total) std::abort();  // a size function and its writer disagree
        return total;
    });
}

void write_request(Out& o, const OtlpResource& res, std::span<const LogRecord> records, const std::vector<size_t>& sizes,
                   size_t resource, size_t scope, size_t scope_logs, size_t resource_logs) {
    put_len(o, 1, resource_logs);  // ExportLogsServiceRequest.resource_logs = 1
    put_len(o, 1, resource);
    for (const auto& [k, v] : res.attributes) put_kv_string(o, 1, k, v);
    put_len(o, 2, scope_logs);
    put_len(o, 1, scope);
    put_bytes(o, 1, res.scope_name);
    if (!res.scope_version.empty()) put_bytes(o, 2, res.scope_version);
    for (size_t i = 0; i < records.size(); ++i) put_log_record(o, records[i], sizes[i]);
}

// ---- JSON ----------------------------------------------------------------
// Strings reaching here are valid UTF-8 (otlp_log sanitizes them): only the
// quote, the backslash and control characters are escaped.
void put_json_string(std::string& o, std::string_view s) {
    o += '"';
    size_t run = 0;  // start of the characters not yet appended
    for (size_t i = 0; i < s.size(); ++i) {
        auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        o.append(s.data() + run, i - run);
        run = i + 1;
        static constexpr char kHex[] = "0123456789abcdef";
        switch (c) {
        case '"': o += "\\\""; break;
        case '\\': o += "\\\\"; break;
        case '\n': o += "\\n"; break;
        case '\r': o += "\\r"; break;
        case '\t': o += "\\t"; break;
        default:
            o += "\\u00";
            o += kHex[c >> 4];
            o += kHex[c & 15];
        }
    }
    o.append(s.data() + run, s.size() - run);
    o += '"';
}

void put_json_any(std::string& o, const AttrValue& v) {
    switch (v.kind) {
    case AttrValue::Kind::Int:
        o += "{\"intValue\":\"";  // int64: a decimal string in the JSON mapping
        o += std::to_string(v.i);
        o += "\"}";
        break;
    case AttrValue::Kind::Bool: o += v.b ? "{\"boolValue\":true}" : "{\"boolValue\":false}"; break;
    default:
        o += "{\"stringValue\":";
        put_json_string(o, v.text());
        o += '}';
    }
}
void put_json_kv(std::string& o, std::string_view key, const AttrValue& v) {
    o += "{\"key\":";
    put_json_string(o, key);
    o += ",\"value\":";
    put_json_any(o, v);
    o += '}';
}

void put_json_log_record(std::string& o, const LogRecord& r) {
    o += "{\"timeUnixNano\":\"";
    o += std::to_string(r.time_ns);
    o += "\",\"observedTimeUnixNano\":\"";
    o += std::to_string(r.observed_ns);
    o += "\",\"severityNumber\":";
    o += std::to_string(int(r.severity));
    o += ",\"severityText\":";
    put_json_string(o, severity_text(r.severity));
    o += ",\"body\":{\"stringValue\":";
    put_json_string(o, r.body);
    o += "},\"attributes\":[";
    for (size_t i = 0; i < r.attributes.size(); ++i) {
        if (i) o += ',';
        put_json_kv(o, r.attributes[i].key, r.attributes[i].value);
    }
    o += ']';
    if (r.flags) o += ",\"flags\":" + std::to_string(r.flags);
    if (r.has_trace) {
        o += ",\"traceId\":\"" + to_hex(r.trace_id.data(), r.trace_id.size()) + "\"";
        o += ",\"spanId\":\"" + to_hex(r.span_id.data(), r.span_id.size()) + "\"";
    }
    if (!r.event_name.empty()) {
        o += ",\"eventName\":";
        put_json_string(o, r.event_name);
    }
    o += '}';
}

void encode_json(const OtlpResource& res, std::span<const LogRecord> records, std::string& o) {
    o += "{\"resourceLogs\":[{\"resource\":{\"attributes\":[";
    for (size_t i = 0; i < res.attributes.size(); ++i) {
        if (i) o += ',';
        AttrValue v;
        v.view = res.attributes[i].second;
        put_json_kv(o, res.attributes[i].first, v);
    }
    o += "]},\"scopeLogs\":[{\"scope\":{\"name\":";
    put_json_string(o, res.scope_name);
    if (!res.scope_version.empty()) {
        o += ",\"version\":";
        put_json_string(o, res.scope_version);
    }
    o += "},\"logRecords\":[";
    for (size_t i = 0; i < records.size(); ++i) {
        if (i) o += ',';
        put_json_log_record(o, records[i]);
    }
    o += "]}]}]}";
}

// ---- the answer ------------------------------------------------------------
struct ProtoReader {
    std::string_view s;
    size_t i = 0;
    bool ok = true;
    uint64_t varint() {
        uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (i >= s.size()) return ok = false, 0;
            auto b = static_cast<uint8_t>(s[i++]);
            v |= uint64_t(b & 0x7f) << shift;
            if (!(b & 0x80)) return v;
        }
        return ok = false, 0;
    }
    std::string_view bytes() {
        uint64_t n = varint();
        if (!ok || n > s.size() - i) return ok = false, std::string_view();
        auto b = s.substr(i, n);
        i += n;
        return b;
    }
    void skip(unsigned wire) {
        switch (wire) {
        case Varint: varint(); break;
        case Fixed64: i + 8 <= s.size() ? void(i += 8) : void(ok = false); break;
        case Len: bytes(); break;
        case Fixed32: i + 4 <= s.size() ? void(i += 4) : void(ok = false); break;
        default: ok = false;
        }
    }
    bool done() const { return !ok || i >= s.size(); }
};

std::optional<PartialSuccess> parse_protobuf_response(std::string_view body) {
    ProtoReader r{body};
    std::optional<PartialSuccess> out;
    while (!r.done()) {
        uint64_t tag = r.varint();
        if (!r.ok) return std::nullopt;
        if (tag >> 3 == 1 && (tag & 7) == Len) {  // partial_success = 1
            ProtoReader p{r.bytes()};
            if (!r.ok) return std::nullopt;
            PartialSuccess ps;
            while (!p.done()) {
                uint64_t t = p.varint();
                if (t >> 3 == 1 && (t & 7) == Varint) ps.rejected = int64_t(p.varint());  // rejected_log_records
                else if (t >> 3 == 2 && (t & 7) == Len) ps.message = std::string(p.bytes());  // error_message
                else p.skip(unsigned(t & 7));
            }
            if (!p.ok) return std::nullopt;
            out = std::move(ps);
        } else {
            r.skip(unsigned(tag & 7));
        }
    }
    return r.ok ? out : std::nullopt;
}

std::optional<PartialSuccess> parse_json_response(std::string_view body) {
    auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    auto it = j.find("partialSuccess");
    if (it == j.end() || !it->is_object()) return std::nullopt;
    PartialSuccess ps;
    if (auto r = it->find("rejectedLogRecords"); r != it->end()) {
        if (r->is_number_integer()) ps.rejected = r->get<int64_t>();
        else if (r->is_string()) ps.rejected = std::strtoll(r->get_ref<const std::string&>().c_str(), nullptr, 10);
    }
    if (auto m = it->find("errorMessage"); m != it->end() && m->is_string()) ps.message = m->get<std::string>();
    return ps;
}

}  // namespace

std::string_view encoding_name(OtlpEncoding e) { return e == OtlpEncoding::Json ? "json" : "protobuf"; }
std::string_view content_type(OtlpEncoding e) {
    return e == OtlpEncoding::Json ? "application/json" : "application/x-protobuf";
}
std::optional<OtlpEncoding> parse_encoding(std::string_view s) {
    if (s == "protobuf") return OtlpEncoding::Protobuf;
    if (s == "json") return OtlpEncoding::Json;
    return std::nullopt;
}

void encode_logs_request(OtlpEncoding e, const OtlpResource& res, std::span<const LogRecord> records,
                         std::string& out) {
    out.clear();
    if (e == OtlpEncoding::Json)
        encode_json(res, records, out);
    else
        encode_protobuf(res, records, out);
}

std::optional<PartialSuccess> parse_export_response(std::string_view ctype, std::string_view body) {
    if (body.empty()) return std::nullopt;
    if (ctype.starts_with("application/json")) return parse_json_response(body);
    if (ctype.starts_with("application/x-protobuf")) return parse_protobuf_response(body);
    return std::nullopt;
}

}  // namespace bulwark::telemetry
