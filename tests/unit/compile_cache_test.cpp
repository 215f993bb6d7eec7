// The bundle cache (policy/compile_cache.h): a compiled bundle is reused only
// while every input the compile read is what it was, each change of one
// (a rule file's bytes, a base found earlier in the search, a library found
// earlier or replaced, a symlink retargeted) compiles again and says why, and
// an entry anyone else could have written is never read.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "bulwark/policy/compile_cache.h"
#include "bulwark/policy/libraries.h"

using namespace bulwark::policy;
namespace fs = std::filesystem;

namespace {

struct CacheTemp {
    fs::path dir;
    CacheTemp() {
        char t[] = "/tmp/bulwark-cache-XXXXXX";
        dir = ::mkdtemp(t);
    }
    ~CacheTemp() { fs::remove_all(dir); }
};

void put_file(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::trunc) << text;
}

// The same bytes count, the same mtime: only the content tells the change.
void rewrite_keeping_stamp(const fs::path& p, const std::string& text) {
    struct stat st{};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    REQUIRE(text.size() == size_t(st.st_size));
    put_file(p, text);
    struct timespec times[2] = {st.st_atim, st.st_mtim};
    REQUIRE(::utimensat(AT_FDCWD, p.c_str(), times, 0) == 0);
}

// `host` copied to the same path inside the root, under a new inode.
void copy_in(const fs::path& root, const std::string& host, const std::string& as) {
    fs::path to = root / as.substr(1);
    fs::create_directories(to.parent_path());
    fs::copy_file(host, to.string() + ".new", fs::copy_options::overwrite_existing);
    fs::rename(to.string() + ".new", to);
}

CompileCache cache_at(const fs::path& dir) {
    std::string why;
    auto c = CompileCache::at(dir.string(), why);
    INFO(why);
    REQUIRE(c.has_value());
    return *c;
}

}  // namespace

// A root filesystem with /usr/bin/tool (a relative link to a copy of
// /usr/bin/true) and its closure where Debian keeps it (/usr/lib/<triplet>;
// the search tries /lib/<triplet> first).
void make_root(const fs::path& root, const std::vector<BinaryLibrary>& host) {
    copy_in(root, "/usr/bin/true", "/usr/lib/bulwark-test/true");
    fs::create_directories(root / "usr/bin");
    fs::create_symlink("../lib/bulwark-test/true", root / "usr/bin/tool");
    for (const auto& lib : host) {
        copy_in(root, lib.path, lib.path);
        if (lib.found_via == "PT_INTERP" && lib.needed_as != lib.path) {
            fs::create_directories((root / lib.needed_as.substr(1)).parent_path());
            fs::create_symlink(fs::path(lib.path).lexically_relative(fs::path(lib.needed_as).parent_path()),
                               root / lib.needed_as.substr(1));
        }
    }
}

