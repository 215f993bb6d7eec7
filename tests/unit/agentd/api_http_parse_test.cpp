// agentd/api/http_parse.cpp: what the API server accepts from the wire, with
// the fuzz target's seeds (tests/fuzz/corpus/http) and the request
// smuggling and DNS-rebinding cases as named cases.
#include <catch2/catch.hpp>

#include <string>

#include "api/http_parse.h"

using namespace bulwark::http;

namespace {

ParseOutcome parse(const std::string& bytes, HttpLimits limits = {}) { return parse_request_bytes(bytes, limits); }

}  // namespace

TEST_CASE("the fuzz seeds: a GET, a chunked POST and a WebSocket upgrade are accepted whole") {
    for (const std::string& req : {
             std::string("GET /v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n"),
             std::string("POST /v1/audit?task=1&tool=git HTTP/1.1\r\nHost: 127.0.0.1:7878\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
             std::string("GET /v1/events/ws HTTP/1.1\r\nHost: [::1]:7878\r\nOrigin: http://localhost:7878\r\n"
                         "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n"),
         }) {
        INFO(req);
        auto out = parse(req);
        CHECK(out.status == 0);
        CHECK(out.consumed == req.size());
    }
}

TEST_CASE("a request cut short asks for more bytes") {
    CHECK(parse("GET /v1/health HTTP/1.1\r\nHost: local").status == 1);
    CHECK(parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc").status == 1);
}

TEST_CASE("request smuggling is refused: two lengths, length and chunked, codings other than chunked") {
    auto refused = [](const std::string& req) {
        auto out = parse(req);
        INFO(req << " -> " << out.status << " " << out.code);
        CHECK(out.status >= 400);
        CHECK(out.status < 500);
        return out.code;
    };
    // the dup_cl seed
    refused("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc");
    refused("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\n\r\nabc");
    refused("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
    refused("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n");
    refused("POST / HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
}

TEST_CASE("the request's shape: Host on HTTP/1.1, origin-form targets, the limits") {
    CHECK(parse("GET /v1/health HTTP/1.1\r\n\r\n").status == 400);
    CHECK(parse("GET http://evil.example/v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n").status == 400);
    CHECK(parse("GET /v1/health HTTP/1.1\r\nHost: localhost\r\nX-A: a\x01" "b\r\n\r\n").status == 400);

    HttpLimits small;
    small.uri_limit = 32;
    small.header_limit = 256;
    small.body_limit = 16;
    small.max_fields = 4;
    CHECK(parse("GET /" + std::string(40, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n", small).status >= 400);
    CHECK(parse("GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(300, 'p') + "\r\n\r\n", small).status >= 400);
    CHECK(parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n\r\n" + std::string(17, 'b'), small).status ==
          413);
    std::string fields;
    for (int i = 0; i < 6; ++i) fields += "X-" + std::to_string(i) + ": v\r\n";
    CHECK(parse("GET / HTTP/1.1\r\nHost: x\r\n" + fields + "\r\n", small).status >= 400);
    CHECK(parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\n\r\n" + std::string(16, 'b'), small).status == 0);
}

TEST_CASE("Host and Origin must name the loopback (DNS rebinding)") {
    for (const char* h : {"localhost", "localhost:7878", "127.0.0.1", "127.0.0.1:7878", "[::1]", "[::1]:7878",
                          "LOCALHOST:7878"}) {
        INFO(h);
        CHECK(host_allowed(h, 7878));
    }
    for (const char* h : {"evil.example", "localhost:7879", "127.0.0.2", "localhost.evil.example", "", "[::1]:80",
                          "127.0.0.1:7878.evil"}) {
        INFO(h);
        CHECK_FALSE(host_allowed(h, 7878));
    }
    CHECK(origin_allowed("http://localhost:7878", 7878));
    CHECK(origin_allowed("https://127.0.0.1:7878", 7878));
    CHECK_FALSE(origin_allowed("http://evil.example", 7878));
    CHECK_FALSE(origin_allowed("file://localhost:7878", 7878));
    CHECK_FALSE(origin_allowed("null", 7878));
}

TEST_CASE("query strings decode, and bad escapes or repeated keys are refused") {
    auto q = parse_query("task=1&tool=git&object=%2Fetc%2Fpasswd&label=a+b");
    REQUIRE(q);
    CHECK(q->at("task") == "1");
    CHECK(q->at("tool") == "git");
    CHECK(q->at("object") == "/etc/passwd");
    CHECK(q->at("label") == "a b");
    CHECK_FALSE(parse_query("a=1&a=2"));
    CHECK_FALSE(parse_query("a=%zz"));
    CHECK_FALSE(parse_query("a=%4"));
    CHECK(percent_decode("a%20b+c", false) == "a b+c");
    CHECK(percent_decode("a%20b+c", true) == "a b c");
}
