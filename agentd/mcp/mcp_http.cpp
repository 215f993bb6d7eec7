#include "mcp/mcp_http.h"

#include <algorithm>
#include <vector>

#include "common/digest.h"
#include "common/json_input.h"

namespace bulwark::mcp {

using nlohmann::json;

namespace {

constexpr std::string_view kSessionHeader = "Mcp-Session-Id";

http::ApiResponse rpc_error(int status, int code, const std::string& message) {
    return http::json_response(status, {{"jsonrpc", "2.0"}, {"id", nullptr}, {"error", {{"code", code}, {"message", message}}}});
}

// Tool outputs may hold bytes that are not UTF-8: replaced, never thrown on.
http::ApiResponse json_reply(int status, const json& body) {
    http::ApiResponse r;
    r.status = status;
    r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
    return r;
}

std::string new_session_id() {
    auto id = random_hex(16);
    return id ? *id : std::string();
}

}  // namespace

HttpSessions::HttpSessions(Factory make, size_t max_sessions, std::chrono::milliseconds idle)
    : make_(std::move(make)), max_(max_sessions), idle_(idle) {}

void HttpSessions::end_idle() {
    std::vector<std::shared_ptr<Server>> idle;
    {
        std::lock_guard lk(mu_);
        auto now = std::chrono::steady_clock::now();
        for (auto it = sessions_.begin(); it != sessions_.end();)
            if (now - it->second.last_used > idle_) {
                idle.push_back(std::move(it->second.server));
                it = sessions_.erase(it);
            } else {
                ++it;
            }
    }
    for (auto& s : idle) (void)s->close();
}

size_t HttpSessions::size() const {
    std::lock_guard lk(mu_);
    return sessions_.size();
}

void HttpSessions::register_routes(http::Router& r) {
    // A tools/call blocks for the whole run: the long-running pool.
    r.add("POST", "/mcp", [this](const http::ApiRequest& req) { return post(req); },
          {.offload = true, .long_running = true});
    r.add("DELETE", "/mcp", [this](const http::ApiRequest& req) { return remove(req); }, {.offload = true});
    r.add("GET", "/mcp", [](const http::ApiRequest&) {
        auto resp = http::error_response(405, "method_not_allowed", "this server sends no messages of its own: use POST");
        resp.headers.emplace_back("Allow", "POST, DELETE");
        return resp;
    });
}

http::ApiResponse HttpSessions::post(const http::ApiRequest& req) {
    end_idle();
    auto parsed = parse_peer_json(req.body);
    if (!parsed) return rpc_error(400, kParseError, "parse error: the body " + parsed.error());
    json msg = std::move(*parsed);
    if (auto v = req.header("MCP-Protocol-Version")) {
        bool known = std::any_of(std::begin(kProtocolVersions), std::end(kProtocolVersions),
                                 [&](std::string_view k) { return k == *v; });
        if (!known) return rpc_error(400, kInvalidRequest, "MCP-Protocol-Version: unsupported version '" + std::string(*v) + "'");
    }
    const bool init = msg.is_object() && msg.value("method", json()) == "initialize";
    if (init) {
        {
            std::lock_guard lk(mu_);
            if (sessions_.size() >= max_)
                return rpc_error(503, kInternalError, "at most " + std::to_string(max_) + " sessions at once");
        }
        std::shared_ptr<Server> s = make_();
        auto r = s->handle(msg);
        if (!r) return rpc_error(400, kInvalidRequest, "initialize must be a request (with an id)");
        auto resp = json_reply(200, *r);
        if (r->contains("result")) {
            std::string id = new_session_id();
            if (id.empty()) {
                (void)s->close();
                return rpc_error(500, kInternalError, "no random session id (getrandom failed)");
            }
            std::lock_guard lk(mu_);
            sessions_[id] = Session{s, std::chrono::steady_clock::now()};
            resp.headers.emplace_back(std::string(kSessionHeader), id);
        }
        return resp;
    }
    auto sid = req.header(kSessionHeader);
    if (!sid) return rpc_error(400, kInvalidRequest, "Mcp-Session-Id: required (send initialize first)");
    std::shared_ptr<Server> s;
    {
        std::lock_guard lk(mu_);
        auto it = sessions_.find(std::string(*sid));
        if (it == sessions_.end()) return rpc_error(404, kInvalidRequest, "no session " + std::string(*sid));
        it->second.last_used = std::chrono::steady_clock::now();
        s = it->second.server;
    }
    auto r = s->handle(msg);
    if (!r) {
        http::ApiResponse accepted;
        accepted.status = 202;
        accepted.content_type = "application/json";
        return accepted;
    }
    return json_reply(200, *r);
}

http::ApiResponse HttpSessions::remove(const http::ApiRequest& req) {
    auto sid = req.header(kSessionHeader);
    if (!sid) return rpc_error(400, kInvalidRequest, "Mcp-Session-Id: required");
    std::shared_ptr<Server> s;
    {
        std::lock_guard lk(mu_);
        auto it = sessions_.find(std::string(*sid));
        if (it == sessions_.end()) return rpc_error(404, kInvalidRequest, "no session " + std::string(*sid));
        s = std::move(it->second.server);
        sessions_.erase(it);
    }
    if (auto c = s->close(); !c)
        return http::error_response(502, "task_close_failed", "the session ended; closing its task failed: " + c.error());
    return http::json_response(200, json::object());
}

void HttpSessions::close_all() {
    std::map<std::string, Session> all;
    {
        std::lock_guard lk(mu_);
        all.swap(sessions_);
    }
    for (auto& [id, s] : all) (void)s.server->close();
}

}  // namespace bulwark::mcp
