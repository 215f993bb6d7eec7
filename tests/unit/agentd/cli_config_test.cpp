// agentd serve's YAML configuration: defaults, values, precise errors.
#include <catch2/catch.hpp>

#include "cli/config.h"

using namespace bulwark;

TEST_CASE("defaults without a config file", "[config]") {
    auto c = default_config();
    CHECK(c.state_dir == "/var/lib/bulwark");
    CHECK(c.api.unix_path == "/run/bulwark/agentd.sock");
    CHECK(c.api.unix_mode == 0660);
    CHECK_FALSE(c.api.tcp_host);
    CHECK(c.audit.retention);
}

TEST_CASE("a full config file is read", "[config]") {
    auto c = parse_config(R"(
state_dir: /srv/bulwark
api:
  unix_socket: /tmp/a.sock
  socket_mode: "0640"
  allowed_uids: [0, 1000]
  allowed_gids: [100]
  http: 127.0.0.1:9999
  tokens_sha256: [61bce49262c04c5a1ccbf3fd60452d6afa8dcf531a4face33a218d4050b764f4]
  max_connections: 64
audit:
  durability: full
  retention_days: 0
  batch_rows: 100
)",
                          "t.yaml");
    REQUIRE(c);
    CHECK(c->state_dir == "/srv/bulwark");
    CHECK(c->api.unix_mode == 0640);
    CHECK(c->api.allowed_uids == std::vector<uid_t>{0, 1000});
    CHECK(c->api.tcp_port == 9999);
    CHECK(c->api.token_sha256.size() == 1);
    CHECK(c->audit.durability == audit::Durability::Full);
    CHECK_FALSE(c->audit.retention);
    CHECK(c->audit.batch_rows == 100);
}

TEST_CASE("config errors name file, line and column", "[config]") {
    auto e = parse_config("api:\n  unix_socket: /a\n  colour: red\n", "agentd.yaml");
    REQUIRE_FALSE(e);
    CHECK_THAT(e.error(), Catch::StartsWith("agentd.yaml:3:3: error: unknown key 'colour' in 'api'"));
    e = parse_config("stat_dir: /x\n", "a.yaml");
    REQUIRE_FALSE(e);
    CHECK_THAT(e.error(), Catch::StartsWith("a.yaml:1:1: error: unknown key 'stat_dir'"));
    e = parse_config("api:\n  http: 0.0.0.0:80\n", "a.yaml");
    REQUIRE_FALSE(e);
    CHECK_THAT(e.error(), Catch::Contains("loopback"));
    e = parse_config("api:\n  socket_mode: \"0666\"\n", "a.yaml");
    REQUIRE_FALSE(e);
    CHECK_THAT(e.error(), Catch::Contains("others"));
    e = parse_config("audit:\n  batch_rows: -1\n", "a.yaml");
    REQUIRE_FALSE(e);
    CHECK_THAT(e.error(), Catch::Contains("a.yaml:2:15"));
    e = parse_config("audit:\n  durability: sometimes\n", "a.yaml");
    REQUIRE_FALSE(e);
    e = parse_config("api:\n  tokens_sha256: [abc]\n", "a.yaml");
    REQUIRE_FALSE(e);
    e = parse_config("api: [1, 2]\n", "a.yaml");
    REQUIRE_FALSE(e);
    e = parse_config("api: {\n", "a.yaml");
    REQUIRE_FALSE(e);
    CHECK_THAT(e.error(), Catch::StartsWith("a.yaml:"));
    CHECK(parse_config("", "empty.yaml"));
}

