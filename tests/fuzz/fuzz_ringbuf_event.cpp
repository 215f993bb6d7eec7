// libFuzzer target: any bytes as one ring-buffer record of the BPF programs
// (bw_events, bpf/include/bulwark_abi.h), read the way RingbufReader's
// on_sample does (a record shorter than bw_event is counted as malformed,
// a longer one is cut) and turned into the audit record the BPF runtime
// stores and streams (agentd/audit/audit_record.cpp: decision_from_event,
// render_object, to_json) for a run whose policy is a compiled rule file,
// so the event's rule id is looked up in a real bundle. Invariants beyond
// "no crash, no sanitizer report": the record's JSON always serialises
// (invalid UTF-8 in a path or comm replaced, never thrown), and names the
// rule only when the bundle has that rule id.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <nlohmann/json.hpp>

#include "audit/audit_record.h"
#include "bulwark/policy/bundle.h"
#include "bulwark/policy/compiler.h"

using namespace bulwark;

namespace {
std::shared_ptr<const policy::Bundle> bundle() {
    static const auto b = [] {
        auto r = policy::compile_string(R"(tool: box
binaries: [/bin/busybox]
files:
  read: [/usr, /etc]
  deny: [/etc/shadow]
exec:
  allow: [/bin/busybox]
network:
  connect:
    - { cidr: 10.0.0.0/8, ports: ["80-443"] }
)",
                                        "box.yaml", policy::CompileOptions{});
        if (!r.bundle) std::abort();
        return std::make_shared<const policy::Bundle>(std::move(*r.bundle));
    }();
    return b;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < sizeof(bw_event)) return 0;  // on_sample: malformed, counted, dropped
    bw_event ev;
    std::memcpy(&ev, data, sizeof ev);
    RunContext ctx;
    ctx.task_id = 1;
    ctx.run_id = 2;
    ctx.tool = "box";
    ctx.bundle = bundle();
    if (size > sizeof ev && data[sizeof ev] & 1)
        ctx.container = std::make_shared<const nlohmann::json>(nlohmann::json{{"id", "c1"}});
    auto r = audit::decision_from_event(ev, ctx, 0);
    if (!r.rule_file.empty() && !bundle()->rule(ev.rule_id)) std::abort();
    auto j = audit::to_json(r);
    (void)j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    (void)audit::render_object(ev);
    return 0;
}
