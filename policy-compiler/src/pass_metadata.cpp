// tool, description, mode, mandatory layers and binaries.
#include <algorithm>

#include "bulwark/policy/values.h"
#include "passes.h"

namespace bulwark::policy {
namespace {

const std::vector<std::string> kLayers = {"seccomp", "landlock", "bpf-lsm", "sock-addr", "namespaces", "cgroup"};

void run_metadata(CompileContext& ctx) {
    auto& a = ctx.ast;
    auto& b = ctx.bundle;
    if (!a.tool) {
        ctx.error({{ctx.main_file, 0, 0}, 1}, "missing-key", "rule file has no \"tool\"",
                  {"add `tool: <name>` naming the tool these rules are for"});
    } else if (!valid_tool_name(a.tool->value)) {
        ctx.error(a.tool->span, "bad-tool", "invalid tool name \"" + a.tool->value + "\"",
                  {"tool names match [a-z0-9][a-z0-9._+-]{0,63}"});
    } else {
        b.tool = a.tool->value;
    }
    if (a.description) b.description = a.description->value;
    if (a.mode) {
        if (a.mode->value == "enforce") b.mode = Mode::Enforce;
        else if (a.mode->value == "audit") b.mode = Mode::Audit;
        else {
            std::vector<std::string> hints;
            if (auto m = closest_match(a.mode->value, {"enforce", "audit"}); !m.empty())
                hints.push_back("did you mean \"" + m + "\"?");
            hints.push_back("mode is enforce or audit");
            ctx.error(a.mode->span, "bad-mode", "unknown mode \"" + a.mode->value + "\"", std::move(hints));
        }
    }
    for (const auto& m : a.mandatory) {
        if (std::find(kLayers.begin(), kLayers.end(), m.value) == kLayers.end()) {
            std::vector<std::string> hints;
            if (auto c = closest_match(m.value, kLayers); !c.empty()) hints.push_back("did you mean \"" + c + "\"?");
            hints.push_back("layers: seccomp, landlock, bpf-lsm, sock-addr, namespaces, cgroup");
            ctx.error(m.span, "unknown-layer", "unknown layer \"" + m.value + "\"", std::move(hints));
            continue;
        }
        if (std::find(b.mandatory_layers.begin(), b.mandatory_layers.end(), m.value) == b.mandatory_layers.end())
            b.mandatory_layers.push_back(m.value);
    }
    std::sort(b.mandatory_layers.begin(), b.mandatory_layers.end());
    for (const auto& bin : a.binaries) {
        if (bin.libraries) ctx.check_choice(*bin.libraries, {"auto", "none"}, "binaries.libraries");
        if (bin.path.value.starts_with("${")) {
            ctx.error(bin.path.span, "bad-path", "binary paths must be absolute, without variables");
            continue;
        }
        auto p = normalise_path(bin.path.value);
        if (!p) {
            ctx.error(bin.path.span, "bad-path", p.error());
            continue;
        }
        if (*p == "/") {
            ctx.error(bin.path.span, "bad-path", "\"/\" is not a binary");
            continue;
        }
        Binary out{*p, std::nullopt, bin.rule_id};
        if (bin.sha256) {
            std::string h = bin.sha256->value;
            bool hex = h.size() == 64 && std::all_of(h.begin(), h.end(), [](char c) { return std::isxdigit(uint8_t(c)); });
            if (!hex) {
                ctx.error(bin.sha256->span, "bad-sha256", "sha256 must be 64 hexadecimal digits");
                continue;
            }
            std::transform(h.begin(), h.end(), h.begin(), [](char c) { return char(std::tolower(uint8_t(c))); });
            out.sha256 = h;
        }
        b.binaries.push_back(std::move(out));
    }
}

}  // namespace

Pass metadata_pass() { return {"metadata", run_metadata, false}; }

}  // namespace bulwark::policy