TEST_CASE("the dashboard section: defaults, values, errors", "[config][dashboard]") {
    auto c = default_config();
    CHECK(c.dashboard.enabled);
    REQUIRE(c.dashboard.listen);
    CHECK(c.dashboard.listen->first == "127.0.0.1");
    CHECK(c.dashboard.listen->second == 7878);
    CHECK(c.dashboard.assets_dir.empty());

    auto v = parse_config("dashboard:\n  enabled: false\n  listen: \"[::1]:18399\"\n  assets_dir: /srv/dash\n", "d.yaml");
    REQUIRE(v);
    CHECK_FALSE(v->dashboard.enabled);
    REQUIRE(v->dashboard.listen);
    CHECK(v->dashboard.listen->first == "::1");
    CHECK(v->dashboard.listen->second == 18399);
    CHECK(v->dashboard.assets_dir == "/srv/dash");
    auto off = parse_config("dashboard:\n  listen: \"off\"\n", "d.yaml");
    REQUIRE(off);
    CHECK_FALSE(off->dashboard.listen);

    auto e = parse_config("dashboard:\n  listen: 0.0.0.0:7878\n", "d.yaml");
    REQUIRE_FALSE(e);
    CHECK_THAT(e.error(), Catch::StartsWith("d.yaml:2:11: error:"));
    CHECK_THAT(e.error(), Catch::Contains("loopback"));
    e = parse_config("dashboard:\n  enabled: yes please\n", "d.yaml");
    REQUIRE_FALSE(e);
    CHECK_THAT(e.error(), Catch::Contains("true or false"));
    e = parse_config("dashboard:\n  assets_dir: dist\n", "d.yaml");
    REQUIRE_FALSE(e);
    CHECK_THAT(e.error(), Catch::Contains("absolute"));
    e = parse_config("dashboard:\n  port: 1\n", "d.yaml");
    REQUIRE_FALSE(e);
    CHECK_THAT(e.error(), Catch::StartsWith("d.yaml:2:3: error: unknown key 'port' in 'dashboard'"));
}

TEST_CASE("the otlp section: off by default, values, errors", "[config][otlp]") {
    auto c = default_config();
    CHECK(c.otlp.endpoint.url.empty());
    CHECK(c.otlp.encoding == telemetry::OtlpEncoding::Protobuf);

    auto v = parse_config(R"(
otlp:
  endpoint: http://collector:4318/v1/logs
  encoding: json
  headers: {authorization: "Bearer abc", x-scope-orgid: fleet}
  queue_capacity: 1000
  batch_records: 100
  batch_linger_ms: 50
  timeout_ms: 3000
  max_attempts: 7
  initial_backoff_ms: 100
  max_backoff_ms: 2000
  max_retry_after_ms: 10000
  shutdown_timeout_ms: 1000
)",
                          "o.yaml");
    REQUIRE(v);
    CHECK(v->otlp.endpoint.host == "collector");
    CHECK(v->otlp.endpoint.port == 4318);
    CHECK(v->otlp.encoding == telemetry::OtlpEncoding::Json);
    REQUIRE(v->otlp.headers.size() == 2);
    CHECK(v->otlp.headers[0] == std::pair<std::string, std::string>{"authorization", "Bearer abc"});
    CHECK(v->otlp.queue_capacity == 1000);
    CHECK(v->otlp.batch_records == 100);
    CHECK(v->otlp.batch_linger == std::chrono::milliseconds(50));
    CHECK(v->otlp.timeout == std::chrono::milliseconds(3000));
    CHECK(v->otlp.max_attempts == 7);
    CHECK(v->otlp.initial_backoff == std::chrono::milliseconds(100));
    CHECK(v->otlp.max_backoff == std::chrono::milliseconds(2000));
    CHECK(v->otlp.max_retry_after == std::chrono::milliseconds(10000));
    CHECK(v->otlp.shutdown_timeout == std::chrono::milliseconds(1000));

    auto e = parse_config("otlp:\n  endpoint: https://c:4318/v1/logs\n", "o.yaml");
    REQUIRE_FALSE(e);
    CHECK(e.error() == "o.yaml:2:13: error: 'otlp.endpoint': 'https://c:4318/v1/logs': https is not supported; "
                       "export to a collector over http://");
    e = parse_config("otlp:\n  encoding: grpc\n", "o.yaml");
    REQUIRE_FALSE(e);
    CHECK(e.error() == "o.yaml:2:13: error: 'otlp.encoding' must be protobuf or json");
    e = parse_config("otlp:\n  headers: {\"bad header\": x}\n", "o.yaml");
    REQUIRE_FALSE(e);
    CHECK_THAT(e.error(), Catch::Contains("is not an HTTP header name"));
    e = parse_config("otlp:\n  max_attempts: 0\n", "o.yaml");
    REQUIRE_FALSE(e);
    CHECK_THAT(e.error(), Catch::Contains("'otlp.max_attempts' must be in 1..100"));
    e = parse_config("otlp:\n  url: http://c\n", "o.yaml");
    REQUIRE_FALSE(e);
    CHECK_THAT(e.error(), Catch::StartsWith("o.yaml:2:3: error: unknown key 'url' in 'otlp'"));
}
