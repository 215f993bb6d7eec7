#pragma once
// JSON from a peer (API request bodies, MCP messages). nlohmann's parser is
// iterative, but copying, comparing and dumping a value recurse once per
// level of nesting: a 200 KB body of nested arrays, well within the API's
// body limit, overflowed the stack the first time a route copied it
// (POST /v1/tasks with such a "grant" killed agentd). Text nested deeper
// than any request needs is refused before it is parsed.
#include <cstddef>
#include <expected>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace bulwark {

// The deepest request of the API or MCP nests under 10 levels.
inline constexpr size_t kMaxJsonDepth = 64;

// The nesting depth of arrays and objects in `text` (brackets inside strings
// do not count); counting stops once it passes `limit`.
size_t json_nesting_depth(std::string_view text, size_t limit = kMaxJsonDepth);

// The value, or why not as the end of a sentence about the text
// ("is not valid JSON", "is nested deeper than 64 levels").
std::expected<nlohmann::json, std::string> parse_peer_json(std::string_view text, size_t max_depth = kMaxJsonDepth);

}  // namespace bulwark
