#pragma once
// Compiler diagnostics: every user mistake becomes one of these, carrying the
// source location, printed compiler-style:
//
//   rules/curl.yaml:14:7: error: unknown syscall "ptrce"
//      14 |     - ptrce
//         |       ^~~~~
//   hint: did you mean "ptrace"?
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "bulwark/policy/bundle.h"

namespace bulwark::policy {

enum class Severity : uint8_t { Error, Warning, Note };

struct Diagnostic {
    Severity severity = Severity::Error;
    SourceLoc loc;             // line/col 0: the file as a whole
    uint32_t length = 1;       // underlined columns from loc.col
    std::string message;
    std::vector<std::string> hints;
    std::string code;          // stable identifier, e.g. "unknown-key"
};

// File name -> full text, used to print the offending source line.
using SourceMap = std::map<std::string, std::string, std::less<>>;

std::string_view severity_name(Severity s);
std::string render_diagnostic(const Diagnostic& d, const SourceMap& sources);
std::string render_diagnostics(const std::vector<Diagnostic>& diags, const SourceMap& sources);
nlohmann::json diagnostics_to_json(const std::vector<Diagnostic>& diags);

size_t count_errors(const std::vector<Diagnostic>& diags);

// Levenshtein distance, and the closest candidate within a distance that
// scales with the word (empty when nothing is close).
size_t edit_distance(std::string_view a, std::string_view b);
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace bulwark::policy
