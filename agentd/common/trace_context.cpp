#include "common/trace_context.h"

#include <algorithm>

#include "common/digest.h"

namespace bulwark {
namespace {

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;  // uppercase is not allowed by the specification
}

// n bytes from 2n lowercase hex digits at s; false on any other character.
bool read_hex(std::string_view s, uint8_t* out, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out[i] = uint8_t(hi << 4 | lo);
    }
    return true;
}

template <size_t N>
bool all_zero(const std::array<uint8_t, N>& a) {
    return std::all_of(a.begin(), a.end(), [](uint8_t b) { return b == 0; });
}

}  // namespace

std::string TraceContext::trace_id_hex() const { return to_hex(trace_id.data(), trace_id.size()); }
std::string TraceContext::span_id_hex() const { return to_hex(span_id.data(), span_id.size()); }

std::expected<TraceContext, std::string> parse_traceparent(std::string_view v) {
    // version(2) - trace-id(32) - parent-id(16) - flags(2)
    constexpr size_t kLen = 2 + 1 + 32 + 1 + 16 + 1 + 2;
    const std::string_view form = "must be a W3C traceparent: 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>";
    if (v.size() < kLen) return std::unexpected(std::string(form));
    TraceContext t;
    if (!read_hex(v.substr(0, 2), &t.version, 1))
        return std::unexpected("version '" + std::string(v.substr(0, 2)) + "' is not two lowercase hex digits");
    if (t.version == 0xff) return std::unexpected(std::string("version ff is invalid"));
    if (v[2] != '-' || v[35] != '-' || v[52] != '-') return std::unexpected(std::string(form));
    if (!read_hex(v.substr(3, 32), t.trace_id.data(), 16))
        return std::unexpected(std::string("trace id: 32 lowercase hex digits expected"));
    if (!read_hex(v.substr(36, 16), t.span_id.data(), 8))
        return std::unexpected(std::string("parent id: 16 lowercase hex digits expected"));
    if (!read_hex(v.substr(53, 2), &t.flags, 1))
        return std::unexpected(std::string("trace flags: 2 lowercase hex digits expected"));
    if (all_zero(t.trace_id)) return std::unexpected(std::string("trace id: all zeros is invalid"));
    if (all_zero(t.span_id)) return std::unexpected(std::string("parent id: all zeros is invalid"));
    if (v.size() > kLen) {
        // Version 00 has exactly four fields; a later version may add more.
        if (t.version == 0) return std::unexpected("version 00 has exactly " + std::to_string(kLen) + " characters");
        if (v[kLen] != '-') return std::unexpected(std::string(form));
        if (v.size() > 256) return std::unexpected(std::string("longer than 256 characters"));
        for (char c : v.substr(kLen))
            if (c != '-' && hex_digit(c) < 0)
                return std::unexpected(std::string("fields after the flags: lowercase hex digits and '-' only"));
    }
    t.text = std::string(v);
    return t;
}

}  // namespace bulwark
