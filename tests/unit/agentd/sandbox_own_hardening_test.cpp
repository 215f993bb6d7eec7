// Bulwark's own binaries under the ELF checker it applies to the tools it
// confines (policy-compiler/src/elf_props.cpp): every property the build asks for
// (cmake/BulwarkHardening.cmake) present in every shipped binary, except
// what the configure step said this toolchain cannot give.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "bulwark/policy/elf_props.h"

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, sep);)
        if (!item.empty()) out.push_back(item);
    return out;
}

// "cet-ibt (the toolchain's ...)" -> the property the toolchain lacks.
bool toolchain_lacks(const std::string& property) {
    for (const auto& lack : split(BULWARK_HARDENING_LACKS, '|'))
        if (lack.rfind(property, 0) == 0 || lack.find(" " + property) != std::string::npos) return true;
    return false;
}

}  // namespace

TEST_CASE("every shipped binary has the hardening the build asks for", "[hardening][self]") {
    if (!BULWARK_HARDEN_ON) {
        WARN("a build with BULWARK_HARDEN=OFF: nothing to check");
        return;
    }
    const std::vector<std::string> binaries = split(BULWARK_SHIPPED_BINARIES, '|');
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // A sanitizer build ships nothing: the main build's run of this tier checks the shipped binaries.
    REQUIRE(binaries.empty());
    return;
#endif
    REQUIRE(binaries.size() >= 4);
#if defined(__x86_64__)
    const std::vector<std::string> props{"pie", "relro", "bind-now", "nx", "stack-protector", "fortify", "cet-ibt",
                                         "cet-shstk"};
#elif defined(__aarch64__)
    const std::vector<std::string> props{"pie", "relro", "bind-now", "nx", "stack-protector", "fortify", "bti", "pac"};
#else
    const std::vector<std::string> props{"pie", "relro", "bind-now", "nx", "stack-protector", "fortify"};
#endif
    size_t checked = 0;
    for (const auto& bin : binaries) {
        auto elf = bulwark::read_elf_props(bin);
        INFO(bin);
        REQUIRE(elf);
        // A static program (the OCI launcher, the guest agent) imports
        // nothing: its canaries and checked calls are compiled in like the
        // others', but the checker reads them off a binary's imports.
        const bool is_static = elf->interp.empty();
        for (const auto& p : props) {
            if (toolchain_lacks(p)) continue;
            if (is_static && (p == "stack-protector" || p == "fortify")) continue;
            INFO(p);
            auto [known, has] = bulwark::elf_property(*elf, p);
            REQUIRE(known);
            CHECK(has);
            ++checked;
        }
    }
    CHECK(checked >= binaries.size() * 4);
}

TEST_CASE("the checker tells a binary without the hardening", "[hardening][self]") {
    // The control: the same check on a program built without it fails.
    auto elf = bulwark::read_elf_props(BULWARK_UNHARDENED_PROBE);
    REQUIRE(elf);
    CHECK_FALSE(bulwark::elf_property(*elf, "bind-now").second);
    CHECK_FALSE(bulwark::elf_property(*elf, "stack-protector").second);
    CHECK_FALSE(bulwark::elf_property(*elf, "fortify").second);
}
