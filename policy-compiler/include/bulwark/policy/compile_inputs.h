#pragma once
// What a compile learnt from the filesystem besides the text of the rule
// files it read (CompileResult::sources): which of the searched paths was a
// rule file, where a symlink led, which ELF file a library search found and
// which ones it did not, what /etc/ld.so.conf and its includes said. Each
// fact is one path, one way of looking at it, and what was seen, written by
// the same function that answers the compile's question: looking at every
// path the same way again and seeing the same answers means a compile now
// would read the same inputs and decide the same (compile_cache.h).
#include <cstdint>
#include <string>
#include <vector>

struct stat;

namespace bulwark::policy {

enum class Look : uint8_t {
    Type,     // what stat() says the path is: "regular", "directory", "other", "absent", "error: ..."
    Resolve,  // the path with every symlink resolved (realpath), or "error: ..."
    Inode,    // the file open() reaches: device, inode, mode, size, mtime, ctime; or "error: ..."
    Content,  // the bytes of a file of at most 16 MiB ("error: ..." when it cannot be read)
    Listing,  // the sorted names in a directory, or "error: ..."
};

const char* look_name(Look how);
bool look_from_name(const std::string& name, Look& how);

// What looking at `path` that way says now.
std::string look(Look how, const std::string& path);
// The Inode answer for a file already open (its fstat).
std::string inode_stamp(const struct stat& st);
// Whether the file's stamp can be trusted to change with its content: its
// last change is older than a few seconds (a file written again within the
// kernel's timestamp granularity keeps its stamp).
bool inode_settled(const struct stat& st);

struct InputFact {
    Look how;
    std::string path;
    std::string seen;
};

// The facts of one compile, in the order they were learnt. Only an inode
// whose last change is older than a few seconds is a settled fact: a file
// written again within the kernel's timestamp granularity keeps its stamp,
// so a compile that saw a fresh one is not reused (settled() is false).
class InputLog {
public:
    // Looks at the path, notes the answer and returns it.
    std::string look(Look how, const std::string& path);
    // Notes an answer the caller got itself (an inode it opened: inode_stamp).
    void note(Look how, const std::string& path, std::string seen);
    void note_inode(const std::string& path, const struct stat& st);

    const std::vector<InputFact>& facts() const { return facts_; }
    bool settled() const { return settled_; }

private:
    std::vector<InputFact> facts_;
    bool settled_ = true;
};

// Looks through `log` when there is one, else plainly.
std::string look_via(InputLog* log, Look how, const std::string& path);

// The first fact that no longer holds, as "<how> <path>: was <seen>, now
// <now>"; "" when all hold.
std::string first_changed(const std::vector<InputFact>& facts);

}  // namespace bulwark::policy
