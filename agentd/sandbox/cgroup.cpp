#include "sandbox/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string_view>
#include <sstream>
#include <thread>

#include "common/clock.h"

namespace bulwark {
namespace {

bool write_file(const std::string& path, const std::string& value) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t n = ::write(fd, value.data(), value.size());
    int saved = errno;
    ::close(fd);
    errno = saved;
    return n == static_cast<ssize_t>(value.size());
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// "key value" lines -> value of key (0 if absent).
uint64_t keyed(const std::string& text, const std::string& key) {
    std::istringstream in(text);
    std::string k;
    uint64_t v = 0;
    while (in >> k >> v)
        if (k == key) return v;
    return 0;
}

uint64_t number(const std::string& path) {
    std::string t = read_file(path);
    return t.empty() ? 0 : std::strtoull(t.c_str(), nullptr, 10);
}

std::expected<std::string, SysError> make_leaf(const std::string& controller,
                                               const std::string& name) {
    std::string mnt = cgroup_mount(controller);
    std::string own = own_cgroup(controller);
    if (mnt.empty() || own.empty())
        return std::unexpected(SysError{"cgroup " + (controller.empty() ? "v2" : controller) +
                                            ": hierarchy not mounted",
                                        ENOENT});
    std::string dir = mnt + (own == "/" ? "" : own) + "/" + name;
    if (::mkdir(dir.c_str(), 0755) != 0) return std::unexpected(SysError::last("mkdir(" + dir + ")"));
    return dir;
}

// 0 once the directory is gone, else rmdir's errno.
int rmdir_errno(const std::string& dir) { return ::rmdir(dir.c_str()) == 0 || errno == ENOENT ? 0 : errno; }

// Why a cgroup directory rmdir refused with `err` stays: its child cgroups
// and processes when busy.
std::string why_kept(const std::string& dir, int err);

// "" once gone; else why it stays (after up to 1 s of EBUSY retries).
std::string rmdir_retry(const std::string& dir) {
    if (dir.empty()) return "";
    int err = 0;
    for (int i = 0; i < 200; ++i) {
        err = rmdir_errno(dir);
        if (err != EBUSY) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return err ? why_kept(dir, err) : "";
}

}  // namespace

std::vector<StaleLeaf> reap_stale_leaves(const std::string& v2_extra) {
    std::vector<StaleLeaf> out;
    for (const char* ctrl : {"", "memory", "pids", "cpu", "cpuacct", "+"}) {
        std::string dir;
        if (std::string_view(ctrl) == "+") {
            if (v2_extra.empty()) continue;
            dir = v2_extra;
            ctrl = "";
        } else {
            std::string mnt = cgroup_mount(ctrl), own = own_cgroup(ctrl);
            if (mnt.empty() || own.empty()) continue;
            dir = mnt + (own == "/" ? "" : own);
        }
        DIR* d = ::opendir(dir.c_str());
        if (!d) continue;
        std::vector<StaleLeaf> stale;
        while (auto* e = ::readdir(d)) {
            std::string n = e->d_name;
            const std::string prefix = kRunCgroupPrefix;
            if (!n.starts_with(prefix)) continue;
            char* end = nullptr;
            long pid = std::strtol(n.c_str() + prefix.size(), &end, 10);
            if (pid <= 0 || pid == ::getpid()) continue;
            if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
            StaleLeaf l;
            l.path = dir + "/" + n;
            l.daemon_pid = pid;
            // <pid>-<n>[-<label>]
            if (end && *end == '-')
                if (const char* lab = std::strchr(end + 1, '-')) l.label = lab + 1;
            stale.push_back(std::move(l));
        }
        ::closedir(d);
        for (auto& leaf : stale) {
            if (ctrl[0] == '\0') {
                std::istringstream procs(read_file(leaf.path + "/cgroup.procs"));
                std::string pid;
                while (procs >> pid) ++leaf.processes;
                write_file(leaf.path + "/cgroup.kill", "1");
                for (int i = 0; i < 1000 && keyed(read_file(leaf.path + "/cgroup.events"), "populated") != 0; ++i)
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
            leaf.error = rmdir_retry(leaf.path);
            leaf.removed = leaf.error.empty();
            out.push_back(std::move(leaf));
        }
    }
    return out;
}

size_t reap_stale_cgroups(const std::string& v2_extra) {
    size_t removed = 0;
    for (const auto& l : reap_stale_leaves(v2_extra)) removed += l.removed;
    return removed;
}

SandboxCgroup& SandboxCgroup::operator=(SandboxCgroup&& o) noexcept {
    if (this != &o) {
        remove();
        v2_path_ = std::move(o.v2_path_);
        v2_fd_ = std::move(o.v2_fd_);
        mem_ = std::move(o.mem_);
        pids_ = std::move(o.pids_);
        cpu_ = std::move(o.cpu_);
        cpuacct_ = std::move(o.cpuacct_);
        o.v2_path_.clear();
    }
    return *this;
}

SandboxCgroup::~SandboxCgroup() { remove(); }

std::expected<SandboxCgroup, SysError> SandboxCgroup::create(const std::string& name,
                                                             const CgroupLimits& limits,
                                                             const std::string& v2_parent) {
    SandboxCgroup cg;
    if (v2_parent.empty()) {
        auto v2 = make_leaf("", name);
        if (!v2) return std::unexpected(v2.error());
        cg.v2_path_ = *v2;
    } else {
        std::string mnt = cgroup_mount(""), own = own_cgroup("");
        std::string base = mnt + (own == "/" ? "" : own);
        if (mnt.empty() || own.empty() || !v2_parent.starts_with(base + "/") ||
            v2_parent.find("/..") != std::string::npos)
            return std::unexpected(SysError{"cgroup v2 parent " + v2_parent + " is not below " + base, EINVAL});
        std::string dir = v2_parent + "/" + name;
        if (::mkdir(dir.c_str(), 0755) != 0) return std::unexpected(SysError::last("mkdir(" + dir + ")"));
        cg.v2_path_ = dir;
    }
    int fd = ::open(cg.v2_path_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return std::unexpected(SysError::last("open(" + cg.v2_path_ + ", O_PATH)"));
    cg.v2_fd_.reset(fd);

    // Pure cgroup v2: the leaf's own controllers, enabled from its parent.
    if (cgroup_mount("memory").empty()) {
        std::string parent = cg.v2_path_.substr(0, cg.v2_path_.rfind('/'));
        (void)write_file(parent + "/cgroup.subtree_control", "+memory +pids +cpu");
        std::string have = read_file(cg.v2_path_ + "/cgroup.controllers");
        auto needs = [&](const char* c) {
            if (have.find(c) != std::string::npos) return std::expected<void, SysError>();
            return std::expected<void, SysError>(std::unexpected(SysError{
                std::string("cgroup v2 leaf ") + cg.v2_path_ + ": controller " + c + " not enabled (no v1 hierarchy either)",
                ENOENT}));
        };
        auto put = [&](const std::string& file, const std::string& v) -> std::expected<void, SysError> {
            if (!write_file(cg.v2_path_ + "/" + file, v))
                return std::unexpected(SysError::last("write(" + cg.v2_path_ + "/" + file + ", " + v + ")"));
            return {};
        };
        cg.v2_controllers_ = true;
        if (limits.memory_bytes) {
            if (auto r = needs("memory"); !r) return std::unexpected(r.error());
            std::string v = std::to_string(*limits.memory_bytes);
            if (auto r = put("memory.max", v); !r) return std::unexpected(r.error());
            (void)write_file(cg.v2_path_ + "/memory.swap.max", "0");  // no escape to swap
        }
        if (limits.pids) {
            if (auto r = needs("pids"); !r) return std::unexpected(r.error());
            if (auto r = put("pids.max", std::to_string(*limits.pids)); !r) return std::unexpected(r.error());
        }
        if (limits.cpu_percent) {
            if (auto r = needs("cpu"); !r) return std::unexpected(r.error());
            if (auto r = put("cpu.max", std::to_string(uint64_t{*limits.cpu_percent} * 1000) + " 100000"); !r)
                return std::unexpected(r.error());
        }
        return cg;
    }
    // Memory: always created (peak usage and OOM detection), limited if asked.
    if (auto m = make_leaf("memory", name)) {
        cg.mem_ = *m;
        // Never let an earlier OOM elsewhere disable the killer here.
        write_file(cg.mem_ + "/memory.oom_control", "0");
        if (limits.memory_bytes) {
            std::string v = std::to_string(*limits.memory_bytes);
            if (!write_file(cg.mem_ + "/memory.limit_in_bytes", v))
                return std::unexpected(SysError::last("write(" + cg.mem_ + "/memory.limit_in_bytes, " + v + ")"));
            // With swap accounting, memory+swap gets the same limit: no escape to swap.
            if (::access((cg.mem_ + "/memory.memsw.limit_in_bytes").c_str(), F_OK) == 0 &&
                !write_file(cg.mem_ + "/memory.memsw.limit_in_bytes", v))
                return std::unexpected(SysError::last("write(" + cg.mem_ + "/memory.memsw.limit_in_bytes, " + v + ")"));
        }
    } else if (limits.memory_bytes) {
        return std::unexpected(m.error());
    }
    if (limits.pids) {
        auto p = make_leaf("pids", name);
        if (!p) return std::unexpected(p.error());
        cg.pids_ = *p;
        std::string v = std::to_string(*limits.pids);
        if (!write_file(cg.pids_ + "/pids.max", v))
            return std::unexpected(SysError::last("write(" + cg.pids_ + "/pids.max, " + v + ")"));
    }
    if (limits.cpu_percent) {
        auto c = make_leaf("cpu", name);
        if (!c) return std::unexpected(c.error());
        cg.cpu_ = *c;
        std::string quota = std::to_string(uint64_t{*limits.cpu_percent} * 1000);
        if (!write_file(cg.cpu_ + "/cpu.cfs_period_us", "100000") ||
            !write_file(cg.cpu_ + "/cpu.cfs_quota_us", quota))
            return std::unexpected(SysError::last("write(" + cg.cpu_ + "/cpu.cfs_quota_us, " + quota + ")"));
    }
    // CPU time comes from the v2 leaf's cpu.stat (core accounting, no
    // controller needed): no cpuacct leaf, one v1 attach fewer per spawn
    // (each attach waits for an RCU grace period on the global threadgroup lock).
    return cg;
}

std::vector<std::string> SandboxCgroup::v1_paths() const {
    std::vector<std::string> v;
    for (const auto* p : {&mem_, &pids_, &cpu_, &cpuacct_})
        if (!p->empty()) v.push_back(*p);
    return v;
}

std::expected<void, SysError> SandboxCgroup::add_v1(pid_t pid) const {
    std::string v = std::to_string(pid);
    for (const auto& dir : v1_paths())
        if (!write_file(dir + "/cgroup.procs", v))
            return std::unexpected(SysError::last("write(" + dir + "/cgroup.procs, " + v + ")"));
    return {};
}

bool SandboxCgroup::kill_all() const {
    return !v2_path_.empty() && write_file(v2_path_ + "/cgroup.kill", "1");
}

size_t SandboxCgroup::population() const {
    if (v2_path_.empty()) return 0;
    std::istringstream in(read_file(v2_path_ + "/cgroup.procs"));
    size_t n = 0;
    std::string l;
    while (std::getline(in, l))
        if (!l.empty()) ++n;
    return n;
}

bool SandboxCgroup::wait_empty(int timeout_ms) const {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (true) {
        if (v2_path_.empty() || keyed(read_file(v2_path_ + "/cgroup.events"), "populated") == 0)
            return true;
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
}

uint64_t SandboxCgroup::oom_kills() const {
    if (v2_controllers_) return keyed(read_file(v2_path_ + "/memory.events"), "oom_kill");
    return mem_.empty() ? 0 : keyed(read_file(mem_ + "/memory.oom_control"), "oom_kill");
}

uint64_t SandboxCgroup::peak_memory() const {
    if (v2_controllers_) return number(v2_path_ + "/memory.peak");
    return mem_.empty() ? 0 : number(mem_ + "/memory.max_usage_in_bytes");
}

uint64_t SandboxCgroup::pids_max_hits() const {
    if (v2_controllers_) return keyed(read_file(v2_path_ + "/pids.events"), "max");
    return pids_.empty() ? 0 : keyed(read_file(pids_ + "/pids.events"), "max");
}

bool SandboxCgroup::cpu_usage(uint64_t& user_us, uint64_t& system_us) const {
    if (!v2_path_.empty()) {
        std::string st = read_file(v2_path_ + "/cpu.stat");
        if (st.find("user_usec") != std::string::npos) {
            user_us = keyed(st, "user_usec");
            system_us = keyed(st, "system_usec");
            return true;
        }
    }
    if (cpuacct_.empty()) return false;
    user_us = number(cpuacct_ + "/cpuacct.usage_user") / 1000;
    system_us = number(cpuacct_ + "/cpuacct.usage_sys") / 1000;
    return true;
}

std::vector<CgroupLeft> SandboxCgroup::remove() {
    std::vector<CgroupLeft> left;
    if (!v2_path_.empty()) {
        if (!wait_empty(0)) {
            kill_all();
            wait_empty(5000);
        }
        v2_fd_.reset();
        if (auto why = rmdir_retry(v2_path_); !why.empty()) left.push_back({v2_path_, why});
        v2_path_.clear();
    }
    for (auto* p : {&mem_, &pids_, &cpu_, &cpuacct_}) {
        if (auto why = rmdir_retry(*p); !why.empty()) left.push_back({*p, why});
        p->clear();
    }
    return left;
}

std::string try_remove_cgroup(const std::string& dir) {
    int err = rmdir_errno(dir);
    return err ? why_kept(dir, err) : "";
}

namespace {

std::string why_kept(const std::string& dir, int e) {
    std::string why = SysError{"rmdir", e}.message();
    if (e != EBUSY && e != ENOTEMPTY) return why;
    std::vector<std::string> children;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (auto* ent = ::readdir(d))
            if (ent->d_type == DT_DIR && std::strcmp(ent->d_name, ".") != 0 && std::strcmp(ent->d_name, "..") != 0)
                children.push_back(ent->d_name);
        ::closedir(d);
    }
    size_t procs = 0;
    {
        std::istringstream in(read_file(dir + "/cgroup.procs"));
        std::string pid;
        while (in >> pid) ++procs;
    }
    std::string what;
    if (!children.empty()) {
        what = "child cgroups made in it: ";
        for (size_t i = 0; i < children.size(); ++i) what += (i ? ", " : "") + children[i];
    }
    if (procs) what += (what.empty() ? "" : "; ") + std::to_string(procs) + " process(es) in it";
    return what.empty() ? why : why + " (" + what + ")";
}

}  // namespace

LeftCgroups::LeftCgroups() : thread_([this] { loop(); }) {}

LeftCgroups::~LeftCgroups() {
    {
        std::lock_guard lk(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void LeftCgroups::add(const std::vector<CgroupLeft>& left, uint64_t run_id) {
    if (left.empty()) return;
    int64_t now = unix_now_ns();
    std::lock_guard lk(mu_);
    for (const auto& l : left) entries_.push_back({l.path, l.error, run_id, now, 1});
    cv_.notify_all();
}

std::vector<LeftCgroups::Entry> LeftCgroups::list() const {
    std::lock_guard lk(mu_);
    return entries_;
}

uint64_t LeftCgroups::removed_later() const {
    std::lock_guard lk(mu_);
    return removed_;
}

void LeftCgroups::loop() {
    std::unique_lock lk(mu_);
    for (;;) {
        cv_.wait(lk, [&] { return stop_ || !entries_.empty(); });
        if (stop_) return;
        if (cv_.wait_for(lk, std::chrono::seconds(1), [&] { return stop_; })) return;
        std::vector<std::string> paths;
        for (const auto& e : entries_) paths.push_back(e.path);
        lk.unlock();
        std::vector<std::string> why;
        for (const auto& p : paths) why.push_back(try_remove_cgroup(p));
        lk.lock();
        for (size_t i = 0; i < paths.size(); ++i) {
            auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.path == paths[i]; });
            if (it == entries_.end()) continue;
            if (why[i].empty()) {
                spdlog::info("cgroup {} (left by run {}) removed after {} attempt(s)", it->path, it->run_id,
                             it->attempts + 1);
                entries_.erase(it);
                ++removed_;
            } else {
                it->error = why[i];
                ++it->attempts;
            }
        }
    }
}

}  // namespace bulwark
