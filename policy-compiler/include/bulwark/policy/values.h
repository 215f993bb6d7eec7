#pragma once
// Parsers for the scalar values of the rule language. Each is strict: a
// value is either understood exactly or rejected with a message; nothing is
// wrapped, truncated or guessed.
#include <array>
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bulwark::policy {

inline constexpr size_t kMaxPathBytes = 4096;       // PATH_MAX
inline constexpr size_t kMaxComponentBytes = 255;   // NAME_MAX

// Absolute path or one starting with a task variable (${workdir}, ${home},
// ${tmp}, ${task_id}); `//`, `/./` and trailing `/` folded, `..` rejected.
std::expected<std::string, std::string> normalise_path(std::string_view path);
// The variable a path starts with ("workdir"), or empty.
std::string_view path_variable(std::string_view normalised);
// `ancestor` covers `path` (same path or a parent directory of it). Paths
// under different roots (two variables, or a variable and an absolute path)
// are unrelated, except that "/" covers everything.
bool path_covers(std::string_view ancestor, std::string_view path);

struct Cidr {
    std::array<uint8_t, 16> addr{};  // network address in the v6 space
    uint8_t prefix = 0;              // 0..128 within the v6 space
    bool v4 = false;                 // written as IPv4 (stored v4-mapped)
};
// "10.0.0.0/8", "2001:db8::/32", or a bare address (/32 or /128). Host bits
// beyond the prefix are an error.
std::expected<Cidr, std::string> parse_cidr(std::string_view text);
std::expected<Cidr, std::string> parse_address(std::string_view text);
std::string format_cidr(const std::array<uint8_t, 16>& addr, uint8_t prefix);
bool cidr_contains(const Cidr& outer, const Cidr& inner);

// RFC 1123 host name; returns it lowercased without a trailing dot.
std::expected<std::string, std::string> validate_hostname(std::string_view host);

struct PortRange {
    uint16_t lo = 0, hi = 65535;
};
// "443", "8000-8080" (decimal, no signs or leading zeros, lo <= hi <= 65535).
std::expected<PortRange, std::string> parse_port_range(std::string_view text);

// Decimal unsigned integer, no sign, no leading zeros, no overflow.
std::expected<uint64_t, std::string> parse_uint(std::string_view text, uint64_t max);
// "256MiB", "1GB", "512B".
std::expected<uint64_t, std::string> parse_size(std::string_view text);
// "250ms", "30s", "5m", "2h" -> milliseconds.
std::expected<uint64_t, std::string> parse_duration_ms(std::string_view text);
// "50%" -> 50.
std::expected<uint32_t, std::string> parse_percent(std::string_view text);

// BW_FS_* bits as "read,write" ("none" for 0).
std::string rights_to_string(uint32_t rights);

// BW_NET_CONNECT / _BIND / _SEND bits as "connect<sep>bind<sep>send" ("" for 0).
std::string net_ops_to_string(uint32_t ops, std::string_view sep);

// Socket family names of `network.families` and their AF_* numbers.
const std::vector<std::pair<std::string, int>>& socket_families();
// Netlink protocol names of `network.netlink` and their NETLINK_* numbers.
const std::vector<std::pair<std::string, int>>& netlink_protocols();

// A tool's name: [a-z0-9][a-z0-9._+-]{0,63}.
bool valid_tool_name(std::string_view name);

// Strict UTF-8 validation (no overlongs, surrogates or code points past
// U+10FFFF); returns the byte offset of the first bad sequence.
std::expected<void, size_t> check_utf8(std::string_view text);

}  // namespace bulwark::policy
