// The shipped rule files and their policy tests are well-formed documents:
// every test file parses, has at least six cases with both outcomes, and
// names a shipped tool; every rule file uses only the rule-language keys.
// (Compiling them and running the cases is `policyc test`, tests/rules.)
#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <regex>
#include <set>

#include "bulwark/policy/policy_test.h"

namespace fs = std::filesystem;
using namespace bulwark::policy;

namespace {
const fs::path kRules = fs::path(BULWARK_SOURCE_DIR) / "rules";
}

TEST_CASE("every shipped policy test parses and tests allow and deny", "[rules]") {
    size_t files = 0;
    for (const auto& e : fs::directory_iterator(kRules / "tests")) {
        if (!e.path().string().ends_with(".test.yaml")) continue;
        ++files;
        INFO(e.path().string());
        auto f = load_policy_test(e.path());
        if (!f)
            for (const auto& d : f.error()) FAIL(d.format());
        REQUIRE(f);
        CHECK(f->tool + ".test.yaml" == e.path().filename().string());
        CHECK(fs::exists(kRules / (f->tool + ".yaml")));
        CHECK(f->cases.size() >= 6);
        size_t allow = 0, deny = 0;
        for (const auto& c : f->cases) (c.expect == Verdict::Allow ? allow : deny)++;
        CHECK(allow >= 2);
        CHECK(deny >= 2);
    }
    CHECK(files >= 15);
}

TEST_CASE("every shipped rule file uses only the rule-language vocabulary", "[rules]") {
    static const std::set<std::string> top = {"tool", "description", "extends", "binaries", "mode",
                                              "mandatory", "files", "exec", "network", "syscalls",
                                              "limits", "hardening", "environment"};
    static const std::set<std::string> files_keys = {"read", "write", "create", "remove", "exec", "deny"};
    static const std::regex tool_name("[a-z0-9][a-z0-9._+-]{0,63}");
    size_t n = 0;
    for (const auto& e : fs::recursive_directory_iterator(kRules)) {
        if (e.path().extension() != ".yaml" || e.path().string().ends_with(".test.yaml")) continue;
        ++n;
        INFO(e.path().string());
        YAML::Node doc = YAML::LoadFile(e.path().string());
        REQUIRE(doc.IsMap());
        for (auto it = doc.begin(); it != doc.end(); ++it) CHECK(top.count(it->first.Scalar()) == 1);
        REQUIRE(doc["tool"]);
        CHECK(std::regex_match(doc["tool"].Scalar(), tool_name));
        if (auto f = doc["files"])
            for (auto it = f.begin(); it != f.end(); ++it) CHECK(files_keys.count(it->first.Scalar()) == 1);
        if (auto ex = doc["extends"]) {
            std::string base = ex.IsScalar() ? ex.Scalar() : ex[0].Scalar();
            CHECK(fs::exists(kRules / (base + ".yaml")));
        }
        // every absolute path a rule names is written normalised
        std::function<void(const YAML::Node&)> walk = [&](const YAML::Node& node) {
            if (node.IsScalar()) {
                const std::string& s = node.Scalar();
                if (s.starts_with("/")) {
                    auto norm = normalise_path(s);
                    CHECK((norm && *norm == s));
                }
            } else if (node.IsSequence()) {
                for (const auto& c : node) walk(c);
            } else if (node.IsMap()) {
                for (auto it = node.begin(); it != node.end(); ++it) walk(it->second);
            }
        };
        if (auto f = doc["files"]) walk(f);
        if (auto x = doc["exec"]) walk(x);
    }
    CHECK(n >= 18);
}
