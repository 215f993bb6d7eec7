// binaries[].libraries: auto: the compiler grants read and exec on a binary's
// loader and shared-library closure, each a rule of its own at the key,
// resolved on this host or inside a given root filesystem.
#include "compiler_support.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "bulwark/policy/libraries.h"
#include "bulwark_abi.h"

using namespace bulwark::test;
namespace fs = std::filesystem;

namespace {

constexpr uint32_t kReadExec = BW_FS_READ | BW_FS_EXEC;

const FileRule* library_rule(const Bundle& b, std::string_view file_name) {
    for (const auto& f : b.files) {
        const RuleRef* r = b.rule(f.rule_id);
        if (r && r->text.starts_with("files.library: ") && fs::path(f.path).filename().string().starts_with(file_name))
            return &f;
    }
    return nullptr;
}

size_t library_rules(const Bundle& b) {
    return size_t(std::count_if(b.rules.begin(), b.rules.end(),
                                [](const RuleRef& r) { return r.text.starts_with("files.library: "); }));
}

struct TempRoot {
    fs::path dir;
    TempRoot() {
        char t[] = "/tmp/bulwark-libroot-XXXXXX";
        dir = ::mkdtemp(t);
    }
    ~TempRoot() { fs::remove_all(dir); }
    // `host_path` copied to the same path inside the root
    void copy(const std::string& host_path, const std::string& as) {
        fs::create_directories((dir / as.substr(1)).parent_path());
        fs::copy_file(host_path, dir / as.substr(1), fs::copy_options::overwrite_existing);
    }
};

}  // namespace

TEST_CASE("libraries: auto grants the loader and the closure, each traced to the key", "[compiler][libraries]") {
    auto host = binary_libraries("/usr/bin/true", "");
    REQUIRE(host.has_value());
    REQUIRE(host->size() >= 2);  // the loader and libc

    auto b = require_ok("tool: t\nbinaries:\n  - path: /usr/bin/true\n    libraries: auto\n");
    const FileRule* libc = library_rule(b, "libc.so");
    REQUIRE(libc != nullptr);
    CHECK(libc->allow == kReadExec);
    CHECK(libc->deny == 0u);
    CHECK(libc->path == fs::canonical(libc->path).string());  // the file the kernel judges
    const RuleRef* r = b.rule(libc->rule_id);
    REQUIRE(r);
    CHECK(r->section == "files");
    CHECK(r->loc.line == 4);
    CHECK(r->loc.col == 16);  // at `auto`
    CHECK(r->text == "files.library: " + libc->path + " (read, exec; libc.so.6 needed by " +
                         fs::canonical("/usr/bin/true").string() + ", found via " +
                         (r->text.find("ld.so.conf") != std::string::npos ? "ld.so.conf" : "default directories") +
                         "; for /usr/bin/true)");
    const FileRule* loader = library_rule(b, "ld-linux");
    REQUIRE(loader != nullptr);
    CHECK(b.rule(loader->rule_id)->text.find("found via PT_INTERP") != std::string::npos);
    CHECK(library_rules(b) == host->size());

    // Coverage reads them as file rules: the layers that hold files hold them.
    // none (and no key) grant nothing.
    CHECK(library_rules(require_ok("tool: t\nbinaries: [{path: /usr/bin/true, libraries: none}]\n")) == 0u);
    CHECK(library_rules(require_ok("tool: t\nbinaries: [/usr/bin/true]\n")) == 0u);
}

TEST_CASE("libraries: auto does not grant twice what an allow already grants", "[compiler][libraries]") {
    auto b = require_ok(
        "tool: t\nbinaries: [{path: /usr/bin/true, libraries: auto}]\n"
        "files:\n  read: [/usr/lib]\n  exec: [/usr/lib]\n");
    for (const auto& f : b.files)
        if (b.rule(f.rule_id)->text.starts_with("files.library: ")) CHECK_FALSE(f.path.starts_with("/usr/lib/"));
    // read alone is not read and exec: the library is still granted
    auto c = require_ok("tool: t\nbinaries: [{path: /usr/bin/true, libraries: auto}]\nfiles:\n  read: [/usr/lib]\n");
    CHECK(library_rule(c, "libc.so") != nullptr);
}

TEST_CASE("libraries: auto errors name the binary, the library and the key", "[compiler][libraries]") {
    require_error_at("tool: t\nbinaries:\n  - path: /usr/bin/no-such-tool\n    libraries: auto\n", "unresolved-library",
                     4, 16, "/usr/bin/no-such-tool");
    require_error_at("tool: t\nbinaries: [{path: /usr/bin/true, libraries: atuo}]\n", "bad-value", 2, 45,
                     "binaries.libraries");
    TempRoot root;
    std::ofstream(root.dir / "script.sh") << "#!/bin/sh\necho hi\n";
    fs::permissions(root.dir / "script.sh", fs::perms::owner_all);
    auto r = compile("tool: t\nbinaries: [{path: " + (root.dir / "script.sh").string() + ", libraries: auto}]\n");
    REQUIRE_FALSE(r.ok());
    REQUIRE(find_diag(r, "unresolved-library"));
    CHECK(find_diag(r, "unresolved-library")->message.find("for a script, list its interpreter") != std::string::npos);
}

TEST_CASE("libraries: auto inside a root filesystem grants the root's paths", "[compiler][libraries]") {
    auto host = binary_libraries("/usr/bin/true", "");
    REQUIRE(host.has_value());
    TempRoot root;
    root.copy("/usr/bin/true", "/usr/bin/true");
    for (const auto& lib : *host) root.copy(lib.path, lib.path);
    // the interpreter's name as PT_INTERP spells it, a relative link as Debian ships it
    for (const auto& lib : *host)
        if (lib.found_via == "PT_INTERP" && lib.needed_as != lib.path) {
            fs::create_directories((root.dir / lib.needed_as.substr(1)).parent_path());
            fs::create_symlink(fs::path(lib.path).lexically_relative(fs::path(lib.needed_as).parent_path()),
                               root.dir / lib.needed_as.substr(1));
        }
    auto opts = options();
    opts.library_root = root.dir.string();
    const std::string text = "tool: t\nbinaries: [{path: /usr/bin/true, libraries: auto}]\n";
    auto r = compile_string(text, "test.yaml", opts);
    INFO(render_diagnostics(r));
    REQUIRE(r.ok());
    const FileRule* libc = library_rule(*r.bundle, "libc.so");
    REQUIRE(libc != nullptr);
    CHECK_FALSE(libc->path.starts_with(root.dir.string()));  // the container's path
    CHECK(fs::exists(root.dir / libc->path.substr(1)));

    // libc gone from the root: the host's copy does not stand in for it
    fs::remove(root.dir / libc->path.substr(1));
    auto gone = compile_string(text, "test.yaml", opts);
    REQUIRE_FALSE(gone.ok());
    REQUIRE(find_diag(gone, "unresolved-library"));
    CHECK(find_diag(gone, "unresolved-library")->message.find("would not find: libc.so.6 (needed by /usr/bin/true)") !=
          std::string::npos);

    // an absolute symlink in the root leads to the host's file: refused, not followed out
    fs::create_symlink("/usr/bin/true", root.dir / "usr/bin/escape");
    auto out = compile_string("tool: t\nbinaries: [{path: /usr/bin/escape, libraries: auto}]\n", "test.yaml", opts);
    REQUIRE_FALSE(out.ok());
    REQUIRE(find_diag(out, "unresolved-library"));
    CHECK(find_diag(out, "unresolved-library")->message.find("outside the root") != std::string::npos);
}
