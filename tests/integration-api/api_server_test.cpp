// The API server on real sockets: authorisation (peer credentials, tokens,
// Host/Origin), request smuggling and size limits, slowloris, pipelining,
// routing and JSON errors, the audit query endpoint, and live SSE and
// WebSocket streams receiving a record committed after subscription.
#include <catch2/catch.hpp>

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <thread>

#include "api_client.h"
#include "audit/audit_db.h"
#include "audit_test_util.h"
#include "audit/event_bus.h"
#include "api/http_api.h"
#include "api/http_server.h"
#include "api/http_profiles.h"
#include "api/http_tasks.h"
#include "profiles/profile_book.h"
#include "audit/metrics.h"
#include "tasks/tasks.h"
#include "tasks/tool_catalog.h"

using namespace bulwark;
using namespace bulwark::test;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

const std::string kToken = "test-token-0123456789abcdef";

struct Api {
    TempDir dir;
    Metrics metrics;
    audit::EventBus bus{&metrics};
    std::unique_ptr<audit::AuditStore> store;
    http::Router router;
    std::unique_ptr<http::HttpServer> server;
    std::unique_ptr<ToolCatalog> catalog;
    std::unique_ptr<TaskManager> tasks;
    profiles::ProfileBook profiles{nullptr};
    std::string sock;
    uint16_t port = 0;

    explicit Api(std::function<void(http::ServerConfig&)> tweak = {}) {
        auto s = audit::AuditStore::open({.path = dir.path / "audit.db", .min_free_bytes = 0}, &metrics, &bus);
        if (!s) FAIL("store: " << s.error().message);
        store = std::move(*s);
        http::ApiContext ctx;
        ctx.store = store.get();
        ctx.bus = &bus;
        ctx.metrics = &metrics;
        ctx.openapi_json = std::string(http::openapi_document());
        ctx.stream_queue = 64;
        http::register_v1_routes(router, ctx);
        auto cat = ToolCatalog::load(BULWARK_RULES_DIR);
        if (!cat) FAIL("rules: " << cat.error());
        catalog = std::make_unique<ToolCatalog>(std::move(*cat));
        tasks = std::make_unique<TaskManager>(*catalog, store.get(), TaskOptions{.work_root = dir.path / "work"});
        http::register_task_routes(router, {.catalog = catalog.get(), .tasks = tasks.get(), .store = store.get()});
        http::register_profile_routes(router, &profiles, catalog.get());
        http::ServerConfig cfg;
        sock = (dir.path / "agentd.sock").string();
        cfg.unix_path = sock;
        cfg.allowed_uids = {geteuid()};
        cfg.tcp_host = "127.0.0.1";
        cfg.tcp_port = 0;
        cfg.token_sha256 = {bulwark::sha256(kToken)};
        cfg.read_timeout = 2000ms;
        cfg.write_timeout = 2000ms;
        cfg.stream_keepalive = 1000ms;
        if (tweak) tweak(cfg);
        auto srv = http::HttpServer::start(cfg, router, &metrics);
        if (!srv) FAIL("server: " << srv.error());
        server = std::move(*srv);
        port = server->tcp_port();
    }
    std::string auth() const { return "Authorization: Bearer " + kToken + "\r\n"; }
    std::string host() const { return "127.0.0.1:" + std::to_string(port); }
};

json body_json(const Response& r) {
    auto j = json::parse(r.body, nullptr, false);
    if (j.is_discarded()) FAIL("not JSON: " << r.body);
    return j;
}

void check_error(const Response& r, int status, const std::string& code) {
    INFO("body: " << r.body);
    CHECK(r.status == status);
    CHECK(r.headers.count("content-type"));
    if (r.headers.count("content-type")) CHECK(r.headers.at("content-type") == "application/json");
    auto j = json::parse(r.body, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    CHECK(j["error"]["code"] == code);
    CHECK(j["error"]["message"].is_string());
}

struct Fd {
    int fd;
    explicit Fd(int f) : fd(f) { REQUIRE(fd >= 0); }
    ~Fd() {
        if (fd >= 0) close(fd);
    }
};

}  // namespace

