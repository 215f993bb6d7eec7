#include "bulwark/policy/compile_inputs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace bulwark::policy {
namespace {

constexpr const char* kNames[] = {"type", "resolve", "inode", "content", "listing"};
// A file changed this recently may change again without its stamp changing.
constexpr int64_t kSettledAfterNs = 3'000'000'000;
constexpr size_t kMaxContentBytes = 16u << 20;

std::string error_of(int err) { return std::string("error: ") + std::strerror(err); }

int64_t ns_of(const struct timespec& t) { return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec; }

std::string type_of(const std::string& path) {
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0) return errno == ENOENT || errno == ENOTDIR ? "absent" : error_of(errno);
    if (S_ISREG(st.st_mode)) return "regular";
    if (S_ISDIR(st.st_mode)) return "directory";
    return "other";
}

std::string resolved(const std::string& path) {
    char real[PATH_MAX];
    if (!::realpath(path.c_str(), real)) return error_of(errno);
    return real;
}

// The file open() reaches (not following it into a FIFO's wait), as fstat
// sees it; an errno when it cannot be opened.
int open_stat(const std::string& path, struct stat& st) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return errno;
    int err = ::fstat(fd, &st) == 0 ? 0 : errno;
    ::close(fd);
    return err;
}

std::string inode_of(const std::string& path) {
    struct stat st{};
    int err = open_stat(path, st);
    return err ? error_of(err) : inode_stamp(st);
}

std::string content_of(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return error_of(errno);
    std::string text;
    char buf[16384];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int err = errno;
            ::close(fd);
            return error_of(err);
        }
        if (n == 0) break;
        if (text.size() + size_t(n) > kMaxContentBytes) {
            ::close(fd);
            return "error: larger than 16 MiB";
        }
        text.append(buf, size_t(n));
    }
    ::close(fd);
    return text;
}

std::string listing_of(const std::string& path) {
    DIR* dp = ::opendir(path.c_str());
    if (!dp) return error_of(errno);
    std::vector<std::string> names;
    while (auto* de = ::readdir(dp)) {
        std::string n = de->d_name;
        if (n != "." && n != "..") names.push_back(std::move(n));
    }
    ::closedir(dp);
    std::sort(names.begin(), names.end());
    std::string seen;
    for (const auto& n : names) seen += (seen.empty() ? "" : "/") + n;
    return seen;
}

}  // namespace

const char* look_name(Look how) { return kNames[static_cast<int>(how)]; }

bool look_from_name(const std::string& name, Look& how) {
    for (int i = 0; i < int(std::size(kNames)); ++i)
        if (name == kNames[i]) {
            how = static_cast<Look>(i);
            return true;
        }
    return false;
}

std::string inode_stamp(const struct stat& st) {
    return "dev " + std::to_string(st.st_dev) + " ino " + std::to_string(st.st_ino) + " mode " +
           std::to_string(st.st_mode) + " size " + std::to_string(st.st_size) + " mtime " +
           std::to_string(ns_of(st.st_mtim)) + " ctime " + std::to_string(ns_of(st.st_ctim));
}

std::string look(Look how, const std::string& path) {
    switch (how) {
        case Look::Type: return type_of(path);
        case Look::Resolve: return resolved(path);
        case Look::Inode: return inode_of(path);
        case Look::Content: return content_of(path);
        case Look::Listing: return listing_of(path);
    }
    return "error: unknown look";
}

std::string InputLog::look(Look how, const std::string& path) {
    if (how == Look::Inode) {
        struct stat st{};
        if (int err = open_stat(path, st)) {
            note(how, path, error_of(err));
        } else {
            note_inode(path, st);
        }
        return facts_.back().seen;
    }
    note(how, path, policy::look(how, path));
    return facts_.back().seen;
}

void InputLog::note(Look how, const std::string& path, std::string seen) {
    facts_.push_back({how, path, std::move(seen)});
}

bool inode_settled(const struct stat& st) {
    struct timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    return std::max(ns_of(st.st_mtim), ns_of(st.st_ctim)) <= ns_of(now) - kSettledAfterNs;
}

void InputLog::note_inode(const std::string& path, const struct stat& st) {
    if (!inode_settled(st)) settled_ = false;
    facts_.push_back({Look::Inode, path, inode_stamp(st)});
}

std::string look_via(InputLog* log, Look how, const std::string& path) {
    return log ? log->look(how, path) : look(how, path);
}

std::string first_changed(const std::vector<InputFact>& facts) {
    for (const auto& f : facts)
        if (std::string now = look(f.how, f.path); now != f.seen)
            return std::string(look_name(f.how)) + " " + f.path +
                   (f.how == Look::Content ? std::string(" changed") : ": was " + f.seen + ", now " + now);
    return "";
}

}  // namespace bulwark::policy
