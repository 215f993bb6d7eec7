#include "bulwark/policy/match.h"

#include <arpa/inet.h>

#include <vector>

namespace bulwark::policy {

std::expected<std::string, std::string> resolve_operation_path(std::string_view path) {
    if (path.empty()) return std::unexpected(std::string("empty path"));
    if (path.front() != '/')
        return std::unexpected("'" + std::string(path) + "' is not an absolute path");
    if (path.find('\0') != std::string_view::npos)
        return std::unexpected(std::string("path contains a NUL byte"));
    std::vector<std::string_view> parts;
    size_t i = 0;
    while (i < path.size()) {
        while (i < path.size() && path[i] == '/') ++i;
        size_t j = i;
        while (j < path.size() && path[j] != '/') ++j;
        std::string_view comp = path.substr(i, j - i);
        i = j;
        if (comp.empty() || comp == ".") continue;
        if (comp == "..") {
            if (!parts.empty()) parts.pop_back();
            continue;
        }
        parts.push_back(comp);
    }
    if (parts.empty()) return std::string("/");
    std::string out;
    for (auto p : parts) {
        out += '/';
        out += p;
    }
    return out;
}

size_t path_depth(std::string_view p) {
    size_t n = 0;
    for (size_t i = 0; i < p.size(); ++i)
        if (p[i] == '/' && i + 1 < p.size()) ++n;
    return n;
}

std::optional<Addr16> parse_ip(std::string_view text) {
    std::string s(text);
    Addr16 out{};
    in_addr v4{};
    if (inet_pton(AF_INET, s.c_str(), &v4) == 1) {
        out[10] = 0xff;
        out[11] = 0xff;
        const auto* b = reinterpret_cast<const uint8_t*>(&v4.s_addr);
        for (int k = 0; k < 4; ++k) out[12 + k] = b[k];
        return out;
    }
    in6_addr v6{};
    if (inet_pton(AF_INET6, s.c_str(), &v6) == 1) {
        for (int k = 0; k < 16; ++k) out[k] = v6.s6_addr[k];
        return out;
    }
    return std::nullopt;
}

bool is_v4_mapped(const Addr16& a) {
    for (int k = 0; k < 10; ++k)
        if (a[k] != 0) return false;
    return a[10] == 0xff && a[11] == 0xff;
}

bool prefix_contains(const Addr16& net, uint8_t prefix, const Addr16& addr) {
    if (prefix > 128) return false;
    unsigned full = prefix / 8, rest = prefix % 8;
    for (unsigned k = 0; k < full; ++k)
        if (net[k] != addr[k]) return false;
    if (rest == 0) return true;
    uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
    return (net[full] & mask) == (addr[full] & mask);
}

std::string format_addr(const Addr16& a) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (is_v4_mapped(a)) {
        inet_ntop(AF_INET, a.data() + 12, buf, sizeof buf);
    } else {
        inet_ntop(AF_INET6, a.data(), buf, sizeof buf);
    }
    return buf;
}

bool is_loopback(const Addr16& a) {
    if (is_v4_mapped(a)) return a[12] == 127;
    for (int k = 0; k < 15; ++k)
        if (a[k] != 0) return false;
    return a[15] == 1;
}

}  // namespace bulwark::policy
