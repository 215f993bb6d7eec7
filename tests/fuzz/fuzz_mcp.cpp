// libFuzzer target: JSON-RPC 2.0 lines from an MCP client into `agentd mcp`'s
// server (agentd/mcp/mcp_server.cpp), over a fake daemon API that creates
// tasks and answers execs, so a fuzzed session gets past `initialize` into
// tools/list, tools/call, cancellations and their results. The input is
// the lines of one session ('\n'-separated; the first is prefixed with an
// initialize when it does not parse). Invariants beyond "no crash, no
// sanitizer report": every response is one line of valid JSON-RPC 2.0
// (an object with jsonrpc, id and exactly one of result and error; a
// batch's, a non-empty array of them).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "mcp/mcp_server.h"

using nlohmann::json;
using bulwark::AgentdError;
using bulwark::AgentdReply;

namespace {

std::expected<AgentdReply, AgentdError> fake_daemon(std::string_view m, std::string_view t,
                                                   const std::optional<json>& body) {
    auto reply = [](int status, json b) {
        return AgentdReply{status, b, b.dump(-1, ' ', false, json::error_handler_t::replace)};
    };
    std::string target(t);
    if (m == "GET" && target == "/v1/tools")
        return reply(200, {{"tools",
                            {{{"name", "sh"}, {"description", "a shell"}, {"binaries", {"/usr/bin/dash"}}},
                             {{"name", "cat"}, {"description", "cat"}, {"binaries", {"/bin/cat"}}}}}});
    if (m == "GET" && target.ends_with("/explain")) return reply(200, {{"text", "policy"}});
    if (m == "POST" && target == "/v1/tasks") return reply(201, {{"id", 7}, {"workdir", "/nonexistent-bulwark-fuzz/7"}});
    if (m == "POST" && target.ends_with("/exec")) {
        // an exec result echoing parts of the request, as the daemon's does
        json args = body ? *body : json::object();
        return reply(200, {{"task_id", 7}, {"run_id", 1}, {"outcome", "denied"}, {"exit_status", 1},
                           {"stdout", args.value("stdin", std::string())}, {"stderr", "\xff\xfe not utf-8"},
                           {"denials", {{{"layer", "landlock"}, {"op", "file_open"}, {"object", "/etc/shadow"},
                                         {"rule", {{"file", "sh.yaml"}, {"line", 3}, {"text", "deny: /etc"}}}}}}});
    }
    if (m == "POST" && target.ends_with("/cancel")) return reply(200, json::object());
    if (m == "DELETE") return reply(200, json::object());
    return reply(404, {{"error", {{"code", "not_found"}, {"message", target}}}});
}

void check_message(const json& r) {
    if (!r.is_object() || !r.contains("jsonrpc") || r["jsonrpc"] != "2.0" || !r.contains("id")) std::abort();
    if (r.contains("result") == r.contains("error")) std::abort();
}

void check_response(const std::optional<std::string>& out) {
    if (!out) return;
    if (out->find('\n') != std::string::npos) std::abort();
    json r = json::parse(*out, nullptr, false);
    if (r.is_discarded()) std::abort();
    if (r.is_array()) {  // a batch's responses (2025-03-26)
        if (r.empty()) std::abort();
        for (const auto& m : r) check_message(m);
    } else {
        check_message(r);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    bulwark::mcp::Options opts;
    opts.reconnect_wait = std::chrono::milliseconds(0);
    bulwark::mcp::Server server(fake_daemon, opts);
    std::string_view in(reinterpret_cast<const char*>(data), size);
    bool first = true;
    while (!in.empty()) {
        size_t nl = in.find('\n');
        std::string_view line = in.substr(0, nl);
        in = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
        if (first && json::parse(line, nullptr, false).is_discarded())
            check_response(server.handle_line(
                R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}})"));
        first = false;
        check_response(server.handle_line(line));
    }
    (void)server.close();
    // the result texts alone, on whatever JSON the input is
    json any = json::parse(std::string_view(reinterpret_cast<const char*>(data), size), nullptr, false);
    if (!any.is_discarded()) {
        (void)bulwark::mcp::describe_exec("sh", any);
        (void)bulwark::mcp::exec_failed(any);
    }
    return 0;
}