TEST_CASE("unix socket: health, routing and JSON errors", "[api]") {
    Api api;
    auto h = get(api.sock, 0, "/v1/health");
    REQUIRE(h.status == 200);
    auto j = body_json(h);
    CHECK(j["status"] == "ok");
    CHECK(j["accepting_runs"] == true);
    CHECK(j["audit"]["state"] == "ok");
    struct stat st{};
    REQUIRE(stat(api.sock.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0660);

    check_error(get(api.sock, 0, "/v1/nothing"), 404, "not_found");
    check_error(get(api.sock, 0, "/"), 404, "not_found");
    Fd c(connect_unix(api.sock));
    check_error(request(c.fd, "POST /v1/health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"), 405,
                "method_not_allowed");
    check_error(get(api.sock, 0, "/v1/events/ws"), 426, "upgrade_required");
    check_error(get(api.sock, 0, "/v1/audit?limit=5000"), 400, "bad_parameter");
    check_error(get(api.sock, 0, "/v1/audit?decision=maybe"), 400, "bad_parameter");
    check_error(get(api.sock, 0, "/v1/audit?task=1&task=2"), 400, "bad_query");
    check_error(get(api.sock, 0, "/v1/audit?tool=%zz"), 400, "bad_query");
    check_error(get(api.sock, 0, "/v1/audit?since_ns=18446744073709551615"), 400, "bad_parameter");
    check_error(get(api.sock, 0, "/v1/audit?after_seq=-1"), 400, "bad_parameter");
    check_error(get(api.sock, 0, "/v1/events?rule=1"), 400, "bad_parameter");
}

TEST_CASE("the OpenAPI document lists exactly the routes served", "[api][openapi]") {
    Api api;
    auto r = get(api.sock, 0, "/v1/openapi.json");
    REQUIRE(r.status == 200);
    auto doc = body_json(r);
    CHECK(doc["openapi"].get<std::string>().starts_with("3."));
    std::set<std::string> documented, served;
    for (auto& [path, ops] : doc["paths"].items())
        for (auto& [method, op] : ops.items()) {
            std::string m = method;
            for (auto& ch : m) ch = char(std::toupper((unsigned char)ch));
            documented.insert(m + " " + path);
            CHECK(op.contains("responses"));
        }
    for (auto& route : api.router.routes()) {
        std::string p;
        for (auto& s : route.segments) p += "/" + s;
        served.insert(route.method + " " + p);
    }
    CHECK(documented == served);
}

TEST_CASE("TCP: bearer token and Host/Origin checks", "[api][tcp]") {
    Api api;
    auto ok = get("", api.port, "/v1/health", api.auth());
    CHECK(ok.status == 200);

    auto missing = get("", api.port, "/v1/health");
    check_error(missing, 401, "missing_token");
    {
        // a refused request ends its connection: no second try on it
        Fd c(connect_tcp(api.port));
        auto r = request(c.fd, "GET /v1/health HTTP/1.1\r\nHost: " + api.host() + "\r\n\r\n");
        CHECK(r.status == 401);
        CHECK(closed_within(c.fd, 3000ms));
    }
    CHECK(missing.headers.count("www-authenticate"));
    check_error(get("", api.port, "/v1/health", "Authorization: Bearer wrong-token-000000000000\r\n"), 401,
                "bad_token");
    check_error(get("", api.port, "/v1/health", "Authorization: Basic dXNlcjpwYXNz\r\n"), 401, "bad_token");

    // DNS rebinding: a foreign Host or Origin is refused even with a token
    auto with_host = [&](const std::string& host, const std::string& extra = "") {
        Fd c(connect_tcp(api.port));
        return request(c.fd, "GET /v1/health HTTP/1.1\r\nHost: " + host + "\r\n" + api.auth() + extra + "\r\n");
    };
    check_error(with_host("evil.example.com"), 403, "forbidden_host");
    check_error(with_host("evil.example.com:" + std::to_string(api.port)), 403, "forbidden_host");
    check_error(with_host("127.0.0.1:1"), 403, "forbidden_host");
    check_error(with_host("127.0.0.1.evil.com"), 403, "forbidden_host");
    CHECK(with_host("localhost:" + std::to_string(api.port)).status == 200);
    CHECK(with_host("[::1]:" + std::to_string(api.port)).status == 200);
    CHECK(with_host("127.0.0.1").status == 200);
    check_error(with_host(api.host(), "Origin: http://evil.example.com\r\n"), 403, "forbidden_origin");
    check_error(with_host(api.host(), "Origin: null\r\n"), 403, "forbidden_origin");
    check_error(with_host(api.host(), "Origin: http://localhost:" + std::to_string(api.port) + "@evil.com\r\n"), 403,
                "forbidden_origin");
    CHECK(with_host(api.host(), "Origin: http://localhost:" + std::to_string(api.port) + "\r\n").status == 200);

    // a token is never accepted on the wrong listener configuration
    auto bad = http::HttpServer::start({.tcp_host = "0.0.0.0", .tcp_port = 0, .token_sha256 = {bulwark::sha256("x")}},
                                       api.router, nullptr);
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error(), Catch::Contains("loopback"));
    auto notoken = http::HttpServer::start({.tcp_host = "127.0.0.1", .tcp_port = 0}, api.router, nullptr);
    REQUIRE_FALSE(notoken);
    CHECK_THAT(notoken.error(), Catch::Contains("token"));
}

