// A bound cgroup handed from one run to the next (a task's warm VM: its VMM
// serves the task's runs one after another): through BpfRuntime and its
// Attachment on the host kernel, each run's decisions name that run.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "bpf_env.h"
#include "bulwark/policy/compiler.h"
#include "bulwark/policy/instantiate.h"
#include "common/fd.h"
#include "private_runtime.h"

using namespace bwtest;

namespace {

// The runs of `rt`'s connect denials to `port`, as the reader delivered them (within 3 s).
std::vector<uint64_t> connect_denials(bulwark::test::PrivateRuntime& rt, uint16_t port, size_t want) {
    std::vector<uint64_t> runs;
    for (int i = 0; i < 300; ++i) {
        runs.clear();
        {
            std::lock_guard lk(rt.mu);
            for (const auto& d : rt.decisions)
                if (d.decision == BW_DECISION_DENY &&
                    d.object.find(":" + std::to_string(port)) != std::string::npos)
                    runs.push_back(d.run_id);
        }
        if (runs.size() >= want) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return runs;
}

}  // namespace

TEST_CASE("a bound cgroup handed to another run: its decisions name that run from then on, under the same policy") {
    using namespace bulwark;
    test::PrivateRuntime prt("bw-retarget-test");
    INFO(prt.error);
    REQUIRE(prt.error.empty());
    Listener allowed(AF_INET), refused(AF_INET);
    auto compiled = policy::compile_string("tool: t\nnetwork:\n  connect: [{ cidr: 127.0.0.1/32, ports: [" +
                                               std::to_string(allowed.port) + "], proto: tcp }]\n",
                                           "t.yaml", {});
    INFO(policy::render_diagnostics(compiled));
    REQUIRE(compiled.ok());
    auto bundle = policy::instantiate(*compiled.bundle, policy::task_vars("/tmp", "task-5"), {});
    REQUIRE(bundle);
    auto att = prt.rt->attach(*bundle, RunContext{.task_id = 5, .run_id = 1, .tool = "t"});
    REQUIRE(att);
    Leaf leaf(prt.parent, "warm");
    Fd cg(::open(leaf.path.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC));
    auto bound = (*att)->hook()(cg.get(), leaf.path);
    INFO((bound ? std::string() : bound.error()));
    REQUIRE(bound);

    auto connects = [&] {
        return run_in(leaf.path, [&] {
            return (tcp_connect("127.0.0.1", allowed.port) == 0 ? 0 : 1) |
                   (tcp_connect("127.0.0.1", refused.port) == EPERM ? 0 : 2);
        });
    };
    CHECK(connects() == 0);  // the policy holds: one allowed, one refused
    CHECK(connect_denials(prt, refused.port, 1) == std::vector<uint64_t>{1});

    REQUIRE((*att)->retarget(RunContext{.task_id = 5, .run_id = 2, .tool = "t"}));
    CHECK(connects() == 0);  // the same policy in force
    CHECK(connect_denials(prt, refused.port, 2) == std::vector<uint64_t>{1, 2});
    // Control: outside the sandbox the refused port is reachable.
    CHECK(tcp_connect("127.0.0.1", refused.port) == 0);

    (*att)->release();
    CHECK_FALSE((*att)->retarget(RunContext{.task_id = 5, .run_id = 3, .tool = "t"}));  // released: no run to hand over
}
