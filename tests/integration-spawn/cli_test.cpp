// Black-box: `agentd run` as a user runs it.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace {
int run_cli(const std::string& cmd, std::string& out) {
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
}  // namespace

TEST_CASE("agentd run without a compilable policy refuses with 125 and a JSON report") {
    std::string out;
    int rc = run_cli(std::string(AGENTD_BIN) + " run --rules /nonexistent --tool demo --json -- /bin/true", out);
    CHECK(rc == 125);
    auto j = nlohmann::json::parse(out);
    CHECK(j["outcome"] == "refused");
    CHECK(j["exit_status"] == 125);
    CHECK(j["tool"] == "demo");
    CHECK_FALSE(j["error"].get<std::string>().empty());
}

TEST_CASE("agentd run requires --rules, --tool and a command") {
    std::string out;
    CHECK(run_cli(std::string(AGENTD_BIN) + " run --tool demo -- /bin/true 2>&1", out) != 0);
}
