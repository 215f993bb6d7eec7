// microvm: whether the tool runs in a VM of its own, with how much memory and
// how many vCPUs, and whether that VM must be a confidential guest.
#include "passes.h"

namespace bulwark::policy {
namespace {

constexpr uint64_t kMinMemory = 128ull << 20;  // the guest kernel and agent need ~100 MiB
constexpr uint64_t kMaxMemory = 64ull << 30;
constexpr uint64_t kMaxVcpus = 64;

void run_microvm(CompileContext& ctx) {
    auto& m = ctx.bundle.microvm;
    const ast::Scalar* mode = nullptr;
    const ast::Scalar* confidential = nullptr;
    for (const auto& [name, s] : ctx.ast.microvm) {
        if (name == "mode") {
            if (!ctx.check_choice(s, {"off", "preferred", "required"}, "microvm mode")) continue;
            m.mode = s.value == "off" ? MicroVmMode::Off : s.value == "preferred" ? MicroVmMode::Preferred
                                                                                  : MicroVmMode::Required;
            mode = &s;
        } else if (name == "memory") {
            auto v = parse_size(s.value);
            if (!v) {
                ctx.error(s.span, "bad-limit", v.error(), {"sizes are whole numbers with MiB or GiB, e.g. 256MiB"});
                continue;
            }
            if (*v < kMinMemory || *v > kMaxMemory || *v % (1ull << 20)) {
                ctx.error(s.span, "bad-limit", "microvm.memory " + s.value + " is not a whole number of MiB from 128MiB to 64GiB",
                          {"the guest kernel and the Bulwark agent need about 100 MiB of it"});
                continue;
            }
            m.memory_bytes = *v;
        } else if (name == "vcpus") {
            auto v = parse_uint(s.value, kMaxVcpus);
            if (!v || *v == 0) {
                ctx.error(s.span, "bad-limit", "microvm.vcpus \"" + s.value + "\" is not a whole number from 1 to 64");
                continue;
            }
            m.vcpus = uint32_t(*v);
        } else if (name == "confidential") {
            if (!ctx.check_choice(s, {"off", "required"}, "microvm confidential setting")) continue;
            m.confidential = s.value == "required";
            confidential = &s;
        }
        m.rule_ids.emplace_back(name, s.rule_id);
    }
    if (!m.confidential) return;
    // A secret must never run unprotected: confidential means a VM or no run.
    if (mode && m.mode != MicroVmMode::Required) {
        ctx.error(mode->span, "confidential-needs-vm",
                  "microvm.confidential: required needs microvm.mode: required, not " + mode->value,
                  {"a confidential tool never falls back to a plain VM or the host sandbox",
                   "leave mode out (it then defaults to required) or write mode: required"});
        return;
    }
    if (!mode) m.rule_ids.emplace_back("mode", confidential->rule_id);
    m.mode = MicroVmMode::Required;
}

}  // namespace

Pass microvm_pass() { return {"microvm", run_microvm, false}; }

}  // namespace bulwark::policy
