// agentd/common/trace_context.cpp: the W3C traceparent, read strictly.
#include <catch2/catch.hpp>

#include "common/trace_context.h"

using bulwark::parse_traceparent;

TEST_CASE("a traceparent's fields are read", "[trace]") {
    auto t = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    REQUIRE(t);
    CHECK(t->version == 0);
    CHECK(t->trace_id_hex() == "4bf92f3577b34da6a3ce929d0e0e4736");
    CHECK(t->span_id_hex() == "00f067aa0ba902b7");
    CHECK(t->flags == 1);
    CHECK(t->trace_id[0] == 0x4b);
    CHECK(t->span_id[7] == 0xb7);
    CHECK(parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")->flags == 0);
    // A later version may carry more fields; they are kept, not read.
    auto v1 = parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-abcd");
    REQUIRE(v1);
    CHECK(v1->version == 1);
    CHECK(v1->text == "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-abcd");
}

TEST_CASE("a malformed traceparent is refused with the reason", "[trace]") {
    auto why = [](std::string_view v) {
        auto t = parse_traceparent(v);
        return t ? std::string("accepted") : t.error();
    };
    const std::string form = "must be a W3C traceparent: 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>";
    CHECK(why("") == form);
    CHECK(why("00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01") == form);
    CHECK(why("0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01") ==
          "version '0g' is not two lowercase hex digits");
    CHECK(why("00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01") ==
          "parent id: 16 lowercase hex digits expected");
    CHECK(why("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x") ==
          "trace flags: 2 lowercase hex digits expected");
    CHECK(why("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x") == form);
    CHECK(why("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-a b") ==
          "fields after the flags: lowercase hex digits and '-' only");
    CHECK(why("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-" + std::string(300, 'a')) ==
          "longer than 256 characters");
    CHECK(why(" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01") ==
          "version ' 0' is not two lowercase hex digits");
}
