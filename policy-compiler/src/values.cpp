// Strict parsers for scalar values (paths, addresses, ports, sizes, durations).
#include "bulwark/policy/values.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace bulwark::policy {
namespace {

constexpr std::string_view kVariables[] = {"workdir", "home", "tmp", "task_id"};

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

}  // namespace

std::expected<std::string, std::string> normalise_path(std::string_view path) {
    if (path.empty()) return std::unexpected("empty path");
    if (path.size() > kMaxPathBytes)
        return std::unexpected("path is " + std::to_string(path.size()) + " bytes; the limit is " +
                               std::to_string(kMaxPathBytes));
    for (unsigned char c : path) {
        if (c < 0x20 || c == 0x7f) return std::unexpected("control character in path");
        if (c == '*' || c == '?' || c == '[')
            return std::unexpected(
                "wildcards are not supported; a rule covers the path and everything below it");
    }
    std::string out;
    std::string_view rest = path;
    if (path.starts_with("${")) {
        auto close = path.find('}');
        if (close == std::string_view::npos) return std::unexpected("unterminated variable in path");
        std::string_view name = path.substr(2, close - 2);
        if (std::find(std::begin(kVariables), std::end(kVariables), name) == std::end(kVariables))
            return std::unexpected("unknown variable ${" + std::string(name) + "}");
        rest = path.substr(close + 1);
        if (!rest.empty() && rest.front() != '/')
            return std::unexpected("a variable must be a whole path component");
        out.assign(path.substr(0, close + 1));
    } else if (path.front() != '/') {
        return std::unexpected("path must be absolute (start with / or a ${variable})");
    }
    size_t i = 0;
    while (i < rest.size()) {
        while (i < rest.size() && rest[i] == '/') ++i;
        size_t j = rest.find('/', i);
        if (j == std::string_view::npos) j = rest.size();
        std::string_view comp = rest.substr(i, j - i);
        i = j;
        if (comp.empty() || comp == ".") continue;
        if (comp == "..") return std::unexpected("\"..\" is not allowed in paths");
        if (comp.size() > kMaxComponentBytes)
            return std::unexpected("path component is " + std::to_string(comp.size()) +
                                   " bytes; the limit is " + std::to_string(kMaxComponentBytes));
        if (comp.find("${") != std::string_view::npos) {
            if (comp != "${task_id}")
                return std::unexpected(
                    "variables may only start a path (${task_id} may also be a whole component)");
        }
        out += '/';
        out += comp;
    }
    if (out.empty()) out = "/";
    return out;
}

std::string_view path_variable(std::string_view p) {
    if (!p.starts_with("${")) return {};
    auto close = p.find('}');
    return close == std::string_view::npos ? std::string_view{} : p.substr(2, close - 2);
}

bool path_covers(std::string_view ancestor, std::string_view path) {
    if (ancestor == "/") return true;
    if (!path.starts_with(ancestor)) return false;
    return path.size() == ancestor.size() || path[ancestor.size()] == '/';
}

// ---- addresses ----

namespace {

std::expected<std::array<uint8_t, 4>, std::string> parse_v4(std::string_view s) {
    std::array<uint8_t, 4> out{};
    size_t part = 0, i = 0;
    while (true) {
        size_t j = i;
        while (j < s.size() && is_digit(s[j])) ++j;
        if (j == i) return std::unexpected("malformed IPv4 address " + quoted(s));
        if (j - i > 1 && s[i] == '0')
            return std::unexpected("leading zero in IPv4 address " + quoted(s) +
                                   " (ambiguous: octal or decimal?)");
        if (j - i > 3) return std::unexpected("IPv4 address part out of range in " + quoted(s));
        unsigned v = 0;
        for (size_t k = i; k < j; ++k) v = v * 10 + unsigned(s[k] - '0');
        if (v > 255) return std::unexpected("IPv4 address part out of range in " + quoted(s));
        out[part++] = uint8_t(v);
        if (j == s.size()) break;
        if (s[j] != '.' || part == 4) return std::unexpected("malformed IPv4 address " + quoted(s));
        i = j + 1;
    }
    if (part != 4) return std::unexpected("IPv4 address " + quoted(s) + " needs four parts");
    return out;
}

bool looks_v4(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return is_digit(c) || c == '.'; });
}

}  // namespace

