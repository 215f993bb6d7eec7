#pragma once
// JSON API v1: requests, responses, the router, and the handlers this file
// owns (health, metrics, audit, events, openapi). No Beast here: the server
// (http_server.cpp) turns sockets into ApiRequests and ApiResponses back into
// bytes, so adding an endpoint is one line in register_v1_routes() (or a
// call to Router::add from your own file) plus the handler.
//
// Errors are always JSON: {"error":{"code":"...","message":"..."}}.
#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace bulwark {
struct Metrics;
namespace audit {
class AuditStore;
class EventBus;
}  // namespace audit
}  // namespace bulwark

namespace bulwark::http {

struct Peer {
    enum class Transport { Unix, Tcp } transport = Transport::Unix;
    uid_t uid = uid_t(-1);  // Unix: SO_PEERCRED
    gid_t gid = gid_t(-1);
    pid_t pid = 0;
    std::string address;    // Tcp: "127.0.0.1:5555"
};

struct ApiRequest {
    std::string method;  // "GET"
    std::string path;    // decoded path, no query
    std::map<std::string, std::string> query;
    std::map<std::string, std::string> params;  // {name} segments of the route
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    Peer peer;
    std::optional<std::string_view> header(std::string_view name) const;
};

// A response body produced over time (SSE, WebSocket, streamed exec output).
struct StreamMessage {
    std::string event;  // SSE event name ("" = message); WebSocket ignores it
    std::string data;   // one JSON document
};
class StreamSource {
public:
    virtual ~StreamSource() = default;
    // notify is called from any thread whenever poll() has something.
    virtual void start(std::function<void()> notify) = 0;
    virtual std::vector<StreamMessage> poll(size_t max) = 0;
    // A finite stream says so once poll() has returned its last message; the
    // server then ends the response.
    virtual bool finished() { return false; }
};

struct ApiResponse {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
    std::shared_ptr<StreamSource> stream;  // set: body is streamed (SSE / WebSocket)
};

ApiResponse json_response(int status, const nlohmann::json& body);
ApiResponse error_response(int status, std::string_view code, std::string_view message);
// A path or query value that must be a positive integer (an id), or nullopt.
std::optional<uint64_t> positive_integer(std::string_view s);

struct RouteOptions {
    bool websocket = false;  // the handler runs for an Upgrade: websocket request only
    bool offload = false;    // may block (database): run on the worker pool
    bool long_running = false;  // with offload: blocks for a whole tool run; own pool
    // TCP: served without a bearer token (Host and Origin are still checked).
    // Only for static dashboard assets that hold no data.
    bool public_asset = false;
};

class Router {
public:
    using Handler = std::function<ApiResponse(const ApiRequest&)>;
    // pattern: "/v1/tools/{name}" -- {x} matches one non-empty segment
    void add(std::string method, std::string pattern, Handler h, RouteOptions opts = {});

    struct Route {
        std::string method;
        std::vector<std::string> segments;
        Handler handler;
        RouteOptions opts;
    };
    // The route for method+path (params filled), or an error response
    // (404 unknown path, 405 known path with another method).
    const Route* match(const std::string& method, const std::string& path,
                       std::map<std::string, std::string>& params, ApiResponse& error) const;
    ApiResponse dispatch(ApiRequest& req) const;  // match + run (tests, offloaded calls)
    const std::vector<Route>& routes() const { return routes_; }

private:
    std::vector<Route> routes_;
};

struct ApiContext {
    audit::AuditStore* store = nullptr;
    audit::EventBus* bus = nullptr;
    Metrics* metrics = nullptr;
    std::string openapi_json;                   // served at /v1/openapi.json
    std::function<nlohmann::json()> host_status;  // extra health fields (enforcement)
    std::function<nlohmann::json()> telemetry_status;  // health's telemetry (the OTLP exporter)
    size_t stream_queue = 4096;                 // per-subscriber bound
};

// GET /v1/health, GET /metrics, GET /v1/audit, GET /v1/events (SSE),
// GET /v1/events/ws (WebSocket), GET /v1/openapi.json
void register_v1_routes(Router& r, const ApiContext& ctx);

}  // namespace bulwark::http

namespace bulwark::http {
// The OpenAPI 3 document (agentd/api/openapi.json, embedded at build time).
std::string_view openapi_document();
}  // namespace bulwark::http
