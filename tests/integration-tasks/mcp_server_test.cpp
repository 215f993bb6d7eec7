// agentd/mcp/mcp_server.h without stdio: the protocol object driven message by
// message, its backend a real `agentd serve` reached through AgentdClient.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "mcp/agentd_client.h"
#include "daemon.h"
#include "mcp/mcp_server.h"

using namespace bulwark::test;
using nlohmann::json;

namespace {

json rpc(uint64_t id, const std::string& method, json params = json::object()) {
    return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

json init_params(const std::string& version) {
    return {{"protocolVersion", version}, {"capabilities", json::object()}, {"clientInfo", {{"name", "t"}, {"version", "0"}}}};
}

}  // namespace

TEST_CASE("mcp server: a 2024-11-05 session gets text results without output schemas", "[mcp]") {
    Daemon d;
    bulwark::AgentdClient client(d.sock);
    bulwark::mcp::Server server(
        [&](std::string_view m, std::string_view t, const std::optional<json>& b) { return client.call(m, t, b); },
        {.tools = {"cat"}, .grant = nullptr, .label = "old client"});

    auto init = server.handle(rpc(1, "initialize", init_params("2024-11-05")));
    REQUIRE(init);
    INFO(init->dump());
    CHECK((*init)["result"]["protocolVersion"] == "2024-11-05");
    REQUIRE(server.task_id());
    auto task = d.call("GET", "/v1/tasks/" + std::to_string(*server.task_id()));
    CHECK(task.body["label"] == "old client");
    CHECK(task.body["tools"] == json::array({"cat"}));

    auto list = server.handle(rpc(2, "tools/list"));
    REQUIRE(list);
    REQUIRE((*list)["result"]["tools"].size() == 1);
    const auto& tool = (*list)["result"]["tools"][0];
    CHECK(tool["name"] == "cat");
    CHECK_FALSE(tool.contains("outputSchema"));  // structured content came with 2025-06-18
    CHECK(tool["inputSchema"]["properties"].contains("files"));

    auto call = server.handle(rpc(3, "tools/call", {{"name", "cat"}, {"arguments", {{"args", {"-"}}, {"stdin", "abc\n"}}}}));
    REQUIRE(call);
    INFO(call->dump());
    CHECK((*call)["result"]["isError"] == false);
    CHECK_FALSE((*call)["result"].contains("structuredContent"));
    std::string text = (*call)["result"]["content"][0]["text"];
    CHECK_THAT(text, Catch::StartsWith("cat: exit status 0 (run "));
    CHECK_THAT(text, Catch::Contains("--- stdout ---\nabc\n"));
    CHECK_THAT(text, Catch::Contains("--- stderr: (empty)"));

    // A failed run: isError, the status and stderr in the text.
    auto fail = server.handle(rpc(4, "tools/call", {{"name", "cat"}, {"arguments", {{"args", {"missing.txt"}}}}}));
    REQUIRE(fail);
    CHECK((*fail)["result"]["isError"] == true);
    std::string ftext = (*fail)["result"]["content"][0]["text"];
    CHECK_THAT(ftext, Catch::StartsWith("cat: exit status 1"));
    CHECK_THAT(ftext, Catch::Contains("missing.txt: No such file or directory"));

    // Unknown argument keys are tool errors naming the key; no run is made.
    auto bad = server.handle(rpc(5, "tools/call", {{"name", "cat"}, {"arguments", {{"argv", {"x"}}}}}));
    REQUIRE(bad);
    CHECK((*bad)["result"]["isError"] == true);
    CHECK_THAT((*bad)["result"]["content"][0]["text"].get<std::string>(), Catch::Contains("arguments.argv: unknown argument"));
    CHECK(d.call("GET", "/v1/tasks/" + std::to_string(*server.task_id())).body["runs"].size() == 2);

    // Batches are JSON-RPC in 2025-03-26 only.
    auto batch = server.handle(json::array({rpc(6, "ping")}));
    REQUIRE(batch);
    CHECK((*batch)["error"]["code"] == bulwark::mcp::kInvalidRequest);

    REQUIRE(server.close());
    CHECK(d.call("GET", "/v1/tasks/" + std::to_string(*server.task_id())).body["state"] == "closed");
    auto after = server.handle(rpc(7, "tools/list"));
    CHECK((*after)["error"]["code"] == bulwark::mcp::kInvalidRequest);
}

TEST_CASE("mcp server: 2025-03-26 batches; a grant the rules refuse fails initialize with the reasons", "[mcp]") {
    Daemon d;
    bulwark::AgentdClient client(d.sock);
    auto api = [&](std::string_view m, std::string_view t, const std::optional<json>& b) { return client.call(m, t, b); };

    bulwark::mcp::Server server(api, {.tools = {"cat"}, .grant = nullptr, .label = "batch"});
    REQUIRE(server.handle(rpc(1, "initialize", init_params("2025-03-26"))));
    CHECK(server.protocol_version() == "2025-03-26");
    json note = {{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}};
    auto out = server.handle(json::array({rpc(2, "ping"), note, rpc(3, "tools/list")}));
    REQUIRE(out);
    REQUIRE(out->is_array());
    REQUIRE(out->size() == 2);  // the notification is not answered
    CHECK((*out)[0]["id"] == 2);
    CHECK((*out)[1]["result"]["tools"][0]["name"] == "cat");
    CHECK(server.handle(json::array())->at("error")["code"] == bulwark::mcp::kInvalidRequest);
    REQUIRE(server.close());

    // cat may not write: a grant naming writes would widen it.
    bulwark::mcp::Server widening(
        api, {.tools = {"cat"}, .grant = {{"files", {{{"path", "${workdir}"}, {"rights", {"write"}}}}}}, .label = "w"});
    auto init = widening.handle(rpc(1, "initialize", init_params("2025-06-18")));
    REQUIRE(init);
    INFO(init->dump());
    CHECK((*init)["error"]["code"] == bulwark::mcp::kInternalError);
    std::string msg = (*init)["error"]["message"];
    CHECK_THAT(msg, Catch::Contains("grant_widens"));
    CHECK_THAT(msg, Catch::Contains("cat: files.write"));
    CHECK_FALSE(widening.task_id());
}

TEST_CASE("mcp server: with the default tool set, a tool whose host does not resolve is listed as unavailable "
          "and the others are served",
          "[mcp]") {
    namespace fs = std::filesystem;
    TempDir rules;
    fs::copy(fs::path(BULWARK_RULES_DIR) / "base", rules.path / "base", fs::copy_options::recursive);
    fs::copy(fs::path(BULWARK_RULES_DIR) / "cat.yaml", rules.path / "cat.yaml");
    std::ifstream in(fs::path(BULWARK_RULES_DIR) / "curl.yaml");
    std::string curl((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string host = "api.bulwark-test.invalid";
    auto at = curl.find("host: api.github.com");
    REQUIRE(at != std::string::npos);
    curl.replace(at + 6, std::string("api.github.com").size(), host);
    std::ofstream(rules.path / "curl.yaml") << curl;
    Daemon d({}, rules.path.string());
    bulwark::AgentdClient client(d.sock);
    auto api = [&](std::string_view m, std::string_view t, const std::optional<json>& b) {
        return client.call(m, t, b);
    };

    // Control: the daemon cannot set curl up for a task (422 naming the host);
    // skip_unavailable leaves it out and says why.
    auto refused = d.call("POST", "/v1/tasks", json{{"tools", {"cat", "curl"}}});
    CHECK(refused.status == 422);
    CHECK_THAT(refused.raw, Catch::Contains(host));
    auto skipped = d.call("POST", "/v1/tasks", json{{"tools", {"cat", "curl"}}, {"skip_unavailable", true}});
    REQUIRE(skipped.status == 201);
    CHECK(skipped.body["tools"] == json::array({"cat"}));
    REQUIRE(skipped.body["unavailable"].size() == 1);
    CHECK(skipped.body["unavailable"][0]["tool"] == "curl");
    CHECK_THAT(skipped.body["unavailable"][0]["error"].get<std::string>(), Catch::Contains(host));
    auto none = d.call("POST", "/v1/tasks", json{{"tools", {"curl"}}, {"skip_unavailable", true}});
    CHECK(none.status == 422);  // nothing left to serve: refused, never an empty task
    CHECK(d.call("POST", "/v1/tasks", json{{"tools", {"cat"}}, {"skip_unavailable", 1}}).status == 400);

    bulwark::mcp::Server server(api, {.tools = {}, .grant = nullptr, .label = "offline"});
    auto init = server.handle(rpc(1, "initialize", init_params("2025-06-18")));
    REQUIRE(init);
    INFO(init->dump());
    REQUIRE(init->contains("result"));
    CHECK_THAT((*init)["result"]["instructions"].get<std::string>(), Catch::Contains("curl is unavailable in this session"));
    auto list = server.handle(rpc(2, "tools/list"));
    REQUIRE(list);
    const auto& tools = (*list)["result"]["tools"];
    REQUIRE(tools.size() == 2);
    const json& cat = tools[0]["name"] == "cat" ? tools[0] : tools[1];
    const json& missing = tools[0]["name"] == "curl" ? tools[0] : tools[1];
    CHECK(cat["name"] == "cat");
    CHECK_FALSE(cat.contains("_meta"));
    CHECK(missing["name"] == "curl");
    CHECK(missing["title"] == "curl (unavailable)");
    CHECK_THAT(missing["description"].get<std::string>(), Catch::StartsWith("UNAVAILABLE in this session: "));
    CHECK_THAT(missing["description"].get<std::string>(), Catch::Contains(host));
    CHECK_THAT(missing["_meta"]["bulwark/unavailable"].get<std::string>(), Catch::Contains(host));

    auto ok = server.handle(rpc(3, "tools/call", {{"name", "cat"}, {"arguments", {{"args", {"-"}}, {"stdin", "served\n"}}}}));
    REQUIRE(ok);
    INFO(ok->dump());
    CHECK((*ok)["result"]["isError"] == false);
    CHECK((*ok)["result"]["structuredContent"]["stdout"] == "served\n");
    auto no = server.handle(rpc(4, "tools/call", {{"name", "curl"}, {"arguments", {{"args", {"https://x.invalid/"}}}}}));
    REQUIRE(no);
    CHECK((*no)["result"]["isError"] == true);
    CHECK_THAT((*no)["result"]["content"][0]["text"].get<std::string>(),
               Catch::StartsWith("curl is unavailable in this session: "));
    auto task = d.call("GET", "/v1/tasks/" + std::to_string(*server.task_id()));
    CHECK(task.body["tools"] == json::array({"cat"}));
    CHECK(task.body["runs"].size() == 1);  // the unavailable tool never ran
    REQUIRE(server.close());

    // Tools asked for by name are all required.
    bulwark::mcp::Server strict(api, {.tools = {"cat", "curl"}, .grant = nullptr, .label = "strict"});
    auto sinit = strict.handle(rpc(1, "initialize", init_params("2025-06-18")));
    REQUIRE(sinit);
    CHECK((*sinit)["error"]["code"] == bulwark::mcp::kInternalError);
    CHECK_THAT((*sinit)["error"]["message"].get<std::string>(), Catch::Contains(host));
}