TEST_CASE("the bundle cache reuses a compile only while its inputs are unchanged", "[compiler][cache]") {
    CacheTemp t;
    const fs::path rules = t.dir / "rules", first = t.dir / "first";
    auto host = binary_libraries("/usr/bin/true", "");
    REQUIRE(host.has_value());
    std::string libc;
    for (const auto& lib : *host)
        if (lib.needed_as == "libc.so.6") libc = lib.path;
    REQUIRE(libc.starts_with("/usr/lib/"));
    // Each case its own rule file, base and root, so that one case's change
    // is not the reason another compiles again.
    const std::vector<std::string> cases = {"edit", "base", "found-first", "lib-first", "lib-replaced", "relinked", "trust"};
    auto root_of = [&](const std::string& name) { return t.dir / ("root-" + name); };
    auto opts_of = [&](const std::string& name) {
        CompileOptions o;
        o.rules_dirs = {first.string(), rules.string()};
        o.library_root = root_of(name).string();
        return o;
    };
    auto text_of = [](const std::string& name) {
        return "tool: t\nextends: base/" + name +
               "\nbinaries:\n  - path: /usr/bin/tool\n    libraries: auto\nexec:\n  allow: [/usr/bin/tool]\n";
    };
    for (const auto& name : cases) {
        make_root(root_of(name), *host);
        put_file(rules / "base" / (name + ".yaml"), "tool: floor\nfiles:\n  read: [/etc/hostname]\n");
        put_file(rules / (name + ".yaml"), text_of(name));
    }
    auto cache = cache_at(t.dir / "cache");
    auto compile = [&](const std::string& name) {
        auto r = cache.compile_file((rules / (name + ".yaml")).string(), opts_of(name));
        INFO(name << ": " << r.cache << "\n" << render_diagnostics(r.result));
        REQUIRE(r.result.ok());
        return r;
    };

    // Inputs written this instant are not settled: a file rewritten within
    // the kernel's timestamp granularity would keep its stamp.
    CHECK(compile("edit").cache.starts_with("not stored: an input changed in the last seconds"));
    std::this_thread::sleep_for(std::chrono::milliseconds(3100));
    for (const auto& name : cases) {
        auto stored = compile(name);
        CHECK(stored.cache == "stored (no entry)");
        auto again = compile(name);
        CHECK(again.hit());
        REQUIRE(again.result.bundle.has_value());
        CHECK(again.result.bundle->hash == stored.result.bundle->hash);  // the very bundle compiled
        CHECK(again.result.bundle->files.size() == stored.result.bundle->files.size());
    }

    // The rule file's bytes, even with its size and mtime kept.
    std::string edited = text_of("edit");
    edited.replace(edited.find("base/edit"), 9, "base/tide");
    put_file(rules / "base" / "tide.yaml", "tool: floor\nfiles:\n  read: [/etc/passwd]\n");
    rewrite_keeping_stamp(rules / "edit.yaml", edited);
    auto r = compile("edit");
    CHECK(r.cache.find("(content " + (rules / "edit.yaml").string() + " changed)") != std::string::npos);
    const auto& files = r.result.bundle->files;  // compiled from what is there now
    CHECK(std::any_of(files.begin(), files.end(), [](const FileRule& f) { return f.path == "/etc/passwd"; }));

    // A base's bytes.
    put_file(rules / "base" / "base.yaml", "tool: floor\nfiles:\n  read: [/etc/shadow]\n");
    CHECK(compile("base").cache.find("(content " + (rules / "base" / "base.yaml").string() + " changed)") !=
          std::string::npos);

    // A base now found earlier in the search.
    put_file(first / "base" / "found-first.yaml", "tool: floor\nfiles:\n  read: [/]\n");
    CHECK(compile("found-first").cache.find("(type " + (first / "base" / "found-first.yaml").string() +
                                            ": was absent, now regular)") != std::string::npos);

    // A library now found earlier in the search: the new copy is also too
    // fresh to keep.
    copy_in(root_of("lib-first"), root_of("lib-first").string() + libc, "/lib/x86_64-linux-gnu/libc.so.6");
    r = compile("lib-first");
    CHECK(r.cache.find("(inode " + root_of("lib-first").string() +
                       "/lib/x86_64-linux-gnu/libc.so.6: was error: No such file or directory, now dev ") !=
          std::string::npos);
    CHECK(r.cache.starts_with("not stored: an input changed in the last seconds"));

    // A library replaced by another file.
    copy_in(root_of("lib-replaced"), root_of("lib-replaced").string() + libc, libc);
    CHECK(compile("lib-replaced").cache.find("(inode " + root_of("lib-replaced").string() + libc + ": was dev ") !=
          std::string::npos);

    // The binary's symlink retargeted.
    copy_in(root_of("relinked"), "/usr/bin/true", "/usr/lib/bulwark-test/other");
    fs::remove(root_of("relinked") / "usr/bin/tool");
    fs::create_symlink("../lib/bulwark-test/other", root_of("relinked") / "usr/bin/tool");
    CHECK(compile("relinked").cache.find("(resolve " + root_of("relinked").string() + "/usr/bin/tool: was ") !=
          std::string::npos);

    // An entry writable by others is never read, nor a damaged one.
    fs::path entry;
    for (const auto& e : fs::directory_iterator(t.dir / "cache")) {
        std::ifstream in(e.path());
        std::string head;
        std::getline(in, head);
        if (head.find("trust.yaml") != std::string::npos) entry = e.path();
    }
    REQUIRE(!entry.empty());
    fs::permissions(entry, fs::perms::group_write, fs::perm_options::add);
    CHECK(compile("trust").cache.find("ignored: writable by group or others") != std::string::npos);
    CHECK(compile("trust").hit());  // stored again, 0600
    {
        std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(-3, std::ios::end);
        f.put('7');
    }
    CHECK(compile("trust").cache.find("(entry is damaged)") != std::string::npos);
}

TEST_CASE("the bundle cache keeps no compile that said something, and no directory others may write", "[compiler][cache]") {
    CacheTemp t;
    put_file(t.dir / "rules" / "warned.yaml", "tool: t\nfiles:\n  read: [/etc/hostname, /etc/hostname]\n");
    auto cache = cache_at(t.dir / "cache");
    CompileOptions opts;
    auto r = cache.compile_file((t.dir / "rules" / "warned.yaml").string(), opts);
    INFO(render_diagnostics(r.result));
    REQUIRE(r.result.ok());
    REQUIRE(r.result.diagnostics.size() == 1);
    CHECK(r.result.diagnostics[0].code == "duplicate-rule");
    CHECK(r.cache == "not stored: the compile said something (no entry)");
    CHECK(cache.compile_file((t.dir / "rules" / "warned.yaml").string(), opts).result.diagnostics.size() == 1);

    fs::permissions(t.dir / "cache", fs::perms::others_write, fs::perm_options::add);
    std::string why;
    CHECK_FALSE(CompileCache::at((t.dir / "cache").string(), why).has_value());
    CHECK(why == "off: " + (t.dir / "cache").string() + " is writable by group or others");
    CHECK_FALSE(CompileCache::at("relative/dir", why).has_value());
    CHECK(why.find("absolute path") != std::string::npos);
}
