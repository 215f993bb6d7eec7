// profile: how many recorded runs the tool's profile learns from before it
// scores, and what a finding does besides its record (docs/profiles.md).
#include "passes.h"

namespace bulwark::policy {

std::string_view response_name(ProfileResponse r) {
    switch (r) {
        case ProfileResponse::Record: return "record";
        case ProfileResponse::RequireGrant: return "require-grant";
        case ProfileResponse::Stop: return "stop";
        case ProfileResponse::Narrow: return "narrow";
    }
    return "record";
}

namespace {

constexpr uint64_t kMinLearn = 3;  // fewer runs make every variation a finding
constexpr uint64_t kMaxLearn = 100000;

void run_profile(CompileContext& ctx) {
    auto& p = ctx.bundle.profile;
    for (const auto& [name, s] : ctx.ast.profile) {
        p.enabled = true;
        if (name == "learn" || name == "task_learn") {
            auto v = parse_uint(s.value, kMaxLearn);
            if (!v || *v < kMinLearn) {
                ctx.error(s.span, "bad-limit",
                          "profile." + name + " \"" + s.value + "\" is not a whole number of runs from 3 to 100000",
                          {name == "learn" ? "the runs recorded before the profile scores; fewer than 3 make every "
                                             "variation unusual"
                                           : "the runs of the tool in one task before the task's own profile scores; "
                                             "fewer than 3 make every variation unusual"});
                continue;
            }
            (name == "learn" ? p.learn_runs : p.task_learn_runs) = uint32_t(*v);
        } else if (name == "respond") {
            if (!ctx.check_choice(s, {"record", "narrow", "require-grant", "stop"}, "profile response")) continue;
            p.respond = s.value == "stop"            ? ProfileResponse::Stop
                        : s.value == "require-grant" ? ProfileResponse::RequireGrant
                        : s.value == "narrow"        ? ProfileResponse::Narrow
                                                     : ProfileResponse::Record;
        }
        p.rule_ids.emplace_back(name, s.rule_id);
    }
}

}  // namespace

Pass profile_pass() { return {"profile", run_profile, false}; }

}  // namespace bulwark::policy
