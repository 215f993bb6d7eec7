// `agentd run` with the BPF layer, end to end: the real agentd binary, a
// real network probe as the tool, real TCP/UDP listeners on loopback, the
// cgroup sock_addr programs deciding, and the decisions read back from the
// run report.
#include "bpfrun_env.h"

using namespace bpfrun_test;

TEST_CASE("agentd run binds the run's cgroup: the granted port works, a denied address is EPERM with its rule",
          "[bpfrun][run]") {
    Env& e = Env::get();
    const std::string port = std::to_string(kTcpPort);

    // Allowed: TCP to the granted port.
    json ok = agentd_run("netprobe", {"tcp", "127.0.0.1", port});
    INFO(ok.dump(2).substr(0, 4000));
    REQUIRE(ok["outcome"] == "exited");
    CHECK(probe_verdict(ok) == "OK");
    const json* bl = bpf_layer(ok);
    REQUIRE(bl);
    CHECK((*bl)["state"] == "enforcing");
    CHECK((*bl)["detail"].get<std::string>().find("cgroup/connect4") != std::string::npos);
    CHECK(ok["bpf"]["programs"]["cgroup/connect4"] == "enforcing");
    for (const auto& d : ok["decisions"]) CHECK(d["decision"] != "deny");

    // Denied address (an explicit deny rule): control first, unconfined.
    CHECK(control({"tcp", "127.0.0.2", port}) == "OK");
    json deny = agentd_run("netprobe", {"tcp", "127.0.0.2", port});
    INFO(deny.dump(2).substr(0, 4000));
    CHECK(probe_verdict(deny) == "DENIED EPERM");
    const json* row = nullptr;
    for (const auto& d : deny["decisions"])
        if (d["decision"] == "deny" && d["op"] == "connect") row = &d;
    REQUIRE(row);
    CHECK((*row)["layer"] == "sock_addr");
    CHECK((*row)["object"] == "tcp 127.0.0.2:" + port);
    CHECK((*row)["errno"] == EPERM);
    CHECK((*row)["tool"] == "netprobe");
    REQUIRE((*row)["rule"].is_object());
    CHECK((*row)["rule"]["file"].get<std::string>().ends_with("netprobe.yaml"));
    CHECK((*row)["rule"]["line"] == e.deny_line);
    CHECK((*row)["rule"]["text"].get<std::string>().find("127.0.0.2/32") != std::string::npos);

    // The same address as IPv4-mapped IPv6: judged as the IPv4 address.
    json mapped = agentd_run("netprobe", {"tcp", "::ffff:127.0.0.2", port});
    CHECK(probe_verdict(mapped) == "DENIED EPERM");

    // UDP: sendto the granted port works; another port is denied by default (no rule).
    CHECK(probe_verdict(agentd_run("netprobe", {"udp-send", "127.0.0.1", std::to_string(kUdpPort)})) == "OK");
    CHECK(control({"udp-send", "127.0.0.1", std::to_string(kUdpDenied)}) == "OK");
    json udp = agentd_run("netprobe", {"udp-send", "127.0.0.1", std::to_string(kUdpDenied)});
    CHECK(probe_verdict(udp) == "DENIED EPERM");
    bool found = false;
    for (const auto& d : udp["decisions"])
        if (d["decision"] == "deny" && d["op"] == "sendmsg" &&
            d["object"] == "udp 127.0.0.1:" + std::to_string(kUdpDenied) && d["rule"].is_null())
            found = true;
    CHECK(found);

    // Nothing left: no binding, no policy slot, no run cgroup.
    auto l = leftovers();
    CHECK(l.bindings == 0);
    CHECK(l.used_slots == 0);
    CHECK(l.leaves == 0);
}

TEST_CASE("agentd run in audit mode: the would-be denial is reported and allowed", "[bpfrun][run][audit]") {
    const std::string port = std::to_string(kTcpPort);
    json a = agentd_run("netprobe-audit", {"tcp", "127.0.0.2", port});
    INFO(a.dump(2).substr(0, 4000));
    CHECK(probe_verdict(a) == "OK");
    bool audited = false;
    for (const auto& d : a["decisions"])
        if (d["decision"] == "audit" && d["object"] == "tcp 127.0.0.2:" + port && d["errno"] == 0) audited = true;
    CHECK(audited);
}


TEST_CASE("agentd run says when another process reads the ring buffer (its events may be recorded there)",
          "[bpfrun][run][readers]") {
    const std::string port = std::to_string(kUdpPort);
    auto reader_warning = [](const json& rep) -> std::string {
        for (const auto& w : rep["warnings"])
            if (w.get<std::string>().find("ring buffer is also read by pid") != std::string::npos) return w;
        return "";
    };
    // Alone on the pin root: no such warning.
    json alone = agentd_run("netprobe", {"udp-send", "127.0.0.1", port});
    INFO(alone.dump(2).substr(0, 3000));
    CHECK(probe_verdict(alone) == "OK");
    CHECK(reader_warning(alone).empty());
    // With agentd serve on the same pin root: named by its pid.
    Serve d;
    json shared = agentd_run("netprobe", {"udp-send", "127.0.0.1", port});
    INFO(shared.dump(2).substr(0, 3000));
    CHECK(probe_verdict(shared) == "OK");
    CHECK_THAT(reader_warning(shared), Catch::Contains("pid " + std::to_string(d.child->pid) + " (agentd)"));
}
