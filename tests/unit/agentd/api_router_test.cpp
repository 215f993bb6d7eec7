// agentd/api/http_api.cpp Router: which handler a method and path reach,
// what a {param} segment takes, and the 404 and 405 a client sees.
#include <catch2/catch.hpp>

#include "api/http_api.h"

using namespace bulwark::http;
using nlohmann::json;

namespace {

Router routes() {
    Router r;
    auto named = [](std::string name) {
        return [name](const ApiRequest& req) {
            json j{{"route", name}};
            for (const auto& [k, v] : req.params) j["params"][k] = v;
            return json_response(200, j);
        };
    };
    r.add("GET", "/v1/tasks", named("list"));
    r.add("POST", "/v1/tasks", named("create"));
    r.add("GET", "/v1/tasks/{id}", named("show"));
    r.add("DELETE", "/v1/tasks/{id}", named("close"));
    r.add("POST", "/v1/tasks/{id}/exec", named("exec"));
    r.add("GET", "/v1/tools/{name}/explain", named("explain"));
    return r;
}

ApiResponse call(const Router& r, std::string method, std::string path) {
    ApiRequest req;
    req.method = std::move(method);
    req.path = std::move(path);
    return r.dispatch(req);
}

json body(const ApiResponse& resp) { return json::parse(resp.body); }

}  // namespace

TEST_CASE("a method and path reach their handler, {param} segments filled") {
    Router r = routes();
    CHECK(body(call(r, "GET", "/v1/tasks"))["route"] == "list");
    CHECK(body(call(r, "POST", "/v1/tasks"))["route"] == "create");
    auto show = body(call(r, "GET", "/v1/tasks/42"));
    CHECK(show["route"] == "show");
    CHECK(show["params"]["id"] == "42");
    auto exec = body(call(r, "POST", "/v1/tasks/7/exec"));
    CHECK(exec["route"] == "exec");
    CHECK(exec["params"]["id"] == "7");
    CHECK(body(call(r, "GET", "/v1/tools/cat/explain"))["params"]["name"] == "cat");
    // Trailing slashes and repeated slashes name the same segments.
    CHECK(body(call(r, "GET", "/v1/tasks/42/"))["route"] == "show");
}

TEST_CASE("an unknown path is 404; a known path with another method is 405 with Allow") {
    Router r = routes();
    auto missing = call(r, "GET", "/v1/task");
    CHECK(missing.status == 404);
    CHECK(body(missing) == json{{"error", {{"code", "not_found"}, {"message", "no such endpoint: /v1/task"}}}});
    // One segment more or less than every route is not a match either.
    CHECK(call(r, "POST", "/v1/tasks/7/exec/now").status == 404);
    CHECK(call(r, "GET", "/v1/tools/cat").status == 404);

    auto wrong = call(r, "PUT", "/v1/tasks/3");
    CHECK(wrong.status == 405);
    CHECK(body(wrong) ==
          json{{"error", {{"code", "method_not_allowed"}, {"message", "PUT is not allowed on /v1/tasks/3"}}}});
    REQUIRE(wrong.headers.size() == 1);
    CHECK(wrong.headers[0] == std::pair<std::string, std::string>{"Allow", "GET, DELETE"});
}

TEST_CASE("a handler that throws answers 500 with its message, and the router goes on") {
    Router r;
    r.add("GET", "/v1/boom", [](const ApiRequest&) -> ApiResponse { throw std::runtime_error("it broke"); });
    r.add("GET", "/v1/fine", [](const ApiRequest&) { return json_response(200, json{{"ok", true}}); });
    auto boom = call(r, "GET", "/v1/boom");
    CHECK(boom.status == 500);
    CHECK(body(boom)["error"]["code"] == "internal");
    CHECK(body(boom)["error"]["message"] == "it broke");
    CHECK(call(r, "GET", "/v1/fine").status == 200);
}
