#pragma once
// The policy compiler's public API: rule file -> Bundle, with diagnostics.
#include <cstdint>
#include <expected>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "bulwark/policy/bundle.h"
#include "bulwark/policy/compile_inputs.h"
#include "bulwark/policy/diagnostics.h"
#include "bulwark/policy/seccomp.h"

namespace bulwark::policy {

// Input limits (the bad-input battery): all are checked before or while
// parsing and fail the compile with a diagnostic.
struct InputLimits {
    size_t max_file_bytes = 4u << 20;   // 4 MiB
    size_t max_string_bytes = 4096;     // any scalar except `description`
    size_t max_description_bytes = 1024;
    uint32_t max_nesting = 32;          // YAML block/flow nesting levels
    size_t max_nodes = 2'000'000;       // YAML nodes visited (aliases count each time)
    uint32_t max_extends_depth = 8;
};

using SeccompCompiler = std::function<std::expected<SeccompPlan, SeccompError>(const SeccompSpec&)>;

struct CompileOptions {
    // Directories searched for `extends:` names (<dir>/<name>.yaml) and
    // `syscalls.baseline.import` files, in order. compile_file() appends the
    // rule file's own directory when this is empty.
    std::vector<std::string> rules_dirs;
    InputLimits limits;
    // The seccomp emitter; empty means compile_seccomp() from seccomp.h.
    SeccompCompiler seccomp_compiler;
    // Diagnostics with Severity::Warning count as errors.
    bool warnings_as_errors = false;
    // Where `libraries: auto` finds the binaries and their shared libraries:
    // "" for this host's root, else a root filesystem (a container's) that
    // the rule file's paths are inside of.
    std::string library_root;
    // When set, every answer the compile takes from the filesystem besides
    // the rule files' text (which rule file a search finds, the library
    // search, ld.so.conf) is noted here (compile_inputs.h).
    InputLog* inputs = nullptr;
};

struct CompileResult {
    std::optional<Bundle> bundle;
    std::vector<Diagnostic> diagnostics;
    SourceMap sources;                   // every file read (the rule file and its bases)
    std::optional<SeccompSpec> seccomp;  // the parsed `syscalls:` section
    bool ok() const { return bundle.has_value(); }
};

CompileResult compile_file(const std::string& path, const CompileOptions& opts);
CompileResult compile_string(std::string_view text, std::string file_name, const CompileOptions& opts);

std::string render_diagnostics(const CompileResult& result);

// Parses only (input checks, YAML, keys and value types): the diagnostics.
std::vector<Diagnostic> check_syntax(std::string_view text, const std::string& file_name,
                                     const InputLimits& limits = {});

// Canonical JSON (sorted keys, ASCII only, no whitespace when dumped with
// canonical_dump) and its content hash, "sha256:<hex>", computed with the
// `hash` field emptied.
nlohmann::json bundle_to_json(const Bundle& bundle);
std::expected<Bundle, std::string> bundle_from_json(const nlohmann::json& json);
// The same without recomputing the content hash (half the time of a
// reading): for JSON this program wrote itself and checked by other means
// (the bundle cache's own checksum).
std::expected<Bundle, std::string> bundle_from_own_json(const nlohmann::json& json);
std::string canonical_dump(const nlohmann::json& json);
std::string bundle_hash(const Bundle& bundle);

// The vocabulary the parser accepts: section -> keys ("" is the top level).
// The JSON schema test checks the schema against it.
const std::vector<std::pair<std::string, std::vector<std::string>>>& accepted_keys();

}  // namespace bulwark::policy
