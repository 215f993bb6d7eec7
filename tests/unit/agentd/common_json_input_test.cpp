// agentd/common/json_input.cpp: JSON from a peer, its nesting bounded before
// it is parsed (copying a deeply nested value overflows the stack).
#include <catch2/catch.hpp>

#include <string>

#include "common/json_input.h"

using bulwark::json_nesting_depth;
using bulwark::kMaxJsonDepth;
using bulwark::parse_peer_json;

namespace {
std::string nested(size_t depth, const std::string& inner = "1") {
    return std::string(depth, '[') + inner + std::string(depth, ']');
}
}  // namespace

TEST_CASE("the nesting depth of JSON text", "[json]") {
    CHECK(json_nesting_depth("1") == 0);
    CHECK(json_nesting_depth("{}") == 1);
    CHECK(json_nesting_depth(R"({"a":[{"b":[]}],"c":{}})") == 4);
    // brackets inside strings, escaped quotes among them, do not count
    CHECK(json_nesting_depth(R"({"a":"[[[[{{{{","b":"\"[[[","c":[1]})") == 2);
    CHECK(json_nesting_depth(R"(["\\",[1]])") == 2);
    // counting stops past the limit
    CHECK(json_nesting_depth(nested(1000), 10) == 11);
}

TEST_CASE("peer JSON at the depth limit is read, one level deeper is refused", "[json]") {
    auto at = parse_peer_json(nested(kMaxJsonDepth));
    REQUIRE(at);
    CHECK(at->is_array());
    auto over = parse_peer_json(nested(kMaxJsonDepth + 1));
    REQUIRE_FALSE(over);
    CHECK(over.error() == "is nested deeper than 64 levels");
    auto bad = parse_peer_json("{\"a\":");
    REQUIRE_FALSE(bad);
    CHECK(bad.error() == "is not valid JSON");
}

TEST_CASE("a body of 100,000 nested arrays is refused, not copied", "[json]") {
    // POST /v1/tasks {"tools":["sh"],"grant":[[[...]]]}: 200 KB, under the API's
    // 1 MiB body limit. Parsed and copied as before, it overflowed the stack.
    std::string body = R"({"tools":["sh"],"grant":)" + nested(100000) + "}";
    auto r = parse_peer_json(body);
    REQUIRE_FALSE(r);
    CHECK(r.error() == "is nested deeper than 64 levels");
    // the same shape within the limit is an ordinary body
    auto ok = parse_peer_json(R"({"tools":["sh"],"grant":)" + nested(8) + "}");
    REQUIRE(ok);
    nlohmann::json copy = (*ok)["grant"];
    CHECK(copy.is_array());
}
