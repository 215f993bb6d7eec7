// Diagnostic rendering (compiler-style text and JSON) and did-you-mean.
#include "bulwark/policy/diagnostics.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace bulwark::policy {

std::string_view severity_name(Severity s) {
    switch (s) {
        case Severity::Error: return "error";
        case Severity::Warning: return "warning";
        case Severity::Note: return "note";
    }
    return "error";
}

namespace {

// The 1-based line `line` of `text`, without its newline.
std::string_view source_line(std::string_view text, uint32_t line) {
    size_t start = 0;
    for (uint32_t l = 1; l < line; ++l) {
        size_t nl = text.find('\n', start);
        if (nl == std::string_view::npos) return {};
        start = nl + 1;
    }
    size_t end = text.find('\n', start);
    std::string_view out = text.substr(start, end == std::string_view::npos ? text.size() - start : end - start);
    if (!out.empty() && out.back() == '\r') out.remove_suffix(1);
    return out;
}

}  // namespace

// Appends piece by piece: GCC 12 at -O3 reports a false -Wrestrict overlap on
// chains of std::string temporaries (`":" + std::to_string(n) + ...`).
std::string render_diagnostic(const Diagnostic& d, const SourceMap& sources) {
    std::string out = d.loc.file;
    if (d.loc.line > 0) {
        out += ':';
        out += std::to_string(d.loc.line);
        out += ':';
        out += std::to_string(d.loc.col);
    }
    out += ": ";
    out += severity_name(d.severity);
    out += ": ";
    out += d.message;
    out += '\n';
    if (d.loc.line > 0) {
        auto it = sources.find(d.loc.file);
        if (it != sources.end()) {
            std::string_view line = source_line(it->second, d.loc.line);
            if (!line.empty() && line.size() <= 512) {
                const std::string num = std::to_string(d.loc.line);
                out += ' ';
                out += num;
                out += " | ";
                out += line;
                out += "\n ";
                out.append(num.size(), ' ');
                out += " | ";
                size_t col = d.loc.col ? d.loc.col - 1 : 0;
                for (size_t i = 0; i < col && i < line.size(); ++i) out += line[i] == '\t' ? '\t' : ' ';
                size_t len = std::max<size_t>(1, d.length);
                if (col < line.size()) len = std::min(len, line.size() - col);
                else len = 1;
                out += '^';
                out.append(len - 1, '~');
                out += '\n';
            }
        }
    }
    for (const auto& h : d.hints) {
        out += "hint: ";
        out += h;
        out += '\n';
    }
    return out;
}

std::string render_diagnostics(const std::vector<Diagnostic>& diags, const SourceMap& sources) {
    std::string out;
    for (const auto& d : diags) out += render_diagnostic(d, sources);
    return out;
}

nlohmann::json diagnostics_to_json(const std::vector<Diagnostic>& diags) {
    auto arr = nlohmann::json::array();
    for (const auto& d : diags) {
        arr.push_back({{"severity", severity_name(d.severity)},
                       {"file", d.loc.file},
                       {"line", d.loc.line},
                       {"col", d.loc.col},
                       {"length", d.length},
                       {"message", d.message},
                       {"hints", d.hints},
                       {"code", d.code}});
    }
    return arr;
}

size_t count_errors(const std::vector<Diagnostic>& diags) {
    return size_t(std::count_if(diags.begin(), diags.end(),
                                [](const Diagnostic& d) { return d.severity == Severity::Error; }));
}

size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
        }
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
    if (word.size() > 64) return {};
    size_t limit = std::max<size_t>(1, std::min<size_t>(3, (word.size() + 2) / 3));
    size_t best = limit + 1;
    std::string out;
    for (const auto& c : candidates) {
        if (c.size() > word.size() + limit || c.size() + limit < word.size()) continue;
        size_t d = edit_distance(word, c);
        if (d < best) {
            best = d;
            out = c;
        }
    }
    return out;
}

}  // namespace bulwark::policy