std::expected<Cidr, std::string> parse_address(std::string_view s) {
    Cidr c;
    if (s.empty()) return std::unexpected("empty address");
    if (s.find(':') == std::string_view::npos) {
        if (!looks_v4(s)) return std::unexpected("malformed address " + quoted(s));
        auto v4 = parse_v4(s);
        if (!v4) return std::unexpected(v4.error());
        c.addr[10] = 0xff;
        c.addr[11] = 0xff;
        std::copy(v4->begin(), v4->end(), c.addr.begin() + 12);
        c.prefix = 128;
        c.v4 = true;
        return c;
    }
    if (s.find('%') != std::string_view::npos)
        return std::unexpected("zone indexes are not allowed in " + quoted(s));
    if (s.size() > 45) return std::unexpected("malformed IPv6 address " + quoted(s));
    char buf[64];
    std::memcpy(buf, s.data(), s.size());
    buf[s.size()] = 0;
    in6_addr a{};
    if (inet_pton(AF_INET6, buf, &a) != 1) return std::unexpected("malformed IPv6 address " + quoted(s));
    std::memcpy(c.addr.data(), &a, 16);
    c.prefix = 128;
    return c;
}

std::expected<Cidr, std::string> parse_cidr(std::string_view s) {
    auto slash = s.find('/');
    auto addr = parse_address(s.substr(0, slash));
    if (!addr) return addr;
    if (slash == std::string_view::npos) return addr;
    std::string_view pfx = s.substr(slash + 1);
    unsigned max = addr->v4 ? 32 : 128;
    auto n = parse_uint(pfx, max);
    if (!n)
        return std::unexpected("prefix length " + quoted(pfx) + " in " + quoted(s) + ": " + n.error() +
                               " (IPv" + (addr->v4 ? "4" : "6") + " allows 0.." + std::to_string(max) + ")");
    Cidr c = *addr;
    c.prefix = uint8_t(*n + (c.v4 ? 96 : 0));
    for (unsigned bit = c.prefix; bit < 128; ++bit) {
        if (c.addr[bit / 8] & (0x80 >> (bit % 8))) {
            Cidr net = c;
            for (unsigned b = c.prefix; b < 128; ++b) net.addr[b / 8] &= uint8_t(~(0x80 >> (b % 8)));
            std::string shown = format_cidr(net.addr, net.prefix);
            return std::unexpected("host bits set in " + quoted(s) + " (the network is " + shown + ")");
        }
    }
    return c;
}

std::string format_cidr(const std::array<uint8_t, 16>& addr, uint8_t prefix) {
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    char buf[INET6_ADDRSTRLEN] = {};
    if (prefix >= 96 && std::memcmp(addr.data(), kMapped, 12) == 0) {
        inet_ntop(AF_INET, addr.data() + 12, buf, sizeof buf);
        return std::string(buf) + "/" + std::to_string(prefix - 96);
    }
    inet_ntop(AF_INET6, addr.data(), buf, sizeof buf);
    return std::string(buf) + "/" + std::to_string(prefix);
}

bool cidr_contains(const Cidr& outer, const Cidr& inner) {
    if (outer.prefix > inner.prefix) return false;
    for (unsigned bit = 0; bit < outer.prefix; ++bit) {
        uint8_t m = uint8_t(0x80 >> (bit % 8));
        if ((outer.addr[bit / 8] & m) != (inner.addr[bit / 8] & m)) return false;
    }
    return true;
}

std::expected<std::string, std::string> validate_hostname(std::string_view h) {
    std::string host(h);
    if (!host.empty() && host.back() == '.') host.pop_back();
    if (host.empty()) return std::unexpected("empty host name");
    if (host.size() > 253) return std::unexpected("host name longer than 253 characters");
    if (looks_v4(host) || host.find(':') != std::string::npos)
        return std::unexpected(quoted(h) + " is an address, not a host name; use cidr:");
    size_t start = 0;
    std::string_view last_label;
    while (start <= host.size()) {
        size_t dot = host.find('.', start);
        if (dot == std::string::npos) dot = host.size();
        std::string_view label = std::string_view(host).substr(start, dot - start);
        if (label.empty()) return std::unexpected("empty label in host name " + quoted(h));
        if (label.size() > 63) return std::unexpected("label longer than 63 characters in " + quoted(h));
        if (label.front() == '-' || label.back() == '-')
            return std::unexpected("label starts or ends with '-' in " + quoted(h));
        for (char c : label) {
            bool ok = is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
            if (!ok) {
                if (c == '*') return std::unexpected("wildcard host names are not supported: " + quoted(h));
                return std::unexpected("invalid character in host name " + quoted(h));
            }
        }
        last_label = label;
        start = dot + 1;
    }
    if (std::all_of(last_label.begin(), last_label.end(), is_digit))
        return std::unexpected("host name " + quoted(h) + " has an all-numeric top-level label");
    std::transform(host.begin(), host.end(), host.begin(), [](char c) {
        return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c;
    });
    return host;
}

// ---- numbers ----

std::expected<uint64_t, std::string> parse_uint(std::string_view s, uint64_t max) {
    if (s.empty()) return std::unexpected("empty number");
    if (!std::all_of(s.begin(), s.end(), is_digit)) return std::unexpected("not a decimal number");
    if (s.size() > 1 && s[0] == '0') return std::unexpected("leading zero");
    uint64_t v = 0;
    for (char c : s) {
        if (__builtin_mul_overflow(v, 10u, &v) || __builtin_add_overflow(v, uint64_t(c - '0'), &v))
            return std::unexpected("number too large");
    }
    if (v > max) return std::unexpected("out of range (at most " + std::to_string(max) + ")");
    return v;
}

