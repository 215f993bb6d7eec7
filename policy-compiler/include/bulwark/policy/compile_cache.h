#pragma once
// Compiled bundles kept in a directory and reused while everything the
// compile read is unchanged: the rule files' bytes, which file each search
// found and which paths it tried in vain, the binary's library closure (its
// files, symlinks, ld.so.conf and its includes: compile_inputs.h), the
// compiler itself (the GNU build id of the running program), the compile
// options and the working directory relative paths start from. Any of them
// changed, or the entry unreadable, and the rule file is compiled again.
//
// Only a compile without a single diagnostic is kept (a warning is said at
// every compile), and only one whose inputs have settled (none changed in
// the last seconds). An entry is trusted only when it is a regular file owned
// by this user, writable by nobody else, in a directory of the same kind,
// and its bundle's content hash is its own.
#include <optional>
#include <string>

#include "bulwark/policy/compiler.h"

namespace bulwark::policy {

struct CachedCompile {
    CompileResult result;  // diagnostics and bundle; sources only when compiled now
    // "hit"; "stored (<why the entry was not reused>)"; "not stored: <why>
    // (<why not reused>)"
    std::string cache;
    bool hit() const { return cache == "hit"; }
};

class CompileCache {
public:
    // The directory $BULWARK_BUNDLE_CACHE names ("off": no cache), else
    // /var/cache/bulwark/bundles; made (0700) when missing. nullopt, with
    // the reason in `why_not`, when there is no usable cache.
    static std::optional<CompileCache> from_environment(std::string& why_not);
    static std::optional<CompileCache> at(const std::string& dir, std::string& why_not);

    // compile_file(path, opts), reusing or refreshing this directory's entry.
    CachedCompile compile_file(const std::string& path, const CompileOptions& opts) const;

    const std::string& dir() const { return dir_; }

private:
    explicit CompileCache(std::string dir, std::string build) : dir_(std::move(dir)), build_(std::move(build)) {}
    std::string dir_;
    std::string build_;  // hex GNU build id of the running program
};

// The running program's GNU build id as hex, "" when it was linked without.
std::string own_build_id();

}  // namespace bulwark::policy
