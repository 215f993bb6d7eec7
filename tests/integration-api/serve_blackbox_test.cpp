// `agentd serve` run the way a user runs it: the real binary, its socket, its
// exit codes, the records it writes at start and stop, and config errors.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "agentd_child.h"
#include "api_client.h"
#include "audit_test_util.h"

using namespace bulwark::test;
using namespace std::chrono_literals;

namespace {
// GET /v1/health once the daemon answers: serve compiles every shipped rule
// file before it listens (about 4 s in the ASan build at -O0, more beside
// other tiers), so up to 30 s.
Response health_when_up(const std::string& sock) {
    Response r;
    for (int i = 0; i < 600 && r.status == 0; ++i) {
        std::this_thread::sleep_for(50ms);
        r = get(sock, 0, "/v1/health");
    }
    return r;
}
}  // namespace

TEST_CASE("agentd serve answers on its socket and stops cleanly on SIGTERM", "[serve]") {
    TempDir d;
    auto sock = (d.path / "run" / "agentd.sock").string();
    auto state = (d.path / "state").string();
    AgentdChild c({AGENTD_BINARY, "serve", "--state-dir", state, "--socket", sock}, (d.path / "out.txt").string());
    Response r = health_when_up(sock);
    REQUIRE(r.status == 200);
    CHECK(r.body.find("\"status\":\"ok\"") != std::string::npos);
    auto a = get(sock, 0, "/v1/audit?kind=host_status");
    CHECK(a.body.find("daemon_start") != std::string::npos);
    REQUIRE(kill(c.pid, SIGTERM) == 0);
    CHECK(c.wait_exit() == 0);
    CHECK_FALSE(std::filesystem::exists(sock));
    // the stop record was committed before exit
    CHECK(sql_value(std::filesystem::path(state) / "audit.db",
                    "SELECT count(*) FROM records WHERE kind = 6 AND detail LIKE '%daemon_stop%'") == "1");
    CHECK(sql_value(std::filesystem::path(state) / "audit.db", "PRAGMA integrity_check") == "ok");
}

TEST_CASE("agentd serve refuses a bad config with file:line:col", "[serve]") {
    TempDir d;
    auto cfg = d.path / "agentd.yaml";
    std::ofstream(cfg) << "state_dir: " << d.path.string() << "\napi:\n  unix_socket: /tmp/x.sock\n  listen: 1\n";
    AgentdChild c({AGENTD_BINARY, "serve", "--config", cfg.string()}, (d.path / "out.txt").string());
    CHECK(c.wait_exit() == 2);
    CHECK_THAT(c.output(), Catch::Contains(cfg.string() + ":4:3: error: unknown key 'listen' in 'api'"));
}

TEST_CASE("agentd serve refuses a second daemon on the same socket", "[serve]") {
    TempDir d;
    auto sock = (d.path / "agentd.sock").string();
    AgentdChild a({AGENTD_BINARY, "serve", "--state-dir", (d.path / "s1").string(), "--socket", sock},
            (d.path / "a.txt").string());
    Response r = health_when_up(sock);
    REQUIRE(r.status == 200);
    AgentdChild b({AGENTD_BINARY, "serve", "--state-dir", (d.path / "s2").string(), "--socket", sock},
            (d.path / "b.txt").string());
    CHECK(b.wait_exit() == 1);
    CHECK_THAT(b.output(), Catch::Contains("another daemon is listening"));
    CHECK(get(sock, 0, "/v1/health").status == 200);
}
