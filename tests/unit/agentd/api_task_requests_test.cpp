// agentd/api/task_requests.cpp: an exec body read into the task manager's
// typed request. Each refusal is user-facing text naming the field; the
// texts are pinned here, as the compiler's diagnostics are.
#include <catch2/catch.hpp>

#include "api/task_requests.h"

using bulwark::TaskErrc;
using bulwark::http::parse_exec;
using nlohmann::json;

namespace {

// The refusal's code and text for a body ("" when it parses).
std::pair<TaskErrc, std::string> refusal(const json& body) {
    auto r = parse_exec(body);
    if (r) return {TaskErrc::Internal, ""};
    return {r.error().code, r.error().message};
}

}  // namespace

TEST_CASE("an exec body reads into a typed request") {
    auto r = parse_exec(json{{"tool", "cat"},
                             {"argv", {"cat", "notes.txt"}},
                             {"stdin", "in"},
                             {"timeout_ms", 2500u},
                             {"client_ref", "step-7"},
                             {"files", {{"notes.txt", "hello\n"}}}});
    if (!r) FAIL(r.error().message);
    CHECK(r->tool == "cat");
    CHECK(r->argv == std::vector<std::string>{"cat", "notes.txt"});
    CHECK(r->stdin_data == "in");
    CHECK(r->timeout_ms == 2500u);
    CHECK(r->client_ref == "step-7");
    REQUIRE(r->files.size() == 1);
    CHECK(r->files[0].path == "notes.txt");
    CHECK(r->files[0].content == "hello\n");

    auto bare = parse_exec(json{{"tool", "cat"}, {"argv", {"cat"}}});
    REQUIRE(bare);
    CHECK_FALSE(bare->stdin_data);
    CHECK_FALSE(bare->timeout_ms);
    CHECK(bare->client_ref.empty());
    CHECK(bare->files.empty());
}

TEST_CASE("an exec body's refusals name the field") {
    using P = std::pair<TaskErrc, std::string>;
    const auto bad = TaskErrc::BadRequest;
    CHECK(refusal(json::array()) == P{bad, "the body must be a JSON object"});
    CHECK(refusal(json{{"tool", "cat"}, {"argv", {"cat"}}, {"cwd", "/"}}) == P{bad, "unknown key 'cwd'"});
    CHECK(refusal(json{{"argv", {"cat"}}}) == P{bad, "tool: a tool name is required"});
    CHECK(refusal(json{{"tool", 7}, {"argv", {"cat"}}}) == P{bad, "tool: a tool name is required"});
    CHECK(refusal(json{{"tool", "cat"}}) == P{bad, "argv: a non-empty array of strings is required"});
    CHECK(refusal(json{{"tool", "cat"}, {"argv", json::array()}}) ==
          P{bad, "argv: a non-empty array of strings is required"});
    CHECK(refusal(json{{"tool", "cat"}, {"argv", {"cat", 1}}}) == P{bad, "argv[1]: must be a string"});
    CHECK(refusal(json{{"tool", "cat"}, {"argv", {"cat", std::string("a\0b", 3)}}}) ==
          P{bad, "argv[1]: contains NUL"});
    CHECK(refusal(json{{"tool", "cat"}, {"argv", json(std::vector<std::string>(4097, "x"))}}) ==
          P{bad, "argv: at most 4096 arguments"});
    CHECK(refusal(json{{"tool", "cat"}, {"argv", {"cat", std::string(300 * 1024, 'x')}}}) ==
          P{bad, "argv: more than 256 KiB in all"});
    CHECK(refusal(json{{"tool", "cat"}, {"argv", {"cat"}}, {"stdin", 1}}) == P{bad, "stdin: must be a string"});
    for (const json& t : {json(0), json(-5), json("100"), json(1.5)})
        CHECK(refusal(json{{"tool", "cat"}, {"argv", {"cat"}}, {"timeout_ms", t}}) ==
              P{bad, "timeout_ms: must be a positive integer"});
    for (const json& c : {json(""), json(std::string(129, 'c')), json(3)})
        CHECK(refusal(json{{"tool", "cat"}, {"argv", {"cat"}}, {"client_ref", c}}) ==
              P{bad, "client_ref: must be a string of 1 to 128 bytes"});
}

