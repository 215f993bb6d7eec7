#include "mcp/mcp_server.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include <spdlog/spdlog.h>

#include "bulwark/version.h"
#include "common/json_input.h"
#include "common/trace_context.h"

namespace bulwark::mcp {

using nlohmann::json;

namespace {

using RpcError = std::pair<int, std::string>;

json response(const json& id, json result) { return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}}; }

json error_response(const json& id, int code, const std::string& message) {
    return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
}

bool valid_id(const json& id) { return id.is_string() || id.is_number_integer(); }

// structuredContent arrived with 2025-06-18; older sessions get text only.
bool has_structured_content(const std::string& version) { return version >= "2025-06-18"; }

json input_schema() {
    return {{"type", "object"},
            {"properties",
             {{"args",
               {{"type", "array"},
                {"items", {{"type", "string"}}},
                {"description", "the program's arguments (after the program name); relative paths are in the "
                                "task's work directory"}}},
              {"stdin", {{"type", "string"}, {"description", "text written to the program's standard input"}}},
              {"files",
               {{"type", "object"},
                {"additionalProperties", {{"type", "string"}}},
                {"description", "working files written into the task's work directory before the run: "
                                "relative path -> content (no absolute paths or `..`; at most 64 files, 1 MiB each)"}}},
              {"timeout_ms",
               {{"type", "integer"},
                {"minimum", 1},
                {"description", "lowers the tool's own time limit, never raises it"}}}}},
            {"additionalProperties", false}};
}

json output_schema() {
    json nullable_string = {{"type", json::array({"string", "null"})}};
    json denial = {{"type", "object"},
                   {"properties",
                    {{"layer", {{"type", "string"}}},
                     {"op", {{"type", "string"}}},
                     {"object", {{"type", "string"}}},
                     {"decision", {{"type", "string"}}},
                     {"rule", nullable_string},
                     {"explanation", {{"type", "string"}}},
                     {"grant_would_allow", {{"type", json::array({"object", "null"})}}}}}};
    return {{"type", "object"},
            {"properties",
             {{"task_id", {{"type", "integer"}}},
              {"run_id", {{"type", "integer"}}},
              {"tool", {{"type", "string"}}},
              {"argv", {{"type", "array"}, {"items", {{"type", "string"}}}}},
              {"epoch", {{"type", "integer"}}},
              {"outcome", {{"type", "string"}}},
              {"exit_status", {{"type", "integer"}}},
              {"stdout", {{"type", "string"}}},
              {"stderr", {{"type", "string"}}},
              {"stdout_truncated", {{"type", "boolean"}}},
              {"stderr_truncated", {{"type", "boolean"}}},
              {"files", {{"type", "array"}, {"items", {{"type", "object"}}}}},
              {"denials", {{"type", "array"}, {"items", denial}}},
              {"unusual", {{"type", "string"},
                           {"description", "the tool's profile found this run unusual: what departed from its usual "
                                           "runs, and the response taken (absent when the run was usual)"}}}}},
            {"required", {"run_id", "outcome", "exit_status", "stdout", "stderr", "denials"}}};
}

// The profile's word on the run, "" when it was usual: "unusual for curl:
// first-time destination ... in 412 runs (response: recorded)"; a narrowing
// says what the tool's next runs in the task are under.
std::string unusual_line(const json& exec) {
    auto p = exec.find("profile");
    if (p == exec.end() || !p->is_object() || !p->contains("summary") || !(*p)["summary"].is_string()) return {};
    std::string line = (*p)["summary"].get<std::string>();
    if (!p->contains("response") || !(*p)["response"].is_string()) return line;
    const std::string response = (*p)["response"].get<std::string>();
    line += " (response: " + response;
    const json n = p->value("narrowed", json::object());
    if (response == "narrowed" && n.contains("held") && n["held"].is_string())
        line += "; no narrowing could be made (" + n["held"].get<std::string>() +
                "): the tool's runs in this task wait for a grant update";
    else if (response == "narrowed" && n.contains("epoch") && n["epoch"].is_number_integer())
        line += ": the tool's further runs in this task are held to what its profile covers (epoch " +
                std::to_string(n["epoch"].get<uint64_t>()) + ")";
    return line + ")";
}

json tool_error(const std::string& text) {
    return {{"content", {{{"type", "text"}, {"text", text}}}}, {"isError", true}};
}

