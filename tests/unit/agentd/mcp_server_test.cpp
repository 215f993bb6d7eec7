// agentd/mcp/mcp_server.cpp over a fake daemon API (its ApiCall): what a
// session does when the daemon restarts under it. No root, no daemon.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <deque>
#include <set>
#include <mutex>
#include <string>

#include "mcp/mcp_server.h"

using nlohmann::json;
using bulwark::AgentdError;
using bulwark::AgentdReply;

namespace {

// A daemon that knows tools and tasks, can "restart" (forgets its tasks) and
// can fail the transport a number of times.
struct FakeDaemon {
    std::mutex mu;
    uint64_t next_task = 1;
    std::set<uint64_t> tasks;
    std::vector<json> created;                  // POST /v1/tasks bodies
    std::vector<json> execs;                    // POST /v1/tasks/{id}/exec bodies
    std::deque<AgentdError::Kind> failures;     // next calls' transport failures
    int exec_calls = 0;
    std::string workdir_root = "/nonexistent-bulwark-unit";  // where new tasks' work directories are
    json exec_extra = json::object();           // merged into every exec reply

    std::expected<AgentdReply, AgentdError> call(std::string_view m, std::string_view t,
                                                 const std::optional<json>& body) {
        std::lock_guard lk(mu);
        if (!failures.empty()) {
            auto k = failures.front();
            failures.pop_front();
            return std::unexpected(AgentdError{k, k == AgentdError::Kind::Lost ? "read: end of stream"
                                                                               : "connect: No such file"});
        }
        std::string target(t);
        auto reply = [](int status, json b) { return AgentdReply{status, b, b.dump()}; };
        if (m == "GET" && target == "/v1/tools")
            return reply(200, {{"tools", {{{"name", "sh"}, {"description", "a shell"}, {"binaries", {"/usr/bin/dash"}}}}}});
        if (m == "GET" && target.ends_with("/explain")) return reply(200, {{"text", "policy sh"}});
        if (m == "POST" && target == "/v1/tasks") {
            created.push_back(*body);
            uint64_t id = next_task++;
            tasks.insert(id);
            std::string wd = body->contains("workdir") ? (*body)["workdir"].get<std::string>()
                                                       : workdir_root + "/" + std::to_string(id);
            return reply(201, {{"id", id}, {"workdir", wd}});
        }
        if (m == "POST" && target.starts_with("/v1/tasks/") && target.ends_with("/exec")) {
            ++exec_calls;
            execs.push_back(*body);
            uint64_t id = std::stoull(target.substr(10));
            if (!tasks.contains(id))
                return reply(404, {{"error", {{"code", "unknown_task"}, {"message", "no task " + std::to_string(id)}}}});
            json r = {{"task_id", id},  {"run_id", exec_calls}, {"outcome", "exited"},      {"exit_status", 0},
                      {"stdout", "ok\n"}, {"stderr", ""},          {"denials", json::array()}};
            r.update(exec_extra);
            return reply(200, r);
        }
        if (m == "DELETE") return reply(200, json::object());
        return reply(404, {{"error", {{"code", "not_found"}, {"message", target}}}});
    }
    void restart() {
        std::lock_guard lk(mu);
        tasks.clear();  // a restarted daemon knows no task of the one before
    }
};

json rpc(uint64_t id, const std::string& method, json params) {
    return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

json call_sh(bulwark::mcp::Server& s, uint64_t id) {
    auto r = s.handle(rpc(id, "tools/call", {{"name", "sh"}, {"arguments", {{"args", {"-c", "echo ok"}}}}}));
    REQUIRE(r);
    return *r;
}

std::string text_of(const json& r) { return r["result"]["content"][0]["text"].get<std::string>(); }

struct Session {
    FakeDaemon d;
    bulwark::mcp::Server s;
    explicit Session(std::chrono::milliseconds reconnect = std::chrono::milliseconds(2000))
        : s([this](std::string_view m, std::string_view t, const std::optional<json>& b) { return d.call(m, t, b); },
            {.tools = {"sh"}, .grant = {{"files", json::array()}}, .label = "unit", .reconnect_wait = reconnect}) {
        auto init = s.handle(rpc(1, "initialize", {{"protocolVersion", "2025-06-18"}, {"capabilities", json::object()},
                                                   {"clientInfo", {{"name", "t"}, {"version", "0"}}}}));
        REQUIRE(init);
        REQUIRE(init->contains("result"));
    }
};

}  // namespace

TEST_CASE("mcp session: a restarted daemon's unknown task is renewed with the same tools, grant and workdir",
          "[mcp][restart]") {
    Session x;
    REQUIRE(x.s.task_id() == 1u);
    auto first = call_sh(x.s, 2);
    CHECK(first["result"]["isError"] == false);
    CHECK(text_of(first).starts_with("sh: exit status 0"));

    x.d.restart();
    auto after = call_sh(x.s, 3);
    INFO(after.dump());
    CHECK(after["result"]["isError"] == false);
    CHECK_THAT(text_of(after), Catch::StartsWith("Note: agentd restarted and this session's task 1 was gone"));
    CHECK_THAT(text_of(after), Catch::Contains("continues in task 2"));
    CHECK(x.s.task_id() == 2u);
    REQUIRE(x.d.created.size() == 2);
    CHECK(x.d.created[1]["tools"] == x.d.created[0]["tools"]);
    CHECK(x.d.created[1]["grant"] == x.d.created[0]["grant"]);
    CHECK(x.d.created[1]["label"] == "unit");
    // The old work directory does not exist here: the new task gets a new one.
    CHECK_FALSE(x.d.created[1].contains("workdir"));

    // The next call goes to the new task without a note.
    auto next = call_sh(x.s, 4);
    CHECK(text_of(next).starts_with("sh: exit status 0"));
    CHECK(x.d.created.size() == 2);
}

TEST_CASE("mcp session: a renewed task keeps the work directory while it is there", "[mcp][restart]") {
    char tmpl[] = "/tmp/bulwark-unit-mcp-XXXXXX";
    REQUIRE(::mkdtemp(tmpl));
    std::string root = tmpl;
    REQUIRE(::mkdir((root + "/1").c_str(), 0700) == 0);
    FakeDaemon d;
    d.workdir_root = root;
    bulwark::mcp::Server s([&](std::string_view m, std::string_view t, const std::optional<json>& b) { return d.call(m, t, b); },
                           {.tools = {"sh"}});
    REQUIRE(s.handle(rpc(1, "initialize", {{"protocolVersion", "2025-06-18"}, {"capabilities", json::object()},
                                           {"clientInfo", {{"name", "t"}, {"version", "0"}}}})));
    d.restart();
    auto r = call_sh(s, 2);
    CHECK_THAT(text_of(r), Catch::Contains("work directory " + root + "/1"));
    REQUIRE(d.created.size() == 2);
    CHECK(d.created[1]["workdir"] == root + "/1");
    ::rmdir((root + "/1").c_str());
    ::rmdir(root.c_str());
}

TEST_CASE("mcp session: a call waits for a daemon that is restarting", "[mcp][restart]") {
    Session x;
    x.d.failures = {AgentdError::Kind::Unavailable, AgentdError::Kind::Unavailable};
    auto r = call_sh(x.s, 2);
    CHECK(r["result"]["isError"] == false);
    CHECK(x.d.failures.empty());
}

TEST_CASE("mcp session: no daemon within the reconnect wait is a tool error, not a hang", "[mcp][restart]") {
    Session x(std::chrono::milliseconds(200));
    x.d.failures.assign(1000, AgentdError::Kind::Unavailable);
    auto t0 = std::chrono::steady_clock::now();
    auto r = call_sh(x.s, 2);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    CHECK(r["result"]["isError"] == true);
    CHECK_THAT(text_of(r), Catch::StartsWith("sh was not run: no agentd accepted the connection"));
}

TEST_CASE("mcp session: a connection lost during the call says the tool may have run; it is not sent again",
          "[mcp][restart]") {
    Session x;
    x.d.failures = {AgentdError::Kind::Lost};
    int before = x.d.exec_calls;
    auto r = call_sh(x.s, 2);
    CHECK(r["result"]["isError"] == true);
    CHECK_THAT(text_of(r), Catch::Contains("agentd ended during the call"));
    CHECK_THAT(text_of(r), Catch::Contains("the tool may have run"));
    CHECK(x.d.exec_calls == before);  // the lost attempt never reached the fake; no retry either
}

TEST_CASE("mcp session: initialize without a daemon fails at once", "[mcp]") {
    FakeDaemon d;
    d.failures.assign(10, AgentdError::Kind::Unavailable);
    bulwark::mcp::Server s([&](std::string_view m, std::string_view t, const std::optional<json>& b) { return d.call(m, t, b); },
                           {.tools = {"sh"}});
    auto t0 = std::chrono::steady_clock::now();
    auto r = s.handle(rpc(1, "initialize", {{"protocolVersion", "2025-06-18"}, {"capabilities", json::object()},
                                            {"clientInfo", {{"name", "t"}, {"version", "0"}}}}));
    REQUIRE(r);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
    CHECK((*r)["error"]["code"] == -32603);
}

TEST_CASE("mcp session: tools/call's _meta.traceparent goes with the run; a malformed one is refused", "[mcp][trace]") {
    Session x;
    const std::string tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    auto r = x.s.handle(rpc(2, "tools/call", {{"name", "sh"}, {"arguments", {{"args", {"-c", "true"}}}},
                                              {"_meta", {{"traceparent", tp}, {"progressToken", 1}}}}));
    REQUIRE(r);
    CHECK((*r)["result"]["isError"] == false);
    REQUIRE(x.d.execs.size() == 1);
    CHECK(x.d.execs[0]["traceparent"] == tp);

    auto plain = call_sh(x.s, 3);
    CHECK(plain["result"]["isError"] == false);
    REQUIRE(x.d.execs.size() == 2);
    CHECK_FALSE(x.d.execs[1].contains("traceparent"));

    auto bad = x.s.handle(rpc(4, "tools/call", {{"name", "sh"}, {"_meta", {{"traceparent", "00-abc"}}}}));
    REQUIRE(bad);
    INFO(bad->dump());
    CHECK((*bad)["error"]["code"] == -32602);
    CHECK((*bad)["error"]["message"] ==
          "_meta.traceparent: must be a W3C traceparent: 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>");
    CHECK(x.d.execs.size() == 2);  // not run
}

TEST_CASE("mcp result: a run the tool's profile found unusual says so, in text and structured", "[mcp][profiles]") {
    Session sess;
    auto usual = call_sh(sess.s, 2);
    CHECK(text_of(usual).find("unusual") == std::string::npos);
    CHECK_FALSE(usual["result"]["structuredContent"].contains("unusual"));
    sess.d.exec_extra = {{"profile",
                          {{"findings", {{{"feature", "exec"}, {"kind", "first-time"}, {"item", "/usr/bin/nc"}}}},
                           {"response", "recorded"},
                           {"summary", "unusual for sh: first-time binary /usr/bin/nc in 412 runs"}}}};
    auto odd = call_sh(sess.s, 3);
    CHECK(text_of(odd).find("--- unusual for sh: first-time binary /usr/bin/nc in 412 runs (response: recorded)\n") !=
          std::string::npos);
    CHECK(odd["result"]["structuredContent"]["unusual"] ==
          "unusual for sh: first-time binary /usr/bin/nc in 412 runs (response: recorded)");
    // A narrowing tells the agent what its next runs of the tool are under.
    sess.d.exec_extra["profile"]["response"] = "narrowed";
    sess.d.exec_extra["profile"]["narrowed"] = {{"epoch", 2}, {"finding_seq", 54}};
    CHECK(call_sh(sess.s, 4)["result"]["structuredContent"]["unusual"] ==
          "unusual for sh: first-time binary /usr/bin/nc in 412 runs (response: narrowed: the tool's further runs in "
          "this task are held to what its profile covers (epoch 2))");
    sess.d.exec_extra["profile"]["narrowed"] = {{"held", "its rule file changed since agentd loaded it"}};
    CHECK_THAT(call_sh(sess.s, 5)["result"]["structuredContent"]["unusual"].get<std::string>(),
               Catch::EndsWith("(response: narrowed; no narrowing could be made (its rule file changed since agentd "
                               "loaded it): the tool's runs in this task wait for a grant update)"));
}
