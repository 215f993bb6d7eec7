// /v1/health's host.layers: each layer's state and reason from the canaries
// and the BPF status.
#include <catch2/catch.hpp>

#include "cli/host_layers.h"
#include "sandbox/landlock.h"
#include "sandbox/seccomp_install.h"

using namespace bulwark;
using nlohmann::json;

TEST_CASE("host layers follow the canaries", "[host][layers]") {
    auto h = probe_host_layers(nullptr);
    INFO(h.dump(1));
    const auto& l = h["layers"];
    for (const char* n : {"namespaces", "cgroup", "seccomp", "landlock", "bpf_lsm", "sock_addr", "monitor"}) {
        REQUIRE(l.contains(n));
        CHECK(l[n]["detail"].get<std::string>().size() > 0);
    }
    CHECK(l["seccomp"]["state"] == (seccomp_canary().empty() ? "enforcing" : "unavailable"));
    if (!seccomp_canary().empty()) CHECK(l["seccomp"]["detail"] == seccomp_canary());
    CHECK(l["landlock"]["state"] == (landlock_abi() > 0 && landlock_canary().empty() ? "enforcing" : "unavailable"));
    // no BPF object loaded: every BPF layer says so
    for (const char* n : {"bpf_lsm", "sock_addr", "monitor"}) CHECK(l[n]["state"] == "unavailable");
    CHECK(h["hardening"]["arch"].get<std::string>().size() > 0);
}

TEST_CASE("BPF layers from a program status list: the weakest program decides", "[host][layers]") {
    std::vector<bpf::ProgramStatus> progs(3);
    progs[0] = {.object = "lsm", .name = "bw_file_open", .section = "lsm/file_open",
                .state = bpf::ProgState::Unavailable, .reason = "kernel refused load: EPERM"};
    progs[1] = {.object = "sock_addr", .name = "bw_connect4", .section = "cgroup/connect4",
                .state = bpf::ProgState::Enforcing};
    progs[2] = {.object = "monitor", .name = "bw_exec", .section = "raw_tp/sched_process_exec",
                .state = bpf::ProgState::Observing};
    auto l = probe_host_layers(&progs)["layers"];
    INFO(l.dump(1));
    CHECK(l["bpf_lsm"]["state"] == "unavailable");
    CHECK_THAT(l["bpf_lsm"]["detail"].get<std::string>(), Catch::Contains("EPERM"));
    CHECK(l["sock_addr"]["state"] == "enforcing");
    CHECK(l["monitor"]["state"] == "observing");
}

TEST_CASE("BPF layers from a runtime status document", "[host][layers]") {
    auto l = bpf_layers_from_status(json{{"state", "partial"},
                                         {"programs",
                                          {{"lsm/file_open", "unavailable: kernel refused load: EPERM"},
                                           {"cgroup/connect4", "enforcing"},
                                           {"cgroup/sendmsg4", "attached: canary not run"},
                                           {"raw_tp/sched_process_exec", "observing"},
                                           {"raw_tp/sys_enter", "unavailable: not requested (trace_syscalls is off)"}}}});
    INFO(l.dump(1));
    CHECK(l["bpf_lsm"]["state"] == "unavailable");
    CHECK_THAT(l["bpf_lsm"]["detail"].get<std::string>(), Catch::Contains("lsm/file_open: unavailable: kernel refused"));
    CHECK(l["sock_addr"]["state"] == "attached");
    CHECK_THAT(l["sock_addr"]["detail"].get<std::string>(), Catch::Contains("cgroup/sendmsg4"));
    CHECK(l["sock_addr"]["programs"].size() == 2);
    CHECK(l["monitor"]["state"] == "observing");
    CHECK(l["monitor"]["programs"].size() == 2);

    auto none = bpf_layers_from_status(json{{"state", "unavailable: BPF layer switched off (--no-bpf)"}});
    for (const char* n : {"bpf_lsm", "sock_addr", "monitor"}) {
        CHECK(none[n]["state"] == "unavailable");
        CHECK(none[n]["detail"] == "BPF layer switched off (--no-bpf)");
    }
}
