// Golden diagnostics: the exact text a user sees.
#include "compiler_support.h"

using namespace bulwark::test;

namespace {
std::string render(std::string_view text, std::string file = "rules/curl.yaml") {
    auto r = compile_string(text, file, options());
    return render_diagnostics(r);
}
}  // namespace

TEST_CASE("unknown syscall: location, underline and did-you-mean", "[compiler][diagnostics]") {
    std::string text =
        "tool: curl\n"
        "syscalls:\n"
        "  deny:\n"
        "    - ptrce\n";
    CHECK(render(text) ==
          "rules/curl.yaml:4:7: error: unknown syscall \"ptrce\"\n"
          " 4 |     - ptrce\n"
          "   |       ^~~~~\n"
          "hint: did you mean \"ptrace\"?\n");
}

TEST_CASE("unknown key golden", "[compiler][diagnostics]") {
    CHECK(render("tool: curl\nfiles:\n  raed: [/etc]\n") ==
          "rules/curl.yaml:3:3: error: unknown key \"raed\" in \"files\"\n"
          " 3 |   raed: [/etc]\n"
          "   |   ^~~~\n"
          "hint: did you mean \"read\"?\n");
}

TEST_CASE("quoted values are underlined whole", "[compiler][diagnostics]") {
    CHECK(render("tool: curl\nnetwork:\n  connect: [{ cidr: \"10.0.0.1/33\" }]\n") ==
          "rules/curl.yaml:3:21: error: prefix length \"33\" in \"10.0.0.1/33\": out of range (at most 32) "
          "(IPv4 allows 0..32)\n"
          " 3 |   connect: [{ cidr: \"10.0.0.1/33\" }]\n"
          "   |                     ^~~~~~~~~~~~~\n");
}

TEST_CASE("whole-file diagnostics have no source line", "[compiler][diagnostics]") {
    CHECK(render("") == "rules/curl.yaml: error: rule file is empty\nhint: a rule file needs at least `tool:`\n");
}

TEST_CASE("warnings: broad grants and shadowed rules", "[compiler][diagnostics]") {
    std::string text =
        "tool: curl\n"
        "files:\n"
        "  write: [/etc]\n"
        "  read: [\"${home}/.ssh/config\"]\n"
        "  deny: [\"${home}/.ssh\"]\n";
    CHECK(render(text) ==
          "rules/curl.yaml:3:11: warning: write on /etc reaches the whole system directory /etc\n"
          " 3 |   write: [/etc]\n"
          "   |           ^~~~\n"
          "hint: grant the narrowest directory the tool writes, e.g. \"${workdir}\"\n"
          "rules/curl.yaml:4:10: warning: this rule has no effect: files.deny: ${home}/.ssh (rules/curl.yaml:5:10) "
          "denies what it allows\n"
          " 4 |   read: [\"${home}/.ssh/config\"]\n"
          "   |          ^~~~~~~~~~~~~~~~~~~~~\n");
}

TEST_CASE("warning: a grant on the host's /tmp, which no sandbox shows", "[compiler][diagnostics]") {
    std::string text =
        "tool: curl\n"
        "files:\n"
        "  read: [/tmp/cache, \"${tmp}\", \"${workdir}\"]\n"
        "  write: [/tmp]\n";
    CHECK(render(text) ==
          "rules/curl.yaml:3:10: warning: the sandbox does not show the host's /tmp/cache: every run gets a "
          "private, empty /tmp, so this grant reaches nothing\n"
          " 3 |   read: [/tmp/cache, \"${tmp}\", \"${workdir}\"]\n"
          "   |          ^~~~~~~~~~\n"
          "hint: for the run's scratch files write \"${tmp}\" (e.g. \"${tmp}/cache\")\n"
          "hint: for files shared with the host, put them in the work directory: \"${workdir}/...\"\n"
          "rules/curl.yaml:4:11: warning: the sandbox does not show the host's /tmp: every run gets a private, "
          "empty /tmp, so this grant reaches nothing\n"
          " 4 |   write: [/tmp]\n"
          "   |           ^~~~\n"
          "hint: for the run's scratch files write \"${tmp}\"\n"
          "hint: for files shared with the host, put them in the work directory: \"${workdir}/...\"\n");
    // Control: ${tmp} (the run's own /tmp) and a deny under /tmp are no warning.
    CHECK(render("tool: curl\nfiles:\n  write: [\"${tmp}\", \"${tmp}/x\"]\n  deny: [/tmp/secret]\n") == "");
}

TEST_CASE("tabs in the source line keep the caret aligned", "[compiler][diagnostics]") {
    Diagnostic d{Severity::Error, {"f.yaml", 1, 3}, 2, "m", {}, "x"};
    SourceMap src{{"f.yaml", "\tx: yy\n"}};
    CHECK(render_diagnostic(d, src) == "f.yaml:1:3: error: m\n 1 | \tx: yy\n   | \t ^~\n");
}

TEST_CASE("diagnostics as JSON", "[compiler][diagnostics]") {
    auto r = compile("tool: curl\nmode: enforse\n");
    auto j = diagnostics_to_json(r.diagnostics);
    REQUIRE(j.size() == 1);
    CHECK(j[0]["severity"] == "error");
    CHECK(j[0]["line"] == 2);
    CHECK(j[0]["col"] == 7);
    CHECK(j[0]["code"] == "bad-mode");
    CHECK(j[0]["hints"][0] == "did you mean \"enforce\"?");
}

TEST_CASE("closest match", "[compiler][diagnostics]") {
    CHECK(edit_distance("kitten", "sitting") == 3);
    CHECK(closest_match("ptrce", {"ptrace", "pread64"}) == "ptrace");
    CHECK(closest_match("zzzzzz", {"ptrace"}).empty());
}
