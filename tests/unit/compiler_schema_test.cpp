// The JSON schema and the docs cannot drift from the parser.
#include "compiler_support.h"

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

using namespace bulwark::test;

namespace {
std::string slurp(const std::string& p) {
    std::ifstream in(p);
    REQUIRE(in.good());
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}
std::set<std::string> keys_of(const nlohmann::json& obj) {
    std::set<std::string> out;
    for (auto it = obj.at("properties").begin(); it != obj.at("properties").end(); ++it) out.insert(it.key());
    return out;
}
}  // namespace

TEST_CASE("the schema's keys are exactly the parser's keys", "[compiler][schema]") {
    auto schema = nlohmann::json::parse(slurp(BULWARK_SOURCE_DIR "/policy-compiler/schema/bulwark-rules.schema.json"));
    CHECK(schema["$schema"] == "https://json-schema.org/draft/2020-12/schema");
    for (const auto& [section, keys] : accepted_keys()) {
        INFO("section: " << (section.empty() ? "(top level)" : section));
        const auto& def = section.empty() ? schema : schema.at("$defs").at(section);
        CHECK(keys_of(def) == std::set<std::string>(keys.begin(), keys.end()));
        CHECK(def.at("additionalProperties") == false);
    }
}

TEST_CASE("every rule-file example in the docs parses", "[compiler][schema]") {
    std::string doc = slurp(BULWARK_SOURCE_DIR "/docs/rule-language.md");
    std::regex block("```yaml\\n([\\s\\S]*?)```");
    int rule_examples = 0;
    for (std::sregex_iterator it(doc.begin(), doc.end(), block), end; it != end; ++it) {
        std::string text = (*it)[1].str();
        if (text.find("\ncases:") != std::string::npos) continue;  // a policy test file, not rules
        ++rule_examples;
        auto diags = check_syntax(text, "docs/rule-language.md");
        INFO(render_diagnostics(diags, SourceMap{{"docs/rule-language.md", text}}));
        CHECK(count_errors(diags) == 0);
    }
    CHECK(rule_examples >= 1);
}