TEST_CASE("unix socket: callers with other credentials get 403", "[api][peercred]") {
    if (geteuid() != 0) {
        WARN("SKIP part: peer-credential refusal needs root to setuid(65534)");
        return;
    }
    // the socket must be reachable by uid 65534 so the check is the server's
    Api api([](http::ServerConfig& c) {
        c.unix_mode = 0666 & ~0007;  // config forbids o+rw; widen below by hand
    });
    REQUIRE(chmod(api.dir.path.c_str(), 0755) == 0);
    REQUIRE(chmod(api.sock.c_str(), 0666) == 0);
    auto as_nobody = [&](bool allowed_gid) -> int {
        (void)allowed_gid;
        int p[2];
        REQUIRE(pipe(p) == 0);
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            close(p[0]);
            if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
            int fd = connect_unix(api.sock);
            int status = -errno;
            if (fd >= 0) {
                auto r = request(fd, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n");
                status = r.status;
                if (r.status == 403 && r.body.find("forbidden_peer") == std::string::npos) status = -1000;
                // and the refused caller's connection is closed
                if (r.status == 403 && !closed_within(fd, 3000ms)) status = -2000;
            }
            (void)!write(p[1], &status, sizeof status);
            _exit(0);
        }
        close(p[1]);
        int status = 0;
        REQUIRE(read(p[0], &status, sizeof status) == sizeof status);
        close(p[0]);
        int ws;
        waitpid(pid, &ws, 0);
        return status;
    };
    CHECK(as_nobody(false) == 403);
    // root (the test's uid) is allowed
    CHECK(get(api.sock, 0, "/v1/health").status == 200);
}

TEST_CASE("peer allowed by gid", "[api][peercred]") {
    if (geteuid() != 0) {
        WARN("SKIP part: needs root to setgid");
        return;
    }
    Api api([](http::ServerConfig& c) {
        c.allowed_uids = {};
        c.allowed_gids = {65534};
    });
    REQUIRE(chmod(api.dir.path.c_str(), 0755) == 0);
    REQUIRE(chmod(api.sock.c_str(), 0666) == 0);
    CHECK(get(api.sock, 0, "/v1/health").status == 403);  // root's gid 0 is not listed
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
        _exit(get(api.sock, 0, "/v1/health").status == 200 ? 0 : 1);
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    CHECK(WIFEXITED(ws));
    CHECK(WEXITSTATUS(ws) == 0);
}

