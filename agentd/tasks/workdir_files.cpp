#include "tasks/workdir_files.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "common/fd.h"

namespace bulwark {

using nlohmann::json;

namespace {

constexpr uint64_t kResolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;

int openat2_beneath(int dirfd, const std::string& name, uint64_t flags, uint64_t mode) {
    open_how how{};
    how.flags = flags;
    how.mode = mode;
    how.resolve = kResolve;
    long r;
    do r = ::syscall(SYS_openat2, dirfd, name.c_str(), &how, sizeof how);
    while (r < 0 && errno == EINTR);
    return static_cast<int>(r);
}

std::string why(const char* call, int e) {
    std::string s = std::string(call) + ": " + std::strerror(e);
    if (e == ELOOP) s += " (a symbolic link is in the way; links are not followed)";
    if (e == EXDEV) s += " (the path leaves the work directory)";
    return s;
}

std::vector<std::string> components(std::string_view p) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i <= p.size()) {
        size_t j = p.find('/', i);
        if (j == std::string_view::npos) j = p.size();
        out.emplace_back(p.substr(i, j - i));
        i = j + 1;
    }
    return out;
}

}  // namespace

std::expected<std::vector<WorkdirFile>, std::string> parse_workdir_files(const json& files,
                                                                         const WorkdirFileLimits& limits) {
    if (!files.is_object()) return std::unexpected("files: must be an object {relative_path: content}");
    if (files.size() > limits.max_files)
        return std::unexpected("files: at most " + std::to_string(limits.max_files) + " files");
    std::vector<WorkdirFile> out;
    size_t total = 0;
    for (auto it = files.begin(); it != files.end(); ++it) {
        const std::string& p = it.key();
        auto bad = [&](const std::string& m) { return std::unexpected("files." + p + ": " + m); };
        if (p.empty()) return bad("the path is empty");
        if (p.size() > limits.max_path_bytes)
            return bad("the path is longer than " + std::to_string(limits.max_path_bytes) + " bytes");
        if (p.find('\0') != std::string::npos) return bad("the path contains NUL");
        if (p.front() == '/') return bad("must be a path relative to the work directory, not absolute");
        auto comps = components(p);
        if (comps.size() > limits.max_depth)
            return bad("more than " + std::to_string(limits.max_depth) + " path components");
        for (const auto& c : comps) {
            if (c.empty()) return bad("empty path component (`//` or a trailing `/`)");
            if (c == "..") return bad("`..` is not allowed");
            if (c == ".") return bad("`.` components are not allowed");
            if (c.size() > 255) return bad("a path component is longer than 255 bytes");
        }
        if (!it.value().is_string()) return bad("the content must be a string");
        const auto& content = it.value().get_ref<const std::string&>();
        if (content.size() > limits.max_file_bytes)
            return bad("larger than " + std::to_string(limits.max_file_bytes) + " bytes");
        total += content.size();
        if (total > limits.max_total_bytes)
            return std::unexpected("files: more than " + std::to_string(limits.max_total_bytes) + " bytes in all");
        out.push_back({p, content});
    }
    return out;
}

std::expected<json, std::string> write_workdir_files(const std::string& workdir, const std::vector<WorkdirFile>& files) {
    json written = json::array();
    if (files.empty()) return written;
    Fd root(::open(workdir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!root) return std::unexpected("files: open of the work directory " + workdir + ": " + std::strerror(errno));
    struct stat rst{};
    if (::fstat(root.get(), &rst) != 0) return std::unexpected("files: fstat of the work directory: " + std::string(std::strerror(errno)));

    for (const auto& f : files) {
        auto fail = [&](const std::string& m) { return std::unexpected("files." + f.path + ": " + m); };
        auto comps = components(f.path);
        // Parents: created one component at a time below the work directory;
        // each is reopened beneath the previous one, so a symlink planted in
        // place of a directory stops the walk (ELOOP) instead of being followed.
        Fd dir(::fcntl(root.get(), F_DUPFD_CLOEXEC, 0));
        if (!dir) return fail(why("dup", errno));
        for (size_t i = 0; i + 1 < comps.size(); ++i) {
            bool created = ::mkdirat(dir.get(), comps[i].c_str(), 0755) == 0;
            if (!created && errno != EEXIST) return fail(why("mkdirat", errno));
            int next = openat2_beneath(dir.get(), comps[i], O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
            if (next < 0) return fail(why("openat2", errno));
            dir.reset(next);
            // Ownership through the descriptor: whatever a running tool may
            // have swapped in by that name meanwhile, only this directory
            // changes hands.
            if (created && ::fchownat(dir.get(), "", rst.st_uid, rst.st_gid, AT_EMPTY_PATH) != 0)
                return fail(why("fchownat", errno));
        }
        // The file itself: never truncated by open (an existing object is
        // checked first); O_NONBLOCK so a FIFO fails (ENXIO) instead of
        // blocking the daemon.
        Fd fd(openat2_beneath(dir.get(), comps.back(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644));
        if (!fd) return fail(why("openat2", errno));
        struct stat st{};
        if (::fstat(fd.get(), &st) != 0) return fail(why("fstat", errno));
        if (!S_ISREG(st.st_mode)) return fail("exists and is not a regular file");
        if (st.st_nlink != 1) return fail("exists with " + std::to_string(st.st_nlink) + " hard links; refusing to write through them");
        if (::ftruncate(fd.get(), 0) != 0) return fail(why("ftruncate", errno));
        if (::fchown(fd.get(), rst.st_uid, rst.st_gid) != 0) return fail(why("fchown", errno));
        if (::fchmod(fd.get(), 0644) != 0) return fail(why("fchmod", errno));
        size_t off = 0;
        while (off < f.content.size()) {
            ssize_t n = ::write(fd.get(), f.content.data() + off, f.content.size() - off);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return fail(why("write", n < 0 ? errno : EIO));
            off += size_t(n);
        }
        written.push_back({{"path", f.path}, {"bytes", f.content.size()}});
    }
    return written;
}

}  // namespace bulwark
