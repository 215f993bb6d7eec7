#pragma once
// The Model Context Protocol server of `agentd mcp`: JSON-RPC 2.0 messages
// in, responses out, with no transport of its own (cmd_mcp.cpp puts it on
// stdio), so it is testable line by line.
//
// An MCP session is one Bulwark task: `initialize` creates the task (the
// tools of the loaded rules, or the ones asked for, under an optional
// grant; with the default tool set, a tool that cannot be instantiated for
// the task, e.g. because a host of its rules does not resolve, is left out of
// the task and listed as unavailable, with the reason, while the others are
// served); every tool of the task is an MCP tool whose input is the program's
// arguments, its stdin and working files; `tools/call` runs it through the
// daemon's exec API, so every call is audited in the daemon's store; the
// result carries the exit status, the outputs and each denial explained (the
// rule that decided, and the grant that would allow it). A call the client
// cancels (notifications/cancelled) has its run ended by the daemon and gets
// no response. close() ends the task.
#include <expected>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mcp/agentd_client.h"

namespace bulwark::mcp {

// Protocol versions served, newest first (https://modelcontextprotocol.io
// specification revisions). An initialize naming another gets the newest.
inline constexpr std::string_view kProtocolVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};

// JSON-RPC 2.0 error codes.
enum ErrorCode : int {
    kParseError = -32700,
    kInvalidRequest = -32600,
    kMethodNotFound = -32601,
    kInvalidParams = -32602,
    kInternalError = -32603,
};

// The daemon's HTTP API, as AgentdClient::call offers it.
using ApiCall = std::function<std::expected<AgentdReply, AgentdError>(
    std::string_view method, std::string_view target, const std::optional<nlohmann::json>& body)>;

struct Options {
    std::vector<std::string> tools;      // empty: every tool the daemon serves
    nlohmann::json grant = nullptr;      // the task's grant (null: the tools' rules)
    std::string label = "mcp session";
    // Once the session is up, a call that finds no daemon accepting
    // connections (agentd restarting) is tried again for this long.
    std::chrono::milliseconds reconnect_wait{30000};
};

class Server {
public:
    Server(ApiCall api, Options opts);

    // One message (a line without its newline). Returns the line to send
    // back, or nothing (notifications, responses). Thread-safe: calls may
    // run concurrently once the session is initialized.
    std::optional<std::string> handle_line(std::string_view line);
    std::optional<nlohmann::json> handle(const nlohmann::json& msg);

    // Closes the task (idempotent). Returns the daemon's error, if any.
    std::expected<void, std::string> close();

    std::optional<uint64_t> task_id() const;
    std::string protocol_version() const;

private:
    nlohmann::json dispatch(const nlohmann::json& id, const std::string& method, const nlohmann::json& params);
    std::expected<nlohmann::json, std::pair<int, std::string>> initialize(const nlohmann::json& params);
    nlohmann::json tools_list() const;
    std::expected<nlohmann::json, std::pair<int, std::string>> tools_call(const nlohmann::json& params,
                                                                         const std::string& client_ref);
    // notifications/cancelled: the daemon ends the call's run; the call
    // gets no response.
    void cancel_request(const nlohmann::json& params);
    // api_, tried again while no daemon accepts the connection, up to
    // opts_.reconnect_wait.
    std::expected<AgentdReply, AgentdError> call_waiting(std::string_view method, std::string_view target,
                                                         const std::optional<nlohmann::json>& body) const;
    // The session's task `gone` no longer exists (a restarted agentd knows
    // no task of the one before): a new task with the same tools, grant and
    // label, in the same work directory while it is there. The task to use.
    std::expected<uint64_t, std::string> renew_task(uint64_t gone);

    struct Tool {
        std::string name;
        std::string program;  // argv[0]: the rule file's first binary
        nlohmann::json descriptor;
        // Why the tool cannot run in this session ("" when it can): listed,
        // so the agent and its user see it, and a call answers this.
        std::string unavailable;
    };

    ApiCall api_;
    Options opts_;
    mutable std::mutex mu_;
    bool initialized_ = false;
    bool closed_ = false;
    std::string version_;
    std::optional<uint64_t> task_;
    std::string workdir_;
    nlohmann::json create_;   // the session's POST /v1/tasks body
    std::mutex renew_mu_;     // one renewal at a time
    std::vector<Tool> tools_;
    // tools/call requests in flight: request id (as JSON text) -> the
    // client_ref their exec carries; those a client cancelled.
    std::map<std::string, std::string> in_flight_;
    std::set<std::string> cancelled_;
    uint64_t next_ref_ = 1;
};

// The text an agent reads for one exec result (exit, outputs, denials).
std::string describe_exec(const std::string& tool, const nlohmann::json& exec);
// Whether the run failed or was denied (the result's isError).
bool exec_failed(const nlohmann::json& exec);

}  // namespace bulwark::mcp
