#include "common/json_input.h"

namespace bulwark {

size_t json_nesting_depth(std::string_view text, size_t limit) {
    size_t depth = 0, deepest = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\')
                ++i;  // the escaped character, whatever it is
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > deepest) deepest = depth;
            if (deepest > limit) break;
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return deepest;
}

std::expected<nlohmann::json, std::string> parse_peer_json(std::string_view text, size_t max_depth) {
    if (json_nesting_depth(text, max_depth) > max_depth)
        return std::unexpected("is nested deeper than " + std::to_string(max_depth) + " levels");
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) return std::unexpected(std::string("is not valid JSON"));
    return j;
}

}  // namespace bulwark