TEST_CASE("request smuggling forms are refused and the connection closed", "[api][smuggling]") {
    Api api;
    auto send = [&](const std::string& raw) {
        Fd c(connect_unix(api.sock));
        auto r = request(c.fd, raw);
        bool closed = closed_within(c.fd, 3000ms);
        CHECK(closed);
        return r;
    };
    const std::string start = "POST /v1/health HTTP/1.1\r\nHost: x\r\n";
    check_error(send(start + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 400,
                "request_smuggling");
    check_error(send(start + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"), 400,
                "request_smuggling");
    check_error(send(start + "Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello"), 400, "request_smuggling");
    check_error(send(start + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"), 400, "request_smuggling");
    check_error(send(start + "Content-Length: 5, 5\r\n\r\nhello"), 400, "request_smuggling");
    check_error(send(start + "Content-Length: +5\r\n\r\nhello"), 400, "request_smuggling");
    check_error(send(start + "Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n"), 400, "request_smuggling");
    check_error(send(start + "Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n"), 400, "request_smuggling");
    check_error(send(start + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 400,
                "request_smuggling");
    check_error(send("POST /v1/health HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 400,
                "request_smuggling");
    // and the server is fine afterwards
    CHECK(get(api.sock, 0, "/v1/health").status == 200);
}

TEST_CASE("oversized headers, URIs, bodies and chunks are refused", "[api][limits]") {
    Api api;
    auto send = [&](const std::string& raw) {
        Fd c(connect_unix(api.sock));
        return request(c.fd, raw);
    };
    check_error(send("GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n"), 431,
                "header_too_large");
    check_error(send("GET /v1/health?" + std::string(10000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n"), 414,
                "uri_too_long");
    check_error(send("GET /" + std::string(100000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n"), 431, "header_too_large");
    check_error(send("POST /v1/health HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n"), 413,
                "body_too_large");
    check_error(send("POST /v1/health HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n"), 400,
                "request_smuggling");
    check_error(send("POST /v1/health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n"),
                400, "bad_chunk");
    check_error(send("POST /v1/health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n7fffffffffffffff\r\n"),
                413, "body_too_large");
    std::string many;
    for (int i = 0; i < 200; ++i) many += "X-H" + std::to_string(i) + ": v\r\n";
    check_error(send("GET /v1/health HTTP/1.1\r\nHost: x\r\n" + many + "\r\n"), 431, "too_many_fields");
    check_error(send("GET http://evil/v1/health HTTP/1.1\r\nHost: x\r\n\r\n"), 400, "bad_target");
    check_error(send("GET /v1/health HTTP/1.1\r\n\r\n"), 400, "bad_host");
    check_error(send("GARBAGE\r\n\r\n"), 400, "bad_request");
    // a chunked body within the limit is fine (and routed: POST is not allowed here)
    check_error(send("POST /v1/health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
                405, "method_not_allowed");
}

TEST_CASE("slowloris: 200 slow connections, health still answered quickly", "[api][slowloris]") {
    Api api([](http::ServerConfig& c) { c.read_timeout = 3000ms; });
    std::vector<int> slow;
    for (int i = 0; i < 200; ++i) {
        int fd = (i % 2) ? connect_unix(api.sock) : connect_tcp(api.port);
        REQUIRE(fd >= 0);
        REQUIRE(send_all(fd, "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
        slow.push_back(fd);
    }
    std::atomic<bool> stop{false};
    std::thread dribble([&] {
        // one more header byte per connection every 200 ms, never finishing
        while (!stop) {
            for (int fd : slow) (void)!send(fd, "X", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            std::this_thread::sleep_for(200ms);
        }
    });
    std::chrono::milliseconds worst{0};
    for (int i = 0; i < 20; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        auto r = (i % 2) ? get(api.sock, 0, "/v1/health") : get("", api.port, "/v1/health", api.auth());
        auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
        CHECK(r.status == 200);
        worst = std::max(worst, took);
        std::this_thread::sleep_for(50ms);
    }
    CHECK(worst < 500ms);
    // the slow connections are cut at the read deadline even though bytes keep coming
    auto t0 = std::chrono::steady_clock::now();
    int closed = 0;
    for (int fd : slow) closed += closed_within(fd, 6000ms) ? 1 : 0;
    CHECK(closed == 200);
    CHECK(std::chrono::steady_clock::now() - t0 < 8s);
    stop = true;
    dribble.join();
    for (int fd : slow) close(fd);
    CHECK(api.metrics.http_timeouts.load() >= 200);
}

TEST_CASE("connections over the limit are refused; the server recovers", "[api][limits]") {
    Api api([](http::ServerConfig& c) { c.max_connections = 5; });
    std::vector<int> held;
    for (int i = 0; i < 5; ++i) {
        int fd = connect_unix(api.sock);
        REQUIRE(fd >= 0);
        held.push_back(fd);
    }
    std::this_thread::sleep_for(200ms);
    Fd extra(connect_unix(api.sock));
    CHECK(closed_within(extra.fd, 2000ms));
    CHECK(api.metrics.http_connections_refused.load() >= 1);
    for (int fd : held) close(fd);
    std::this_thread::sleep_for(200ms);
    CHECK(get(api.sock, 0, "/v1/health").status == 200);
}

TEST_CASE("pipelined requests are answered in order", "[api][pipeline]") {
    Api api;
    for (int i = 0; i < 3; ++i) api.store->enqueue(decision(1, "git", BW_LAYER_BPF_LSM, BW_DECISION_DENY));
    REQUIRE(api.store->flush(5s));
    Fd c(connect_unix(api.sock));
    // the audit query runs on the worker pool; its answer must still come second
    std::string reqs = "GET /v1/audit?limit=2 HTTP/1.1\r\nHost: x\r\n\r\n"
                       "GET /v1/nope HTTP/1.1\r\nHost: x\r\n\r\n"
                       "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"
                       "GET /v1/audit?after_seq=2 HTTP/1.1\r\nHost: x\r\n\r\n";
    REQUIRE(send_all(c.fd, reqs));
    std::string carry;
    auto r1 = read_response(c.fd, carry, 5000ms);
    auto r2 = read_response(c.fd, carry, 5000ms);
    auto r3 = read_response(c.fd, carry, 5000ms);
    auto r4 = read_response(c.fd, carry, 5000ms);
    CHECK(r1.status == 200);
    CHECK(body_json(r1)["rows"].size() == 2);
    CHECK(body_json(r1)["next_after_seq"] == 2);
    CHECK(r2.status == 404);
    CHECK(r3.status == 200);
    CHECK(body_json(r3)["status"] == "ok");
    CHECK(r4.status == 200);
    CHECK(body_json(r4)["rows"].size() == 1);
    CHECK(body_json(r4)["rows"][0]["seq"] == 3);
}

TEST_CASE("audit endpoint filters and pages", "[api][audit]") {
    Api api;
    for (int i = 0; i < 30; ++i)
        api.store->enqueue(decision(uint64_t(i % 3), i % 2 ? "git" : "curl", BW_LAYER_LANDLOCK,
                                    i % 5 ? BW_DECISION_ALLOW : BW_DECISION_DENY, i % 5 ? BW_NO_RULE : 4));
    REQUIRE(api.store->flush(5s));
    auto r = get(api.sock, 0, "/v1/audit?decision=deny&layer=landlock");
    REQUIRE(r.status == 200);
    auto j = body_json(r);
    CHECK(j["rows"].size() == 6);
    for (auto& row : j["rows"]) {
        CHECK(row["decision"] == "deny");
        CHECK(row["rule"]["id"] == 4);
        CHECK(row["rule"]["file"].is_string());
    }
    uint64_t total = 0;
    std::string after = "0";
    for (;;) {
        auto p = body_json(get(api.sock, 0, "/v1/audit?tool=git&limit=4&after_seq=" + after));
        total += p["rows"].size();
        if (p["next_after_seq"].is_null()) break;
        after = std::to_string(p["next_after_seq"].get<uint64_t>());
    }
    CHECK(total == 15);
    auto m = get(api.sock, 0, "/metrics");
    REQUIRE(m.status == 200);
    CHECK(m.headers["content-type"].starts_with("text/plain"));
    CHECK(m.body.find("bulwark_decisions_total{layer=\"landlock\",decision=\"deny\"} 6\n") != std::string::npos);
    CHECK(m.body.find("bulwark_audit_rows_committed_total 30\n") != std::string::npos);
    CHECK(m.body.find("bulwark_audit_commit_seconds_bucket{le=\"+Inf\"}") != std::string::npos);
}

TEST_CASE("SSE stream delivers records committed after subscribing, filtered", "[api][sse]") {
    Api api;
    Fd c(connect_unix(api.sock));
    REQUIRE(send_all(c.fd, "GET /v1/events?decision=deny&tool=curl HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::string buf;
    read_until(c.fd, ": subscribed", 5000ms, &buf);
    REQUIRE(buf.find("HTTP/1.1 200") == 0);
    REQUIRE(buf.find("text/event-stream") != std::string::npos);
    REQUIRE(buf.find(": subscribed") != std::string::npos);
    api.store->enqueue(decision(1, "curl", BW_LAYER_SOCK_ADDR, BW_DECISION_ALLOW, BW_NO_RULE, "tcp 1.1.1.1:80"));
    api.store->enqueue(decision(1, "git", BW_LAYER_SOCK_ADDR, BW_DECISION_DENY, BW_NO_RULE, "tcp 2.2.2.2:80"));
    auto seq = api.store->enqueue(decision(1, "curl", BW_LAYER_SOCK_ADDR, BW_DECISION_DENY, 9, "tcp 3.3.3.3:443"));
    REQUIRE(seq);
    read_until(c.fd, "3.3.3.3", 5000ms, &buf);
    auto pos = buf.find("event: record\ndata: ");
    REQUIRE(pos != std::string::npos);
    auto line_end = buf.find('\n', pos + 20);
    auto j = json::parse(buf.substr(pos + 20, line_end - pos - 20));
    CHECK(j["object"] == "tcp 3.3.3.3:443");
    CHECK(j["seq"] == *seq);
    CHECK(buf.find("1.1.1.1") == std::string::npos);
    CHECK(buf.find("2.2.2.2") == std::string::npos);
    // keepalive comments flow while idle
    buf.clear();
    read_until(c.fd, ":\n\n", 3000ms, &buf);
    CHECK(buf.find(":\n\n") != std::string::npos);
}

TEST_CASE("a slow SSE subscriber gets a gap message, the writer is never blocked", "[api][sse]") {
    Api api;  // stream_queue = 64
    Fd c(connect_unix(api.sock));
    int small = 4096;
    setsockopt(c.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    REQUIRE(send_all(c.fd, "GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::string buf;
    read_until(c.fd, ": subscribed", 5000ms, &buf);
    REQUIRE(buf.find(": subscribed") != std::string::npos);
    // the client reads nothing while 20000 records are committed
    auto t0 = std::chrono::steady_clock::now();
    std::optional<uint64_t> last;
    for (int i = 0; i < 20000; ++i)
        last = api.store->enqueue(decision(1, "t", BW_LAYER_BPF_LSM, BW_DECISION_DENY, BW_NO_RULE,
                                           "/x/" + std::string(100, 'p') + std::to_string(i)));
    REQUIRE(api.store->flush(10s));
    CHECK(std::chrono::steady_clock::now() - t0 < 8s);
    CHECK(api.metrics.subscriber_drops.load() > 0);
    buf.clear();
    read_until(c.fd, "event: gap", 10000ms, &buf);
    CHECK(buf.find("event: gap\ndata: {\"dropped\":") != std::string::npos);
}

TEST_CASE("WebSocket stream delivers records committed after subscribing, filtered", "[api][ws]") {
    Api api;
    auto run = [&](int fd, const std::string& host_hdr) {
        REQUIRE(send_all(fd, "GET /v1/events/ws?tool=git HTTP/1.1\r\nHost: " + host_hdr +
                                 "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
                                 (fd >= 0 && host_hdr != "x" ? api.auth() : std::string()) + "\r\n"));
        std::string carry;
        auto resp = read_response(fd, carry, 5000ms);
        REQUIRE(resp.status == 101);
        CHECK(resp.headers["sec-websocket-accept"] == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        // the subscription exists once the handshake is answered
        api.store->enqueue(decision(2, "curl", BW_LAYER_BPF_LSM, BW_DECISION_DENY));
        auto seq = api.store->enqueue(decision(2, "git", BW_LAYER_BPF_LSM, BW_DECISION_DENY, 1, "/repo/.git/config"));
        REQUIRE(seq);
        auto msg = ws_read_text(fd, carry, 5000ms);
        REQUIRE(msg);
        auto j = json::parse(*msg);
        CHECK(j["tool"] == "git");
        CHECK(j["seq"] == *seq);
        CHECK(j["object"] == "/repo/.git/config");
    };
    {
        Fd c(connect_unix(api.sock));
        run(c.fd, "x");
    }
    {
        Fd c(connect_tcp(api.port));
        run(c.fd, api.host());
    }
    // cross-site WebSocket hijacking: a foreign Origin is refused
    Fd c(connect_tcp(api.port));
    auto r = request(c.fd, "GET /v1/events/ws HTTP/1.1\r\nHost: " + api.host() +
                               "\r\nOrigin: http://evil.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
                               api.auth() + "\r\n");
    check_error(r, 403, "forbidden_origin");
}

TEST_CASE("health reports a refusing store with 503", "[api]") {
    TempDir d;
    Metrics m;
    auto s = audit::AuditStore::open({.path = d.path / "a.db", .min_free_bytes = UINT64_MAX / 2}, &m);
    REQUIRE(s);
    http::Router router;
    http::ApiContext ctx;
    ctx.store = s->get();
    http::register_v1_routes(router, ctx);
    auto srv = http::HttpServer::start({.unix_path = (d.path / "s.sock").string(), .allowed_uids = {geteuid()}},
                                       router, &m);
    REQUIRE(srv);
    auto r = get((d.path / "s.sock").string(), 0, "/v1/health");
    CHECK(r.status == 503);
    auto j = body_json(r);
    CHECK(j["status"] == "refusing");
    CHECK(j["accepting_runs"] == false);
    CHECK_THAT(j["audit"]["reason"].get<std::string>(), Catch::Contains("disk full"));
}

TEST_CASE("task denials: each deny record explained with its rule and the grant that would allow it",
          "[api][tasks][denials]") {
    if (geteuid() != 0) {
        WARN("not root: task work directories cannot be given to the sandbox uid; case not run");
        return;
    }
    Api api;
    auto post = [&](const std::string& target, const json& body) {
        Fd c(connect_unix(api.sock));
        std::string b = body.dump();
        return request(c.fd, "POST " + target + " HTTP/1.1\r\nHost: agentd\r\nContent-Type: application/json\r\nContent-Length: " +
                                 std::to_string(b.size()) + "\r\nConnection: close\r\n\r\n" + b);
    };
    auto created = post("/v1/tasks", {{"tools", {"sh"}},
                                      {"grant", {{"files", {{{"path", "${workdir}/out"}, {"rights", {"create", "write"}}}}}}}});
    REQUIRE(created.status == 201);
    auto task = body_json(created);
    uint64_t id = task["id"];
    std::string workdir = task["workdir"];

    // A decision record the way the kernel layers hand one over: sh's rules
    // allow creating in the work directory, the task's grant confines it to
    // out/, so the grant is what stands in the way.
    audit::AuditRecord r;
    r.kind = audit::RecordKind::Decision;
    r.ts_ns = audit::realtime_now_ns();
    r.task_id = id;
    r.run_id = 7;
    r.tool = "sh";
    r.policy_version = task["policy_version"];
    r.rule_id = 3;
    r.rule_file = "rules/sh.yaml";
    r.rule_line = 17;
    r.rule_text = "create: [\"${workdir}/out\"]";
    r.layer = BW_LAYER_LANDLOCK;
    r.op = BW_OP_FILE_CREATE;
    r.object = workdir + "/b.txt";
    r.decision = BW_DECISION_DENY;
    r.err = EACCES;
    auto seq = api.store->enqueue(r);
    REQUIRE(seq);
    REQUIRE(api.store->wait_committed(*seq, 5000ms));
    // an allow of the same task and a denial of another task are not listed
    r.decision = BW_DECISION_ALLOW;
    api.store->enqueue(r);
    r.decision = BW_DECISION_DENY;
    r.task_id = id + 100;
    auto last = api.store->enqueue(r);
    REQUIRE(last);
    REQUIRE(api.store->wait_committed(*last, 5000ms));

    auto res = get(api.sock, 0, "/v1/tasks/" + std::to_string(id) + "/denials");
    REQUIRE(res.status == 200);
    auto j = body_json(res);
    INFO(j.dump(1));
    REQUIRE(j["denials"].size() == 1);
    const auto& d = j["denials"][0];
    CHECK(d["record"]["seq"] == *seq);
    CHECK(d["record"]["rule"]["file"] == "rules/sh.yaml");
    CHECK(d["record"]["rule"]["line"] == 17);
    CHECK(d["denial"]["rule"].get<std::string>().starts_with("rules/sh.yaml:17 "));
    REQUIRE(d["denial"]["grant_would_allow"].is_object());
    CHECK(d["denial"]["grant_would_allow"]["grant"]["files"][0]["path"] == workdir + "/b.txt");
    CHECK(j["next_after_seq"].is_null());

    // paging and parameters
    auto after = body_json(get(api.sock, 0, "/v1/tasks/" + std::to_string(id) + "/denials?after_seq=" + std::to_string(*seq)));
    CHECK(after["denials"].empty());
    check_error(get(api.sock, 0, "/v1/tasks/" + std::to_string(id) + "/denials?limit=0"), 400, "bad_parameter");
    check_error(get(api.sock, 0, "/v1/tasks/" + std::to_string(id) + "/denials?colour=red"), 400, "bad_parameter");
    check_error(get(api.sock, 0, "/v1/tasks/999/denials"), 404, "unknown_task");
}
