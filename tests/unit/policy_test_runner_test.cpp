#include <catch2/catch.hpp>

#include "bulwark/policy/policy_test.h"
#include "policy_fixtures.h"

using namespace bulwark::test;

namespace {
Bundle curl_bundle() {
    BundleBuilder bb;
    bb.file = "rules/curl.yaml";
    bb.b.tool = "curl";
    bb.allow("/etc/ssl", BW_FS_READ).allow("${workdir}", BW_FS_READ | BW_FS_WRITE | BW_FS_CREATE)
        .deny("${home}/.ssh").allow("/usr/bin/curl", BW_FS_EXEC | BW_FS_READ, "exec")
        .host_rule("api.github.com", 443).families({AF_UNIX, AF_INET, AF_INET6}).types({SOCK_STREAM, SOCK_DGRAM});
    return bb.b;  // not instantiated: the runner does it
}

const char* kGood = R"(tool: curl
vars: { workdir: /srv/t1, home: /home/agent, tmp: /tmp/t1, task_id: t1 }
hosts: { api.github.com: [140.82.112.5] }
cases:
  - { op: open, path: /etc/ssl/certs/ca.pem, access: read, expect: allow }
  - { op: open, path: /home/agent/.ssh/id_rsa, access: read, expect: deny }
  - { op: create, path: /srv/t1/out.json, expect: allow }
  - { op: exec, path: /usr/bin/curl, expect: allow }
  - { op: connect, addr: 140.82.112.5, port: 443, proto: tcp, expect: allow }
  - { op: send, addr: 8.8.8.8, port: 53, proto: udp, expect: deny }
  - { op: socket, family: packet, type: raw, expect: deny }
  - op: open
    path: /etc/passwd
    access: read
    expect: allow
)";
}  // namespace

TEST_CASE("policy test files parse and run; failures name the case and the decision", "[policy_test]") {
    auto f = parse_policy_test(kGood, "rules/tests/curl.test.yaml");
    REQUIRE(f);
    CHECK(f->tool == "curl");
    REQUIRE(f->cases.size() == 8);
    CHECK(f->cases[0].loc.line == 5);
    CHECK(f->cases[0].loc.col == 5);
    CHECK(f->cases[7].loc.line == 12);
    CHECK(f->vars.at("workdir") == "/srv/t1");

    Bundle b = curl_bundle();
    auto rep = run_policy_test(*f, b);
    REQUIRE(rep.errors.empty());
    CHECK(rep.passed() == 7);
    CHECK(rep.failed() == 1);
    CHECK_FALSE(rep.ok());
    CHECK_FALSE(rep.results[7].passed);
    std::string text = format_report(rep, &b);
    CHECK_THAT(text, Catch::Contains("PASS rules/tests/curl.test.yaml:5:5 open /etc/ssl/certs/ca.pem read -> allow by "
                                     "rules/curl.yaml:1:5 files.read: /etc/ssl"));
    CHECK_THAT(text, Catch::Contains("FAIL rules/tests/curl.test.yaml:12:5 open /etc/passwd read -> deny (expected allow)"));
    CHECK_THAT(text, Catch::Contains("1 failed"));
    auto js = report_json(rep, &b);
    CHECK_THAT(js, Catch::Contains("\"failed\":1"));
}

TEST_CASE("malformed policy tests report exact file:line:col", "[policy_test]") {
    const char* bad = R"(tool: curl
vars: { workdir: srv/t1 }
cases:
  - { op: open, path: /etc/x, expect: allow }
  - { op: connect, addr: 999.1.1.1, port: 70000, expect: deny }
  - { op: teleport, expect: deny }
  - { op: exec, path: /bin/sh, expect: maybe, color: red }
extra: 1
)";
    auto f = parse_policy_test(bad, "t.yaml");
    REQUIRE_FALSE(f);
    std::vector<std::string> lines;
    for (const auto& d : f.error()) lines.push_back(d.format());
    CHECK(lines == std::vector<std::string>{
                       "t.yaml:8:1: ERROR: unknown key 'extra' in a policy test file (expected one of: tool, vars, hosts, cases)",
                       "t.yaml:2:18: ERROR: ${workdir}: 'srv/t1' is not an absolute path",
                       "t.yaml:4:5: ERROR: an open case needs 'access'",
                       "t.yaml:5:26: ERROR: addr '999.1.1.1' is not an IPv4 or IPv6 address",
                       "t.yaml:5:43: ERROR: port '70000' must be an integer from 0 to 65535",
                       "t.yaml:6:11: ERROR: unknown op 'teleport' (open, create, remove, exec, connect, bind, send, socket, syscall)",
                       "t.yaml:7:47: ERROR: unknown key 'color' in an exec case (expected one of: op, path, expect)",
                       "t.yaml:7:40: ERROR: expect 'maybe' must be allow, deny or audit",
                   });

    auto y = parse_policy_test("tool: [unclosed\n", "y.yaml");
    REQUIRE_FALSE(y);
    CHECK_THAT(y.error()[0].format(), Catch::StartsWith("y.yaml:2:1: ERROR: YAML:"));
}

TEST_CASE("a host missing from the test file fails the whole file", "[policy_test]") {
    auto f = parse_policy_test(R"(tool: curl
vars: { workdir: /srv/t1, home: /home/agent }
cases: [ { op: create, path: /srv/t1/x, expect: allow } ]
)",
                               "t.yaml");
    REQUIRE(f);
    auto rep = run_policy_test(*f, curl_bundle());
    REQUIRE(rep.errors.size() == 1);
    CHECK_THAT(rep.errors[0].message, Catch::Contains("api.github.com' did not resolve: not listed under hosts"));
    CHECK(rep.failed() == 1);
    CHECK_FALSE(rep.ok());
}
