#include "api/http_api.h"

#include <charconv>

#include "audit/audit_db.h"
#include "bulwark/version.h"
#include "audit/event_bus.h"
#include "audit/metrics.h"

namespace bulwark::http {
namespace {

std::vector<std::string> split_path(std::string_view p) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < p.size()) {
        if (p[i] == '/') {
            ++i;
            continue;
        }
        auto j = p.find('/', i);
        if (j == std::string_view::npos) j = p.size();
        out.emplace_back(p.substr(i, j - i));
        i = j;
    }
    return out;
}

template <class T>
std::optional<T> parse_uint(const std::string& s) {
    T v{};
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
    return v;
}

struct BadParam {
    std::string message;
};

// Reads the filters shared by /v1/audit and /v1/events; throws BadParam.
void read_filters(const std::map<std::string, std::string>& q, audit::Query* aq, audit::BusFilter* bf,
                  std::initializer_list<std::string_view> allowed) {
    for (auto& [k, v] : q) {
        if (std::find(allowed.begin(), allowed.end(), k) == allowed.end())
            throw BadParam{"unknown query parameter '" + k + "'"};
        auto num = [&](auto tag) {
            using T = decltype(tag);
            auto n = parse_uint<T>(v);
            if (!n) throw BadParam{"'" + k + "' must be a non-negative integer"};
            return *n;
        };
        if (k == "task") {
            auto n = num(uint64_t{});
            if (aq) aq->task_id = n;
            if (bf) bf->task_id = n;
        } else if (k == "run") {
            if (aq) aq->run_id = num(uint64_t{});
        } else if (k == "tool") {
            if (v.empty()) throw BadParam{"'tool' must not be empty"};
            if (aq) aq->tool = v;
            if (bf) bf->tool = v;
        } else if (k == "rule") {
            if (aq) aq->rule_id = num(uint32_t{});
        } else if (k == "decision") {
            auto d = audit::parse_decision(v);
            if (!d) throw BadParam{"'decision' must be allow, deny, audit or observe"};
            if (aq) aq->decision = *d;
            if (bf) bf->decision = *d;
        } else if (k == "layer") {
            auto l = audit::parse_layer(v);
            if (!l) throw BadParam{"unknown layer '" + v + "'"};
            if (aq) aq->layer = *l;
            if (bf) bf->layer = *l;
        } else if (k == "kind") {
            auto kk = audit::parse_kind(v);
            if (!kk) throw BadParam{"unknown record kind '" + v + "'"};
            if (aq) aq->kind = *kk;
            if (bf) bf->kind = *kk;
        } else if (k == "since_ns" || k == "until_ns") {
            auto n = num(uint64_t{});
            if (n > uint64_t(INT64_MAX)) throw BadParam{"'" + k + "' is out of range"};
            if (aq) (k == "since_ns" ? aq->since_ns : aq->until_ns) = int64_t(n);
        } else if (k == "after_seq") {
            if (aq) aq->after_seq = num(uint64_t{});
        } else if (k == "limit") {
            auto n = num(uint32_t{});
            if (n == 0 || n > audit::Query::kMaxLimit)
                throw BadParam{"'limit' must be 1.." + std::to_string(audit::Query::kMaxLimit)};
            if (aq) aq->limit = n;
        }
    }
}

class BusStream final : public StreamSource {
public:
    explicit BusStream(std::shared_ptr<audit::Subscription> s) : sub_(std::move(s)) {}
    void start(std::function<void()> notify) override { sub_->set_notify(std::move(notify)); }
    std::vector<StreamMessage> poll(size_t max) override {
        std::vector<StreamMessage> out;
        for (auto& m : sub_->drain(max))
            out.push_back({m.type == audit::BusMessage::Type::Gap ? "gap" : "record", m.text()});
        return out;
    }
    ~BusStream() override { sub_->set_notify(nullptr); }

private:
    std::shared_ptr<audit::Subscription> sub_;
};

}  // namespace

std::optional<std::string_view> ApiRequest::header(std::string_view name) const {
    for (auto& [k, v] : headers)
        if (k.size() == name.size() &&
            std::equal(k.begin(), k.end(), name.begin(), [](char a, char b) { return std::tolower((unsigned char)a) == std::tolower((unsigned char)b); }))
            return std::string_view(v);
    return std::nullopt;
}

std::optional<uint64_t> positive_integer(std::string_view s) {
    auto v = parse_uint<uint64_t>(std::string(s));
    if (!v || *v == 0) return std::nullopt;
    return v;
}

ApiResponse json_response(int status, const nlohmann::json& body) {
    ApiResponse r;
    r.status = status;
    r.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    r.body += "\n";
    return r;
}

ApiResponse error_response(int status, std::string_view code, std::string_view message) {
    return json_response(status, {{"error", {{"code", code}, {"message", message}}}});
}