std::expected<PortRange, std::string> parse_port_range(std::string_view s) {
    auto dash = s.find('-');
    auto one = [](std::string_view p) -> std::expected<uint16_t, std::string> {
        auto v = parse_uint(p, 65535);
        if (!v) return std::unexpected("port " + quoted(p) + ": " + v.error() +
                                       (v.error().starts_with("out of range") || v.error() == "number too large"
                                            ? std::string()
                                            : std::string(" (ports are 0..65535)")));
        return uint16_t(*v);
    };
    if (dash == std::string_view::npos) {
        auto p = one(s);
        if (!p) return std::unexpected(p.error());
        return PortRange{*p, *p};
    }
    auto lo = one(s.substr(0, dash));
    if (!lo) return std::unexpected(lo.error());
    auto hi = one(s.substr(dash + 1));
    if (!hi) return std::unexpected(hi.error());
    if (*lo > *hi) return std::unexpected("port range " + quoted(s) + " is reversed");
    return PortRange{*lo, *hi};
}

namespace {

struct Unit {
    std::string_view name;
    uint64_t factor;
};

template <size_t N>
std::expected<uint64_t, std::string> parse_with_units(std::string_view s, const Unit (&units)[N],
                                                      std::string_view what, std::string_view example) {
    size_t i = 0;
    while (i < s.size() && is_digit(s[i])) ++i;
    std::string_view num = s.substr(0, i), unit = s.substr(i);
    if (num.empty())
        return std::unexpected(std::string(what) + " " + quoted(s) + " must be a whole number with a unit, e.g. " +
                               std::string(example));
    const Unit* u = nullptr;
    for (const auto& cand : units)
        if (cand.name == unit) u = &cand;
    if (!u) {
        std::string list;
        for (const auto& cand : units) list += (list.empty() ? "" : ", ") + std::string(cand.name);
        if (unit.empty())
            return std::unexpected(std::string(what) + " " + quoted(s) + " needs a unit (" + list + ")");
        return std::unexpected("unknown unit " + quoted(unit) + " in " + quoted(s) + " (" + list + ")");
    }
    auto v = parse_uint(num, UINT64_MAX);
    if (!v) return std::unexpected(std::string(what) + " " + quoted(s) + ": " + v.error());
    uint64_t out = 0;
    if (__builtin_mul_overflow(*v, u->factor, &out))
        return std::unexpected(std::string(what) + " " + quoted(s) + " does not fit in 64 bits");
    return out;
}

}  // namespace

std::expected<uint64_t, std::string> parse_size(std::string_view s) {
    static constexpr Unit units[] = {{"B", 1},           {"KiB", 1ull << 10}, {"MiB", 1ull << 20},
                                     {"GiB", 1ull << 30}, {"TiB", 1ull << 40}, {"KB", 1000ull},
                                     {"MB", 1000000ull}, {"GB", 1000000000ull}, {"TB", 1000000000000ull}};
    return parse_with_units(s, units, "size", "256MiB");
}

std::expected<uint64_t, std::string> parse_duration_ms(std::string_view s) {
    static constexpr Unit units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    return parse_with_units(s, units, "duration", "30s");
}

std::expected<uint32_t, std::string> parse_percent(std::string_view s) {
    if (!s.ends_with('%')) return std::unexpected("percentage " + quoted(s) + " must end with %, e.g. 50%");
    auto v = parse_uint(s.substr(0, s.size() - 1), UINT32_MAX);
    if (!v) return std::unexpected("percentage " + quoted(s) + ": " + v.error());
    return uint32_t(*v);
}

std::expected<void, size_t> check_utf8(std::string_view text) {
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    size_t n = text.size(), i = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) {
            ++i;
            continue;
        }
        size_t len;
        uint32_t cp;
        if ((c & 0xe0) == 0xc0) {
            len = 2;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4;
            cp = c & 0x07;
        } else {
            return std::unexpected(i);
        }
        if (i + len > n) return std::unexpected(i);
        for (size_t k = 1; k < len; ++k) {
            if ((p[i + k] & 0xc0) != 0x80) return std::unexpected(i);
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return std::unexpected(i);
        i += len;
    }
    return {};
}

bool valid_tool_name(std::string_view t) {
    if (t.empty() || t.size() > 64) return false;
    auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
    if (!alnum(t.front())) return false;
    return std::all_of(t.begin(), t.end(), [&](char c) { return alnum(c) || c == '.' || c == '_' || c == '+' || c == '-'; });
}

}  // namespace bulwark::policy
