#pragma once
// Files only this user may have written: a cache's directory and its entries
// (compile_cache.h's bundles, agentd's KVM canary verdicts). A directory or
// file is trusted when it is of the kind asked for, this user's, and
// writable by no one else; an entry is written beside its place and renamed
// there, so a reader never sees half of one.
#include <cstddef>
#include <expected>
#include <string>
#include <string_view>

struct stat;

namespace bulwark::policy {

// "" when trusted, else why not ("not a regular file", "owned by uid N, not
// M", "writable by group or others").
std::string untrusted(const struct stat& st, bool want_dir);

// Makes `dir` (absolute; missing parents 0755, as the system would, the
// directory itself 0700) and checks it: "" or why it is not usable
// ("cannot make <path>: <error>", "<dir>: <error>", "<dir> is <why>").
std::string make_private_dir(const std::string& dir);

struct PrivateReadError {
    enum class Kind { Absent, Io, Untrusted, TooLarge } kind;
    std::string why;  // Io: the error; Untrusted: untrusted()'s answer
};
// The bytes of `file` (not followed if a symlink), when it is trusted and at
// most max_bytes long.
std::expected<std::string, PrivateReadError> read_private_file(const std::string& file, size_t max_bytes);

// Writes `text` beside `file` (mode 0600) and renames it there: "" or
// "cannot write <path>: <error>".
std::string write_private_file(const std::string& file, std::string_view text);

}  // namespace bulwark::policy