void Router::add(std::string method, std::string pattern, Handler h, RouteOptions opts) {
    routes_.push_back(Route{std::move(method), split_path(pattern), std::move(h), opts});
}

const Router::Route* Router::match(const std::string& method, const std::string& path,
                                   std::map<std::string, std::string>& params, ApiResponse& error) const {
    auto segs = split_path(path);
    bool path_known = false;
    std::string allow;
    for (const auto& r : routes_) {
        if (r.segments.size() != segs.size()) continue;
        std::map<std::string, std::string> p;
        bool ok = true;
        for (size_t i = 0; i < segs.size() && ok; ++i) {
            const auto& s = r.segments[i];
            if (s.size() > 2 && s.front() == '{' && s.back() == '}')
                p[s.substr(1, s.size() - 2)] = segs[i];
            else
                ok = s == segs[i];
        }
        if (!ok) continue;
        path_known = true;
        if (r.method == method) {
            params = std::move(p);
            return &r;
        }
        allow += (allow.empty() ? "" : ", ") + r.method;
    }
    if (path_known) {
        error = error_response(405, "method_not_allowed", method + " is not allowed on " + path);
        error.headers.emplace_back("Allow", allow);
    } else {
        error = error_response(404, "not_found", "no such endpoint: " + path);
    }
    return nullptr;
}

ApiResponse Router::dispatch(ApiRequest& req) const {
    ApiResponse err;
    const Route* r = match(req.method, req.path, req.params, err);
    if (!r) return err;
    try {
        return r->handler(req);
    } catch (const std::exception& e) {
        return error_response(500, "internal", e.what());
    }
}

void register_v1_routes(Router& r, const ApiContext& ctx) {
    r.add("GET", "/v1/health", [ctx](const ApiRequest&) {
        auto st = ctx.store ? ctx.store->status() : audit::StoreStatus{};
        bool ok = !ctx.store || st.state == audit::StoreState::Ok;
        nlohmann::json j{{"status", ok ? "ok" : "refusing"},
                         {"accepting_runs", ok},
                         {"version", bulwark::version_string()}};
        if (ctx.store) j["audit"] = st.to_json();
        if (ctx.host_status) j["host"] = ctx.host_status();
        if (ctx.telemetry_status) j["telemetry"] = ctx.telemetry_status();
        return json_response(ok ? 200 : 503, j);
    });

    r.add("GET", "/metrics", [ctx](const ApiRequest&) {
        ApiResponse resp;
        resp.content_type = "text/plain; version=0.0.4; charset=utf-8";
        resp.body = ctx.metrics ? ctx.metrics->render_prometheus() : std::string();
        return resp;
    });

    r.add("GET", "/v1/openapi.json", [ctx](const ApiRequest&) {
        ApiResponse resp;
        resp.body = ctx.openapi_json;
        return resp;
    });

    r.add(
        "GET", "/v1/audit",
        [ctx](const ApiRequest& req) {
            if (!ctx.store) return error_response(503, "no_store", "the audit store is not open");
            audit::Query q;
            try {
                read_filters(req.query, &q, nullptr,
                             {"task", "run", "tool", "rule", "decision", "layer", "kind", "since_ns", "until_ns",
                              "after_seq", "limit"});
            } catch (const BadParam& e) {
                return error_response(400, "bad_parameter", e.message);
            }
            auto res = ctx.store->query(q);
            if (!res) {
                if (res.error().code == audit::DbError::Code::Timeout)
                    return error_response(503, "query_timeout", res.error().message);
                if (res.error().code == audit::DbError::Code::Invalid)
                    return error_response(400, "bad_parameter", res.error().message);
                return error_response(500, "query_failed", res.error().message);
            }
            nlohmann::json rows = nlohmann::json::array();
            for (const auto& row : res->rows) rows.push_back(audit::to_json(row));
            nlohmann::json body{{"rows", std::move(rows)},
                                {"next_after_seq", res->next_after_seq ? nlohmann::json(*res->next_after_seq)
                                                                       : nlohmann::json(nullptr)},
                                {"committed_seq", ctx.store->committed_seq()}};
            return json_response(200, body);
        },
        {.offload = true});

    auto events = [ctx](const ApiRequest& req) {
        if (!ctx.bus) return error_response(503, "no_event_bus", "live events are not available");
        audit::BusFilter f;
        try {
            read_filters(req.query, nullptr, &f, {"task", "tool", "layer", "decision", "kind"});
        } catch (const BadParam& e) {
            return error_response(400, "bad_parameter", e.message);
        }
        ApiResponse resp;
        resp.content_type = "text/event-stream";
        resp.stream = std::make_shared<BusStream>(ctx.bus->subscribe(std::move(f), ctx.stream_queue));
        return resp;
    };
    r.add("GET", "/v1/events", events);
    r.add("GET", "/v1/events/ws", events, {.websocket = true});
}

}  // namespace bulwark::http