// The part of an exec result an agent acts on (no raw decision rows).
json structured(const json& exec) {
    json s = json::object();
    for (const char* k : {"task_id", "run_id", "tool", "argv", "epoch", "outcome", "exit_status", "stdout", "stderr",
                          "stdout_truncated", "stderr_truncated", "files", "denials"})
        if (exec.contains(k)) s[k] = exec[k];
    if (!s.contains("denials")) s["denials"] = json::array();
    if (auto u = unusual_line(exec); !u.empty()) s["unusual"] = u;
    return s;
}

// Arguments of tools/call -> the exec body's argv tail, stdin, files, timeout.
std::expected<json, std::string> exec_body(const std::string& tool, const std::string& program, const json& args) {
    json body{{"tool", tool}, {"argv", json::array({program})}};
    if (args.is_null()) return body;
    if (!args.is_object()) return std::unexpected("arguments: must be an object");
    for (auto it = args.begin(); it != args.end(); ++it) {
        const std::string& k = it.key();
        const json& v = it.value();
        if (k == "args") {
            if (!v.is_array()) return std::unexpected("arguments.args: must be an array of strings");
            for (size_t i = 0; i < v.size(); ++i) {
                if (!v[i].is_string())
                    return std::unexpected("arguments.args[" + std::to_string(i) + "]: must be a string");
                body["argv"].push_back(v[i]);
            }
        } else if (k == "stdin") {
            if (!v.is_string()) return std::unexpected("arguments.stdin: must be a string");
            body["stdin"] = v;
        } else if (k == "files") {
            if (!v.is_object()) return std::unexpected("arguments.files: must be an object {relative_path: content}");
            body["files"] = v;  // the daemon checks each path and names the one it refuses
        } else if (k == "timeout_ms") {
            if (!v.is_number_unsigned() || v.get<uint64_t>() == 0)
                return std::unexpected("arguments.timeout_ms: must be a positive integer");
            body["timeout_ms"] = v;
        } else {
            return std::unexpected("arguments." + k + ": unknown argument (args, stdin, files, timeout_ms)");
        }
    }
    return body;
}

// The exec reply as text (describe_exec catches what a malformed one throws).
std::string describe_exec_reply(const std::string& tool, const json& exec) {
    std::string s = tool + ": ";
    std::string outcome = exec.value("outcome", std::string("?"));
    int status = exec.value("exit_status", -1);
    if (outcome == "exited")
        s += "exit status " + std::to_string(status);
    else
        s += outcome + " (exit status " + std::to_string(status) + ")";
    if (exec.contains("report") && exec["report"].is_object()) {
        const auto& rep = exec["report"];
        if (rep.value("timed_out", false)) s += ", timed out";
        if (rep.value("oom_killed", false)) s += ", killed for exceeding its memory limit";
        if (rep.contains("error") && rep["error"].is_string() && !rep["error"].get<std::string>().empty())
            s += ", " + rep["error"].get<std::string>();
    }
    s += " (run " + exec.value("run_id", json(nullptr)).dump() + " of task " + exec.value("task_id", json(nullptr)).dump() +
         ", policy epoch " + exec.value("epoch", json(nullptr)).dump() + ")\n";
    auto section = [&](const char* name, const char* trunc) {
        std::string text = exec.value(name, std::string());
        s += "--- " + std::string(name);
        if (text.empty()) {
            s += ": (empty)\n";
            return;
        }
        s += (exec.value(trunc, false) ? " (truncated) ---\n" : " ---\n") + text;
        if (text.back() != '\n') s += "\n";
    };
    section("stdout", "stdout_truncated");
    section("stderr", "stderr_truncated");
    if (auto u = unusual_line(exec); !u.empty()) s += "--- " + u + "\n";
    const json denials = exec.contains("denials") && exec["denials"].is_array() ? exec["denials"] : json::array();
    if (denials.empty()) {
        s += "--- denials: none recorded\n";
        return s;
    }
    s += "--- denials (" + std::to_string(denials.size()) + ") ---\n";
    size_t n = 0;
    for (const auto& d : denials) {
        s += std::to_string(++n) + ". " + d.value("layer", std::string("?")) + " layer";
        if (d.contains("op") && d["op"].is_string()) s += ": " + d["op"].get<std::string>();
        if (d.contains("object") && d["object"].is_string() && !d["object"].get<std::string>().empty())
            s += " " + d["object"].get<std::string>();
        if (d.contains("decision") && d["decision"].is_string()) s += " (" + d["decision"].get<std::string>() + ")";
        s += "\n";
        if (d.contains("explanation") && d["explanation"].is_string())
            s += "   why: " + d["explanation"].get<std::string>() + "\n";
        if (d.contains("rule") && d["rule"].is_string()) s += "   rule: " + d["rule"].get<std::string>() + "\n";
        if (d.contains("grant_would_allow") && d["grant_would_allow"].is_object()) {
            const auto& g = d["grant_would_allow"];
            s += "   " + g.value("message", std::string("a grant would allow it")) + "\n";
            if (g.contains("grant")) s += "   grant: " + g["grant"].dump() + "\n";
        } else if (d.contains("rule") && d["rule"].is_string()) {
            s += "   no grant of this task would allow it: the tool's own rules do not\n";
        }
    }
    return s;
}

}  // namespace