TEST_CASE("an exec request's W3C traceparent: the header or the body field, strictly") {
    const std::string tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const json body{{"tool", "cat"}, {"argv", {"cat"}}};
    CHECK_FALSE(parse_exec(body)->traceparent);
    auto h = parse_exec(body, tp);
    REQUIRE(h);
    CHECK(h->traceparent == tp);
    json with = body;
    with["traceparent"] = tp;
    CHECK(parse_exec(with)->traceparent == tp);
    CHECK(parse_exec(with, tp)->traceparent == tp);  // both, the same

    using P = std::pair<TaskErrc, std::string>;
    const auto bad = TaskErrc::BadRequest;
    auto field = [&](json v) {
        json b = body;
        b["traceparent"] = std::move(v);
        return refusal(b);
    };
    CHECK(field(7) == P{bad, "traceparent: must be a string (a W3C traceparent)"});
    CHECK(field("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01") ==
          P{bad, "traceparent: trace id: 32 lowercase hex digits expected"});
    CHECK(field("00-00000000000000000000000000000000-00f067aa0ba902b7-01") ==
          P{bad, "traceparent: trace id: all zeros is invalid"});
    CHECK(field("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01") ==
          P{bad, "traceparent: parent id: all zeros is invalid"});
    CHECK(field("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01") ==
          P{bad, "traceparent: version ff is invalid"});
    CHECK(field("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra") ==
          P{bad, "traceparent: version 00 has exactly 55 characters"});
    CHECK(field("4bf92f3577b34da6a3ce929d0e0e4736") ==
          P{bad, "traceparent: must be a W3C traceparent: 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>"});
    auto hdr = parse_exec(body, std::string_view("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1"));
    REQUIRE_FALSE(hdr);
    CHECK(hdr.error().message ==
          "traceparent (header): must be a W3C traceparent: 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>");
    auto differ = parse_exec(with, std::string_view("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b8-01"));
    REQUIRE_FALSE(differ);
    CHECK(differ.error().message == "traceparent: the body's differs from the traceparent header");
}

TEST_CASE("a working file that may not be written is refused as such, not as a bad request") {
    for (const char* path : {"../escape", "/etc/passwd", "a/../../b"}) {
        INFO(path);
        auto r = parse_exec(json{{"tool", "cat"}, {"argv", {"cat"}}, {"files", {{path, "x"}}}});
        REQUIRE_FALSE(r);
        CHECK(r.error().code == TaskErrc::FileRefused);
        CHECK_THAT(r.error().message, Catch::Contains(path));
    }
}

TEST_CASE("a task's creation body reads into a typed request; its refusals name the field") {
    using bulwark::http::parse_create_task;
    auto r = parse_create_task(json{{"tools", {"cat", "git"}},
                                    {"label", "review"},
                                    {"workdir", "/srv/t"},
                                    {"skip_unavailable", true},
                                    {"grant", {{"network", "none"}}}});
    REQUIRE(r);
    CHECK(r->tools == std::vector<std::string>{"cat", "git"});
    CHECK(r->label == "review");
    CHECK(r->workdir == "/srv/t");
    CHECK(r->skip_unavailable);
    CHECK(r->grant == json{{"network", "none"}});
    auto bare = parse_create_task(json{{"tools", {"cat"}}});
    REQUIRE(bare);
    CHECK_FALSE(bare->workdir);
    CHECK(bare->grant.is_null());

    auto refusal = [](const json& body) {
        auto x = parse_create_task(body);
        REQUIRE_FALSE(x);
        CHECK(x.error().code == TaskErrc::BadRequest);
        return x.error().message;
    };
    CHECK(refusal(json{{"tools", {"cat"}}, {"tool", "x"}}) == "unknown key 'tool'");
    CHECK(refusal(json{{"tools", json::array()}}) == "tools: a non-empty array of tool names is required");
    CHECK(refusal(json{{"tools", {"cat", 3}}}) == "tools[1]: must be a string");
    CHECK(refusal(json{{"tools", {"cat"}}, {"skip_unavailable", "yes"}}) == "skip_unavailable: must be a boolean");
    CHECK(refusal(json{{"tools", {"cat"}}, {"label", std::string(257, 'l')}}) ==
          "label: must be a string of at most 256 bytes");
    CHECK(refusal(json{{"tools", {"cat"}}, {"workdir", 1}}) == "workdir: must be a string");
}

TEST_CASE("a grant update and a cancel read into typed requests") {
    using bulwark::http::parse_cancel;
    using bulwark::http::parse_grant_update;
    auto u = parse_grant_update(json{{"grant", nullptr}, {"expires_in_ms", 60000u}});
    REQUIRE(u);
    CHECK(u->grant.is_null());
    CHECK(u->expires_in == std::chrono::milliseconds(60000));
    CHECK(parse_grant_update(json::object()).error().message ==
          "grant: required (null for the tools' rules as they are)");
    CHECK(parse_grant_update(json{{"grant", nullptr}, {"expires_in_ms", 0u}}).error().message ==
          "expires_in_ms: must be 1..604800000");
    CHECK(parse_grant_update(json{{"grant", nullptr}, {"expires_in_ms", 604800001u}}).error().message ==
          "expires_in_ms: must be 1..604800000");
    CHECK(parse_cancel(json{{"client_ref", "step-7"}}) == "step-7");
    CHECK(parse_cancel(json{{"client_ref", "a"}, {"x", 1}}).error().message ==
          "the body must be {\"client_ref\": \"<the exec's client_ref>\"}");
}
