#pragma once
// A small std::format stand-in for the seccomp and cBPF sources (GCC 12 has
// no <format>): "{}" placeholders in order, "{:#x}" / "{:#06x}" for hex.
#include <cstdint>
#include <iomanip>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

namespace bulwark::policy::detail {

inline void format_one(std::ostringstream& os, std::string_view spec, const auto& v) {
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_integral_v<T>) {
        if (spec.find('x') != std::string_view::npos) {
        size_t width = 0;
        for (char c : spec)
            if (c >= '0' && c <= '9') width = width * 10 + static_cast<size_t>(c - '0');
        std::ostringstream hex;
        hex << std::hex << +v;
        std::string digits = hex.str();
        if (width > 2 && digits.size() < width - 2) digits.insert(0, width - 2 - digits.size(), '0');
        os << "0x" << digits;
        } else {
            os << +v;
        }
    } else {
        os << v;
    }
}

template <class... Args>
std::string format(std::string_view pattern, const Args&... args) {
    std::ostringstream os;
    size_t pos = 0;
    auto next = [&](const auto& v) {
        size_t open = pattern.find('{', pos);
        size_t close = open == std::string_view::npos ? open : pattern.find('}', open);
        if (close == std::string_view::npos) return;
        os << pattern.substr(pos, open - pos);
        std::string_view spec = pattern.substr(open + 1, close - open - 1);
        format_one(os, spec, v);
        pos = close + 1;
    };
    (next(args), ...);
    os << pattern.substr(pos);
    return os.str();
}

}  // namespace bulwark::policy::detail
