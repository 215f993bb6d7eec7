#include "bulwark/policy/private_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace bulwark::policy {
namespace {

// All `len` bytes at `p` through read(2) or write(2), EINTR retried: how
// many went before an error or the end of the file.
template <class Byte, class Io>
size_t whole(int fd, Byte* p, size_t len, Io io) {
    size_t done = 0;
    while (done < len) {
        ssize_t n = io(fd, p + done, len - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += size_t(n);
    }
    return done;
}

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

std::string untrusted(const struct stat& st, bool want_dir) {
    if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
        return want_dir ? "not a directory" : "not a regular file";
    if (st.st_uid != ::geteuid()) return "owned by uid " + std::to_string(st.st_uid) + ", not " + std::to_string(::geteuid());
    if (st.st_mode & (S_IWGRP | S_IWOTH)) return "writable by group or others";
    return "";
}

std::string make_private_dir(const std::string& dir) {
    for (size_t end = dir.find('/', 1);; end = dir.find('/', end + 1)) {
        std::string upto = dir.substr(0, end);
        if (::mkdir(upto.c_str(), end == std::string::npos ? 0700 : 0755) != 0 && errno != EEXIST)
            return "cannot make " + upto + ": " + errno_text(errno);
        if (end == std::string::npos) break;
    }
    struct stat st{};
    if (::lstat(dir.c_str(), &st) != 0) return dir + ": " + errno_text(errno);
    if (auto bad = untrusted(st, true); !bad.empty()) return dir + " is " + bad;
    return "";
}

std::expected<std::string, PrivateReadError> read_private_file(const std::string& file, size_t max_bytes) {
    using Kind = PrivateReadError::Kind;
    int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return std::unexpected(PrivateReadError{errno == ENOENT ? Kind::Absent : Kind::Io, errno_text(errno)});
    struct stat st{};
    auto fail = [fd](Kind kind, std::string why) {
        ::close(fd);
        return std::unexpected(PrivateReadError{kind, std::move(why)});
    };
    if (::fstat(fd, &st) != 0) return fail(Kind::Io, errno_text(errno));
    if (auto bad = untrusted(st, false); !bad.empty()) return fail(Kind::Untrusted, bad);
    if (size_t(st.st_size) > max_bytes) return fail(Kind::TooLarge, "");
    std::string text(size_t(st.st_size), '\0');
    const size_t got = whole(fd, text.data(), text.size(), ::read);
    ::close(fd);
    if (got != text.size()) return std::unexpected(PrivateReadError{Kind::Io, "short read"});
    return text;
}

std::string write_private_file(const std::string& file, std::string_view text) {
    std::string tmp = file + ".tmp." + std::to_string(::getpid());
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return "cannot write " + tmp + ": " + errno_text(errno);
    bool ok = whole(fd, text.data(), text.size(), ::write) == text.size();
    ok = ::close(fd) == 0 && ok;
    if (!ok || ::rename(tmp.c_str(), file.c_str()) != 0) {
        std::string why = "cannot write " + file + ": " + errno_text(errno);
        ::unlink(tmp.c_str());
        return why;
    }
    return "";
}

}  // namespace bulwark::policy
