// agentd/tasks/workdir_files.cpp in a temporary directory: a working file
// never lands outside the work directory, whatever stands in it. No root
// (openat2 with RESOLVE_BENEATH needs none); the root tier (tasks_api_test)
// covers the same through a real daemon and tar-planted links.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tasks/workdir_files.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Dir {
    fs::path path;
    Dir() {
        char tmpl[] = "/tmp/bulwark-unit-files-XXXXXX";
        REQUIRE(::mkdtemp(tmpl));
        path = tmpl;
    }
    ~Dir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

std::string refusal(const std::string& workdir, const std::string& path) {
    auto files = bulwark::parse_workdir_files(json{{path, "pwned"}});
    if (!files) return files.error();
    auto w = bulwark::write_workdir_files(workdir, *files);
    return w ? std::string() : w.error();
}

}  // namespace

TEST_CASE("workdir files: a file and its parents land in the work directory", "[tasks][files]") {
    Dir wd;
    auto files = bulwark::parse_workdir_files(json{{"src/notes.txt", "carried in\n"}});
    REQUIRE(files);
    auto w = bulwark::write_workdir_files(wd.path, *files);
    REQUIRE(w);
    CHECK((*w)[0]["path"] == "src/notes.txt");
    std::ifstream in(wd.path / "src/notes.txt");
    std::string got((std::istreambuf_iterator<char>(in)), {});
    CHECK(got == "carried in\n");
    struct stat st{};
    REQUIRE(::stat((wd.path / "src/notes.txt").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0644);
}

TEST_CASE("workdir files: `..`, absolute paths and planted links never lead out", "[tasks][files]") {
    Dir wd, outside;
    // Control: followed, the planted links do lead outside.
    fs::create_directory_symlink(outside.path, wd.path / "escape");
    fs::create_symlink(outside.path / "target", wd.path / "link");
    { std::ofstream(wd.path / "escape/probe") << "x"; }
    REQUIRE(fs::exists(outside.path / "probe"));
    fs::remove(outside.path / "probe");

    CHECK_THAT(refusal(wd.path, "../x"), Catch::StartsWith("files.../x: "));
    CHECK_THAT(refusal(wd.path, "/etc/x"), Catch::StartsWith("files./etc/x: "));
    CHECK_THAT(refusal(wd.path, "escape/x"), Catch::StartsWith("files.escape/x: "));
    CHECK_THAT(refusal(wd.path, "link"), Catch::StartsWith("files.link: "));
    CHECK(fs::is_empty(outside.path));
}
