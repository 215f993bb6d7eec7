// `agentd serve` with the BPF layer: every exec's cgroup bound through the
// TaskManager's binder, decisions into the audit store (exec response,
// /v1/audit, the event stream), grant updates and time-boxed grants switching
// the policy of a running tool, and nothing left after the runs.
#include "bpfrun_env.h"

using namespace bpfrun_test;

TEST_CASE("agentd serve: decisions in the exec response, /v1/audit and the event stream; health shows the layer",
          "[bpfrun][serve]") {
    Env& e = Env::get();
    Serve d;
    auto h = d.call("GET", "/v1/health");
    INFO(h.raw);
    REQUIRE(h.status == 200);
    CHECK(h.body["host"]["bpf"]["programs"]["cgroup/connect4"] == "enforcing");
    CHECK(h.body["host"]["bpf"]["network_rules"] == "enforcing");
    CHECK(h.body["host"]["bpf"]["programs"]["lsm/file_open"].get<std::string>().starts_with("unavailable: ") ==
          (h.body["host"]["bpf"]["programs"]["lsm/file_open"] != "enforcing"));

    // Subscribe to the stream first.
    int sfd = connect_unix(d.sock);
    REQUIRE(sfd >= 0);
    REQUIRE(send_all(sfd, "GET /v1/events?decision=deny&tool=netprobe HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::string sse;
    read_until(sfd, ": subscribed", 5000ms, &sse);
    REQUIRE(sse.find(": subscribed") != std::string::npos);

    uint64_t id = d.create_task({{"tools", {"netprobe"}}});
    const std::string port = std::to_string(kTcpPort);
    auto ok = d.call("POST", "/v1/tasks/" + std::to_string(id) + "/exec",
                     json{{"tool", "netprobe"}, {"argv", {NETPROBE_BINARY, "tcp", "127.0.0.1", port}}});
    INFO(ok.raw.substr(0, 4000));
    REQUIRE(ok.status == 200);
    CHECK(ok.body["stdout"] == "OK\n");
    auto deny = d.call("POST", "/v1/tasks/" + std::to_string(id) + "/exec",
                       json{{"tool", "netprobe"}, {"argv", {NETPROBE_BINARY, "tcp", "127.0.0.2", port}}});
    INFO(deny.raw.substr(0, 4000));
    REQUIRE(deny.status == 200);
    CHECK(deny.body["stdout"] == "DENIED EPERM\n");
    uint64_t run = deny.body["run_id"].get<uint64_t>();
    const json* row = nullptr;
    for (const auto& r : deny.body["decisions"])
        if (r["decision"] == "deny" && r["op"] == "connect") row = &r;
    REQUIRE(row);
    CHECK((*row)["run_id"] == run);
    CHECK((*row)["task_id"] == id);
    CHECK((*row)["layer"] == "sock_addr");
    CHECK((*row)["object"] == "tcp 127.0.0.2:" + port);
    CHECK((*row)["policy_version"] == deny.body["policy_version"]);
    CHECK((*row)["rule"]["line"] == e.deny_line);
    CHECK(deny.body["denials"].size() >= 1);

    auto rows = d.call("GET", "/v1/audit?kind=decision&run=" + std::to_string(run));
    INFO(rows.raw.substr(0, 2000));
    REQUIRE(rows.status == 200);
    bool in_audit = false;
    for (const auto& r : rows.body["rows"])
        if (r["object"] == "tcp 127.0.0.2:" + port && r["decision"] == "deny") in_audit = true;
    CHECK(in_audit);

    read_until(sfd, "127.0.0.2", 5000ms, &sse);
    CHECK(sse.find("tcp 127.0.0.2:" + port) != std::string::npos);
    ::close(sfd);
}

// A netprobe task granted UDP to kUdpPort only: its id and workdir.
std::pair<uint64_t, std::string> narrow_netprobe_task(const Serve& d) {
    uint64_t id = d.create_task({{"tools", {"netprobe"}}, {"grant", net_grant(std::to_string(kUdpPort))}});
    auto t = d.call("GET", "/v1/tasks/" + std::to_string(id));
    REQUIRE(t.status == 200);
    return {id, t.body["workdir"].get<std::string>()};
}

TEST_CASE("agentd serve: a grant update switches a RUNNING tool's next send; a time-boxed grant's end reverts it",
          "[bpfrun][serve][grant]") {
    Serve d;
    auto [id, wd] = narrow_netprobe_task(d);
    const std::string target = std::to_string(kUdpPort2);

    Serve::Reply reply;
    std::thread th([&] {
        reply = d.call("POST", "/v1/tasks/" + std::to_string(id) + "/exec",
                       json{{"tool", "netprobe"},
                            {"argv", {NETPROBE_BINARY, "steps", wd, "udp-send", "127.0.0.1", target, "4"}}},
                       120s);
    });
    auto step = [&](int i) {
        std::ofstream(wd + "/go" + std::to_string(i)) << "go";
        std::string res = wd + "/res" + std::to_string(i);
        for (int w = 0; w < 2000 && ::access(res.c_str(), F_OK) != 0; ++w) std::this_thread::sleep_for(10ms);
        std::ifstream f(res);
        std::string line;
        std::getline(f, line);
        return line;
    };
    auto put = [&](const json& body) {
        auto r = d.call("PUT", "/v1/tasks/" + std::to_string(id) + "/grant", body);
        INFO(r.raw);
        REQUIRE(r.status == 200);
    };
    const json wide = net_grant(std::to_string(kUdpPort) + "-" + std::to_string(kUdpPort2));

    CHECK(step(1) == "DENIED EPERM");       // the task's grant: only kUdpPort
    put({{"grant", wide}, {"expires_in_ms", 2500}});
    CHECK(step(2) == "OK");                 // the same running process, next operation
    std::this_thread::sleep_for(4000ms);    // the time box ends: back to the narrow grant
    CHECK(step(3) == "DENIED EPERM");
    put({{"grant", wide}});
    CHECK(step(4) == "OK");
    th.join();
    INFO(reply.raw.substr(0, 4000));
    REQUIRE(reply.status == 200);
    CHECK(reply.body["exit_status"] == 0);
    std::set<uint64_t> deny_versions;
    for (const auto& r : reply.body["decisions"])
        if (r["decision"] == "deny" && r["object"] == "udp 127.0.0.1:" + target)
            deny_versions.insert(r["policy_version"].get<uint64_t>());
    CHECK(deny_versions.size() == 2);  // epoch 1 and the epoch the expiry returned to
}

TEST_CASE("agentd serve: grant switches under a running tool's send loop never deny what both grants allow",
          "[bpfrun][serve][grant]") {
    Serve d;
    auto [id, wd] = narrow_netprobe_task(d);
    Serve::Reply reply;
    std::thread th([&] {
        reply = d.call("POST", "/v1/tasks/" + std::to_string(id) + "/exec",
                       json{{"tool", "netprobe"},
                            {"argv", {NETPROBE_BINARY, "loop", wd, "udp-send", "127.0.0.1", std::to_string(kUdpPort)}}},
                       180s);
    });
    const json narrow = net_grant(std::to_string(kUdpPort));
    const json wide = net_grant(std::to_string(kUdpPort) + "-" + std::to_string(kUdpPort2));
    for (int w = 0; w < 3000 && ::access((wd + "/started").c_str(), F_OK) != 0; ++w) std::this_thread::sleep_for(10ms);
    REQUIRE(::access((wd + "/started").c_str(), F_OK) == 0);
    int switches = 0;
    for (int i = 0; i < 60; ++i) {
        auto r = d.call("PUT", "/v1/tasks/" + std::to_string(id) + "/grant", json{{"grant", i % 2 ? narrow : wide}});
        INFO(r.raw);
        REQUIRE(r.status == 200);
        ++switches;
    }
    std::ofstream(wd + "/stop") << "stop";
    th.join();
    INFO(reply.raw.substr(0, 4000));
    REQUIRE(reply.status == 200);
    CHECK(reply.body["exit_status"] == 0);
    long ok = -1, denied = -1;
    REQUIRE(std::sscanf(reply.body["stdout"].get<std::string>().c_str(), "ok %ld denied %ld", &ok, &denied) == 2);
    INFO("switches " << switches << " ok " << ok << " denied " << denied);
    CHECK(ok > 1000);
    CHECK(denied == 0);
}

TEST_CASE("after the runs no map entries and no cgroups are left", "[bpfrun][cleanup]") {
    {
        Serve d;
        uint64_t id = d.create_task({{"tools", {"netprobe"}}});
        for (int i = 0; i < 3; ++i) {
            auto r = d.call("POST", "/v1/tasks/" + std::to_string(id) + "/exec",
                            json{{"tool", "netprobe"},
                                 {"argv", {NETPROBE_BINARY, "udp-send", "127.0.0.1", std::to_string(kUdpDenied)}}});
            REQUIRE(r.status == 200);
            CHECK(r.body["stdout"] == "DENIED EPERM\n");
        }
    }
    auto l = leftovers();
    CHECK(l.bindings == 0);
    CHECK(l.used_slots == 0);
    CHECK(l.leaves == 0);
}

TEST_CASE("agentd serve: an exec's report names another daemon reading the same ring buffer",
          "[bpfrun][serve][readers]") {
    Serve a;
    auto [id, wd] = narrow_netprobe_task(a);
    auto exec = [&] {
        auto r = a.call("POST", "/v1/tasks/" + std::to_string(id) + "/exec",
                        json{{"tool", "netprobe"},
                             {"argv", {NETPROBE_BINARY, "udp-send", "127.0.0.1", std::to_string(kUdpPort)}}});
        INFO(r.raw.substr(0, 3000));
        REQUIRE(r.status == 200);
        CHECK(r.body["stdout"] == "OK\n");
        return r.body["report"]["warnings"].dump();
    };
    CHECK(exec().find("ring buffer is also read") == std::string::npos);
    Serve b;
    std::this_thread::sleep_for(1100ms);  // past the reader scan's one-second reuse
    CHECK_THAT(exec(), Catch::Contains("ring buffer is also read by pid " + std::to_string(b.child->pid) + " (agentd)"));
}
