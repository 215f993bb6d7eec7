// limits: sizes, counts, percentages and durations, each checked to fit its
// field; 0 is rejected (it would disable the limit).
#include "passes.h"

namespace bulwark::policy {
namespace {

constexpr uint64_t kPidMax = 4194304;        // PID_MAX_LIMIT
constexpr uint64_t kOpenFilesMax = 1048576;  // default fs.nr_open
constexpr uint32_t kCpuPercentMax = 100 * 1024;

void run_limits(CompileContext& ctx) {
    auto& L = ctx.bundle.limits;
    for (const auto& [name, s] : ctx.ast.limits) {
        std::expected<uint64_t, std::string> v = std::unexpected(std::string());
        std::string hint;
        if (name == "memory" || name == "output" || name == "file_size") {
            v = parse_size(s.value);
            hint = "sizes are whole numbers with B, KiB, MiB, GiB, TiB (or KB, MB, GB, TB), e.g. 256MiB";
        } else if (name == "timeout") {
            v = parse_duration_ms(s.value);
            hint = "durations are whole numbers with ms, s, m or h, e.g. 30s";
        } else if (name == "cpu") {
            auto p = parse_percent(s.value);
            if (p && *p > kCpuPercentMax) p = std::unexpected("cpu " + s.value + " is more than 1024 CPUs");
            v = p ? std::expected<uint64_t, std::string>(*p) : std::unexpected(p.error());
            hint = "cpu is a percentage of one CPU, e.g. 50% or 200%";
        } else {
            uint64_t max = name == "pids" ? kPidMax : kOpenFilesMax;
            v = parse_uint(s.value, max);
            if (!v) v = std::unexpected("limits." + name + " \"" + s.value + "\": " + v.error());
            hint = "limits." + name + " is a whole number from 1 to " + std::to_string(max);
        }
        if (!v) {
            ctx.error(s.span, "bad-limit", v.error(), {hint});
            continue;
        }
        if (*v == 0) {
            ctx.error(s.span, "zero-limit", "limits." + name + " of 0 would disable the limit",
                      {"leave the key out for no limit, or give a positive value"});
            continue;
        }
        if (name == "memory") L.memory_bytes = *v;
        else if (name == "pids") L.pids = *v;
        else if (name == "cpu") L.cpu_percent = uint32_t(*v);
        else if (name == "timeout") L.timeout_ms = *v;
        else if (name == "output") L.output_bytes = *v;
        else if (name == "file_size") L.file_size_bytes = *v;
        else if (name == "open_files") L.open_files = *v;
        L.rule_ids.emplace_back(name, s.rule_id);
    }
}

}  // namespace

Pass limits_pass() { return {"limits", run_limits, false}; }

}  // namespace bulwark::policy