bool exec_failed(const json& exec) {
    try {
        if (exec.value("outcome", std::string()) != "exited") return true;
        if (exec.value("exit_status", -1) != 0) return true;
        return exec.contains("denials") && exec["denials"].is_array() && !exec["denials"].empty();
    } catch (const json::exception&) {  // a reply not shaped as an exec reply: not a success
        return true;
    }
}

// A field of the wrong type in agentd's reply (nlohmann's value() throws
// type_error) is said in the text, never an exception out of the session.
std::string describe_exec(const std::string& tool, const json& exec) {
    try {
        return describe_exec_reply(tool, exec);
    } catch (const json::exception& e) {
        return tool + ": agentd's reply could not be read (" + e.what() + ")\n";
    }
}

Server::Server(ApiCall api, Options opts) : api_(std::move(api)), opts_(std::move(opts)) {}

std::optional<uint64_t> Server::task_id() const {
    std::lock_guard lk(mu_);
    return task_;
}

std::string Server::protocol_version() const {
    std::lock_guard lk(mu_);
    return version_;
}

std::optional<std::string> Server::handle_line(std::string_view line) {
    auto msg = parse_peer_json(line);
    if (!msg) return error_response(nullptr, kParseError, "parse error: the message " + msg.error()).dump();
    auto r = handle(*msg);
    if (!r) return std::nullopt;
    return r->dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<json> Server::handle(const json& msg) {
    if (msg.is_array()) {
        // JSON-RPC batches exist in 2025-03-26 only; later revisions removed them.
        if (protocol_version() != "2025-03-26")
            return error_response(nullptr, kInvalidRequest, "batches are not supported in this protocol version");
        if (msg.empty()) return error_response(nullptr, kInvalidRequest, "empty batch");
        json out = json::array();
        for (const auto& m : msg) {
            if (m.is_array()) {
                out.push_back(error_response(nullptr, kInvalidRequest, "nested batch"));
                continue;
            }
            if (auto r = handle(m)) out.push_back(std::move(*r));
        }
        if (out.empty()) return std::nullopt;
        return out;
    }
    if (!msg.is_object()) return error_response(nullptr, kInvalidRequest, "a message must be a JSON object");
    json id = msg.contains("id") ? msg["id"] : json(nullptr);
    if (msg.contains("id") && !valid_id(id))
        return error_response(nullptr, kInvalidRequest, "id: must be a string or an integer");
    if (!msg.contains("jsonrpc") || msg["jsonrpc"] != "2.0")
        return error_response(id, kInvalidRequest, "jsonrpc: must be \"2.0\"");
    if (!msg.contains("method")) {
        // A response to a request of ours: this server sends none, so there is
        // nothing to match it with.
        if (msg.contains("id") && (msg.contains("result") || msg.contains("error"))) return std::nullopt;
        return error_response(id, kInvalidRequest, "method: required");
    }
    if (!msg["method"].is_string()) return error_response(id, kInvalidRequest, "method: must be a string");
    const std::string method = msg["method"];
    json params = msg.contains("params") ? msg["params"] : json::object();
    if (!msg.contains("id")) {  // notifications need no answer
        if (method == "notifications/cancelled" && params.is_object()) cancel_request(params);
        return std::nullopt;
    }
    if (!params.is_object()) return error_response(id, kInvalidParams, "params: must be an object");
    auto r = dispatch(id, method, params);
    if (r.is_null()) return std::nullopt;  // a cancelled call: no response
    return r;
}

json Server::dispatch(const json& id, const std::string& method, const json& params) {
    if (method == "ping") return response(id, json::object());
    if (method == "initialize") {
        auto r = initialize(params);
        return r ? response(id, *r) : error_response(id, r.error().first, r.error().second);
    }
    {
        std::lock_guard lk(mu_);
        if (!initialized_)
            return error_response(id, kInvalidRequest, "the session is not initialized: send initialize first");
        if (closed_) return error_response(id, kInvalidRequest, "the session is closed");
    }
    if (method == "tools/list") {
        if (params.contains("cursor"))
            return error_response(id, kInvalidParams, "cursor: this server lists every tool on one page");
        return response(id, tools_list());
    }
    if (method == "tools/call") {
        const std::string key = id.dump();
        std::string ref;
        {
            std::lock_guard lk(mu_);
            ref = "mcp-" + std::to_string(next_ref_++);
            in_flight_[key] = ref;
        }
        auto r = tools_call(params, ref);
        {
            std::lock_guard lk(mu_);
            in_flight_.erase(key);
            if (cancelled_.erase(key)) return nullptr;
        }
        return r ? response(id, *r) : error_response(id, r.error().first, r.error().second);
    }
    return error_response(id, kMethodNotFound, "method not found: " + method);
}

std::expected<json, RpcError> Server::initialize(const json& params) {
    if (!params.contains("protocolVersion") || !params["protocolVersion"].is_string())
        return std::unexpected(RpcError{kInvalidParams, "protocolVersion: required (a string)"});
    {
        std::lock_guard lk(mu_);
        if (initialized_ || task_) return std::unexpected(RpcError{kInvalidRequest, "the session is already initialized"});
    }
    const std::string asked = params["protocolVersion"];
    std::string version(kProtocolVersions[0]);
    for (auto v : kProtocolVersions)
        if (asked == v) version = asked;

    auto fail = [](const std::string& what) { return std::unexpected(RpcError{kInternalError, what}); };
    auto listed = api_("GET", "/v1/tools", std::nullopt);
    if (!listed) return fail("agentd: " + listed.error().message);
    if (listed->status != 200) return fail("agentd: GET /v1/tools: " + listed->error_text());
    std::vector<json> chosen;
    for (const auto& t : listed->body["tools"])
        if (opts_.tools.empty() ||
            std::find(opts_.tools.begin(), opts_.tools.end(), t.value("name", std::string())) != opts_.tools.end())
            chosen.push_back(t);
    for (const auto& want : opts_.tools)
        if (std::none_of(chosen.begin(), chosen.end(), [&](const json& t) { return t["name"] == want; }))
            return fail("--tools: agentd serves no tool named '" + want + "'");
    if (chosen.empty()) return fail("agentd serves no tools");

    json create{{"tools", json::array()}, {"label", opts_.label}};
    for (const auto& t : chosen) create["tools"].push_back(t["name"]);
    if (!opts_.grant.is_null()) create["grant"] = opts_.grant;
    // The default set serves what it can: one tool that cannot be set up
    // (a rule's host that does not resolve offline) leaves the others usable.
    // Tools named with --tools are all required.
    if (opts_.tools.empty()) create["skip_unavailable"] = true;
    auto made = api_("POST", "/v1/tasks", create);
    if (!made) return fail("agentd: " + made.error().message);
    if (made->status != 201) return fail("agentd refused the session's task: " + made->error_text());
    uint64_t task = made->body["id"].get<uint64_t>();
    std::string workdir = made->body.value("workdir", std::string());

    std::map<std::string, std::string> unavailable;
    if (made->body.contains("unavailable") && made->body["unavailable"].is_array())
        for (const auto& u : made->body["unavailable"])
            if (u.is_object() && u.contains("tool") && u["tool"].is_string())
                unavailable[u["tool"].get<std::string>()] = u.value("error", std::string("cannot be instantiated"));

    std::vector<Tool> tools;
    std::string unavailable_text;
    for (const auto& t : chosen) {
        if (auto u = unavailable.find(t.value("name", std::string())); u != unavailable.end()) {
            Tool tool;
            tool.name = u->first;
            tool.unavailable = u->second;
            spdlog::warn("agentd mcp: tool {} is unavailable in this session: {}", tool.name, tool.unavailable);
            unavailable_text += " " + tool.name + " is unavailable in this session: " + tool.unavailable + ".";
            tool.descriptor = {{"name", tool.name},
                               {"title", tool.name + " (unavailable)"},
                               {"description", "UNAVAILABLE in this session: " + tool.unavailable +
                                                   "\nCalling it returns this error; the other tools of the session "
                                                   "work. " + t.value("description", std::string())},
                               {"inputSchema", input_schema()},
                               {"_meta", {{"bulwark/unavailable", tool.unavailable}}}};
            tools.push_back(std::move(tool));
            continue;
        }
        Tool tool;
        tool.name = t["name"];
        tool.program = t.contains("binaries") && !t["binaries"].empty() ? t["binaries"][0].get<std::string>() : tool.name;
        std::string desc = t.value("description", std::string());
        desc += "\n\nRuns " + tool.program +
                " in a Bulwark sandbox (task " + std::to_string(task) + ", work directory " + workdir +
                "). The result gives the exit status, stdout, stderr and each operation the sandbox denied, with "
                "the rule that denied it and the grant that would allow it.";
        auto ex = api_("GET", "/v1/tools/" + tool.name + "/explain", std::nullopt);
        if (ex && ex->status == 200 && ex->body.contains("text") && ex->body["text"].is_string())
            desc += "\n\nWhat its rules allow:\n" + ex->body["text"].get<std::string>();
        tool.descriptor = {{"name", tool.name},
                           {"title", tool.name + " (Bulwark sandbox)"},
                           {"description", desc},
                           {"inputSchema", input_schema()},
                           {"annotations", {{"openWorldHint", t.value("network", false)}}}};
        if (has_structured_content(version)) tool.descriptor["outputSchema"] = output_schema();
        tools.push_back(std::move(tool));
    }

    std::lock_guard lk(mu_);
    initialized_ = true;
    version_ = version;
    task_ = task;
    workdir_ = workdir;
    create_ = std::move(create);
    tools_ = std::move(tools);
    return json{{"protocolVersion", version},
                {"capabilities", {{"tools", {{"listChanged", false}}}}},
                {"serverInfo", {{"name", "bulwark-agentd"}, {"title", "Bulwark sandbox"}, {"version", version_string()}}},
                {"instructions",
                 "Each tool runs in a Bulwark sandbox under the rules of its rule file, inside task " +
                     std::to_string(task) + " (work directory " + workdir +
                     "). Pass the program's arguments in `args`, its input in `stdin`, and files it needs in "
                     "`files` (relative path -> content). A result with isError lists what failed and, for each "
                     "denied operation, the rule that denied it and the grant that would allow it." +
                     unavailable_text}};
}

json Server::tools_list() const {
    std::lock_guard lk(mu_);
    json tools = json::array();
    for (const auto& t : tools_) tools.push_back(t.descriptor);
    return {{"tools", tools}};
}

void Server::cancel_request(const json& params) {
    if (!params.contains("requestId") || !valid_id(params["requestId"])) return;
    std::string ref;
    uint64_t task = 0;
    {
        std::lock_guard lk(mu_);
        auto it = in_flight_.find(params["requestId"].dump());
        if (it == in_flight_.end() || !task_) return;  // finished already, or never ours
        cancelled_.insert(it->first);
        ref = it->second;
        task = *task_;
    }
    // The run ends (cgroup.kill) and its exec answers; that answer is dropped.
    (void)api_("POST", "/v1/tasks/" + std::to_string(task) + "/cancel", json{{"client_ref", ref}});
}

std::expected<json, RpcError> Server::tools_call(const json& params, const std::string& client_ref) {
    if (!params.contains("name") || !params["name"].is_string())
        return std::unexpected(RpcError{kInvalidParams, "name: required (a string)"});
    const std::string name = params["name"];
    // The caller's W3C trace context (_meta.traceparent): the run's records
    // are exported with its trace id, so the agent's trace links to them.
    std::optional<std::string> traceparent;
    if (params.contains("_meta") && params["_meta"].is_object() && params["_meta"].contains("traceparent")) {
        const auto& v = params["_meta"]["traceparent"];
        if (!v.is_string())
            return std::unexpected(RpcError{kInvalidParams, "_meta.traceparent: must be a string (a W3C traceparent)"});
        auto t = parse_traceparent(v.get_ref<const std::string&>());
        if (!t) return std::unexpected(RpcError{kInvalidParams, "_meta.traceparent: " + t.error()});
        traceparent = t->text;
    }
    std::string program, version;
    uint64_t task = 0;
    {
        std::lock_guard lk(mu_);
        auto it = std::find_if(tools_.begin(), tools_.end(), [&](const Tool& t) { return t.name == name; });
        if (it == tools_.end()) return std::unexpected(RpcError{kInvalidParams, "unknown tool: " + name});
        if (!it->unavailable.empty()) return tool_error(name + " is unavailable in this session: " + it->unavailable);
        program = it->program;
        version = version_;
        task = *task_;
    }
    auto body = exec_body(name, program, params.contains("arguments") ? params["arguments"] : json(nullptr));
    if (!body) return tool_error(body.error());
    (*body)["client_ref"] = client_ref;
    if (traceparent) (*body)["traceparent"] = *traceparent;
    auto exec = [&](uint64_t t) { return call_waiting("POST", "/v1/tasks/" + std::to_string(t) + "/exec", *body); };
    auto r = exec(task);
    std::string note;
    if (r && r->status == 404 && r->body.is_object() && r->body.contains("error") &&
        r->body["error"].value("code", std::string()) == "unknown_task") {
        // agentd restarted: its tasks are gone; the session goes on in a new one.
        auto renewed = renew_task(task);
        if (!renewed)
            return tool_error(name + " was not run: this session's task " + std::to_string(task) +
                              " is gone (agentd restarted?) and no new one could be made: " + renewed.error());
        std::string wd;
        {
            std::lock_guard lk(mu_);
            wd = workdir_;
        }
        note = "Note: agentd restarted and this session's task " + std::to_string(task) +
               " was gone; the session continues in task " + std::to_string(*renewed) +
               " with the same tools and grant (work directory " + wd +
               "). Earlier runs stay in the audit store under the old task.\n\n";
        task = *renewed;
        r = exec(task);
    }
    if (!r) {
        if (r.error().kind == AgentdError::Kind::Lost)
            return tool_error(name + ": agentd ended during the call (" + r.error().message +
                              "); the tool may have run, but its result is lost. Calling it again runs it again.");
        return tool_error(name + " was not run: no agentd accepted the connection within " +
                          std::to_string(opts_.reconnect_wait.count() / 1000) + " s (" + r.error().message + ")");
    }
    if (r->status != 200) return tool_error(note + name + " was not run: " + r->error_text());
    json result{{"content", {{{"type", "text"}, {"text", note + describe_exec(name, r->body)}}}},
                {"isError", exec_failed(r->body)}};
    if (has_structured_content(version)) result["structuredContent"] = structured(r->body);
    return result;
}

std::expected<void, std::string> Server::close() {
    std::optional<uint64_t> task;
    {
        std::lock_guard lk(mu_);
        if (closed_ || !task_) {
            closed_ = true;
            return {};
        }
        closed_ = true;
        task = task_;
    }
    auto r = api_("DELETE", "/v1/tasks/" + std::to_string(*task), std::nullopt);
    if (!r) return std::unexpected(r.error().message);
    if (r->status != 200) return std::unexpected(r->error_text());
    return {};
}

std::expected<AgentdReply, AgentdError> Server::call_waiting(std::string_view method, std::string_view target,
                                                             const std::optional<json>& body) const {
    auto deadline = std::chrono::steady_clock::now() + opts_.reconnect_wait;
    auto pause = std::chrono::milliseconds(50);
    for (;;) {
        auto r = api_(method, target, body);
        if (r || r.error().kind != AgentdError::Kind::Unavailable ||
            std::chrono::steady_clock::now() + pause > deadline)
            return r;
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::milliseconds(1000));
    }
}

std::expected<uint64_t, std::string> Server::renew_task(uint64_t gone) {
    std::lock_guard rl(renew_mu_);
    json body;
    {
        std::lock_guard lk(mu_);
        if (closed_) return std::unexpected("the session is closed");
        if (task_ && *task_ != gone) return *task_;  // another call renewed it already
        body = create_;
        std::error_code ec;
        if (!workdir_.empty() && std::filesystem::is_directory(workdir_, ec)) body["workdir"] = workdir_;
    }
    auto made = call_waiting("POST", "/v1/tasks", body);
    if (!made) return std::unexpected("agentd: " + made.error().message);
    if (made->status != 201) return std::unexpected("agentd refused the session's new task: " + made->error_text());
    uint64_t task = made->body["id"].get<uint64_t>();
    std::string workdir = made->body.value("workdir", std::string());
    spdlog::warn("agentd mcp: task {} is gone (agentd restarted?); the session continues in task {} ({})", gone, task,
                 workdir);
    std::lock_guard lk(mu_);
    task_ = task;
    workdir_ = workdir;
    return task;
}

}  // namespace bulwark::mcp
