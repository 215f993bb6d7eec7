// libFuzzer target: the JSON bodies of the task routes as an API client
// sends them (agentd/api/task_requests.cpp: exec, create, grant update,
// cancel, record ranges; agentd/tasks/grant_json.cpp: the grant language;
// the working files and W3C traceparent an exec carries). The first byte
// picks the route (and, for an exec, whether a traceparent header comes
// too), the rest is the body. Invariants beyond "no crash, no sanitizer
// report": an accepted exec has a non-empty argv without NUL bytes; an
// accepted grant, applied to a tool's instantiated rules (apply_grant),
// either is refused or allows no file right the tool's rules do not.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/task_requests.h"
#include "common/json_input.h"
#include "bulwark/policy/compiler.h"
#include "bulwark/policy/grants.h"
#include "bulwark/policy/instantiate.h"
#include "tasks/grant_json.h"

using nlohmann::json;
using namespace bulwark::policy;

namespace {
const char* kTool = R"(tool: box
binaries: [/bin/busybox]
files:
  read: ["${workdir}", /usr, /etc]
  write: ["${workdir}"]
  create: ["${workdir}"]
  deny: ["${workdir}/.git", /etc/shadow]
exec:
  allow: [/bin/busybox]
network:
  connect:
    - { host: api.example.org, ports: [443], proto: tcp }
    - { cidr: 10.0.0.0/8, ports: ["80-443"] }
limits:
  memory: 64MiB
  pids: 8
  timeout: 60s
)";

// No DNS in a fuzzer: every name is one documentation address.
const Resolver kResolve = [](std::string_view) -> std::expected<std::vector<std::string>, std::string> {
    return std::vector<std::string>{"192.0.2.1"};
};

const TaskVars& vars() {
    static const TaskVars v = task_vars("/work/t1", "task-1", "/home/agent");
    return v;
}

const Bundle& tool_bundle() {
    static const Bundle b = [] {
        auto r = compile_string(kTool, "box.yaml", CompileOptions{});
        if (!r.bundle) std::abort();
        auto i = instantiate(*r.bundle, vars(), kResolve);
        if (!i) std::abort();
        return *i;
    }();
    return b;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const uint8_t route = data[0];
    std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    // The server's own reading of a body (agentd/api/http_tasks.cpp): text that
    // is not JSON, or nested too deep, is a 400 before any route sees it.
    auto parsed = bulwark::parse_peer_json(text);
    if (!parsed) return 0;
    const json& body = *parsed;
    switch (route % 6) {
    case 0:
    case 1: {
        std::optional<std::string_view> header;
        if (route % 6 == 1) header = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        auto r = bulwark::http::parse_exec(body, header);
        if (r) {
            if (r->argv.empty()) std::abort();
            for (const auto& a : r->argv)
                if (a.find('\0') != std::string::npos) std::abort();
        }
        break;
    }
    case 2:
        (void)bulwark::http::parse_create_task(body);
        break;
    case 3:
        (void)bulwark::http::parse_grant_update(body);
        (void)bulwark::http::parse_cancel(body);
        break;
    case 4:
        (void)bulwark::http::parse_record_range(body, {"limit", "format"});
        break;
    case 5: {
        auto g = bulwark::grant_from_json(body, vars());
        if (!g) break;
        auto n = apply_grant(tool_bundle(), *g, Clock::time_point{} + std::chrono::hours(1000), kResolve);
        if (!n) break;
        for (const char* p : {"/work/t1", "/work/t1/out", "/work/t1/.git/config", "/etc/passwd", "/etc/shadow",
                              "/usr/bin/x", "/home/agent/.ssh/id_ed25519", "/"})
            if (effective_file_rights(n->bundle, p) & ~effective_file_rights(tool_bundle(), p)) std::abort();
        break;
    }
    }
    return 0;
}
