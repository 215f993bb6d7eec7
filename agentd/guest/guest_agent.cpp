// bulwark-guest: /init of the microVM guest (docs/microvm.md). Static, built
// from agentd's own sandbox, BPF and kernel audit code: inside the guest the
// tool runs under the same run_tool as on the host, with the guest kernel's
// layers (BPF LSM included) proven by the same canaries.
//
// Steps, in order: mount the kernel filesystems; load the image's modules;
// leave the initramfs (a tmpfs root, so that run_tool's pivot_root works);
// open the channel port (virtio-serial "bulwark.ctl"); Hello; wait for Start
// and the tool's stdin; mount the host's view (9p "root", read-only) and the
// work directory (9p "work"); start the BPF runtime and the kernel audit
// reader; run the tool, streaming its output and decisions; Exit; wait for
// the host's Ack; power off. A step that fails ends in an Exit whose report
// says which step and why, then power off: the guest never lingers.
#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <poll.h>
#include <linux/random.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <ctime>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "audit/audit_record.h"
#include "bpf/bpf_runtime.h"
#include "bulwark/policy/compiler.h"
#include "common/sys_error.h"
#include "kaudit/kernel_audit.h"
#include "kaudit/run_registry.h"
#include "sandbox/landlock.h"
#include "sandbox/ns_net.h"
#include "sandbox/run_report.h"
#include "sandbox/seccomp_install.h"
#include "sandbox/spawner.h"
#include "tasks/run_binding.h"
#include "vm/channel.h"

namespace bulwark::guest {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct StepError {
    std::string step, why;
};

std::string errno_text(const std::string& call, const std::string& what) {
    return call + "(" + what + "): " + std::strerror(errno);
}

std::string read_file(const std::string& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string s = ss.str();
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

void console(const std::string& line) {
    std::fprintf(stderr, "bulwark-guest: %s\n", line.c_str());
    std::fflush(stderr);
}

// 1. The kernel's filesystems.
std::optional<StepError> mount_kernel_filesystems() {
    struct M { const char *src, *dir, *type; unsigned long flags; const char* data; };
    const M ms[] = {
        {"proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr},
        {"sys", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr},
        {"dev", "/dev", "devtmpfs", MS_NOSUID, "mode=0755"},
        {"tmp", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777"},
        {"run", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755"},
    };
    for (const auto& m : ms) {
        ::mkdir(m.dir, 0755);
        if (::mount(m.src, m.dir, m.type, m.flags, m.data) != 0 && errno != EBUSY)
            return StepError{"mount", errno_text("mount", m.dir)};
    }
    return std::nullopt;
}

// 2. The image's modules (9p and its transport), in /lib/modules/load-order.
std::optional<StepError> load_modules() {
    std::ifstream order("/lib/modules/load-order");
    std::string name;
    while (std::getline(order, name)) {
        if (name.empty()) continue;
        std::string path = "/lib/modules/" + name + ".ko";
        int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return StepError{"modules", errno_text("open", path)};
        long rc = ::syscall(SYS_finit_module, fd, "", 0);
        int err = errno;
        ::close(fd);
        if (rc != 0 && err != EEXIST) {
            errno = err;
            return StepError{"modules", errno_text("finit_module", path)};
        }
    }
    return std::nullopt;
}

// 3. Out of the initramfs: rootfs cannot be pivot_root'ed away, so the
// agent moves to a tmpfs root (with the kernel filesystems) and chroots.
std::optional<StepError> leave_initramfs() {
    const char* nr = "/sysroot";
    ::mkdir(nr, 0755);
    if (::mount("root", nr, "tmpfs", MS_NOSUID, "mode=0755") != 0) return StepError{"root", errno_text("mount", nr)};
    for (const char* d : {"proc", "sys", "dev", "tmp", "run", ".host"}) {
        std::string p = std::string(nr) + "/" + d;
        ::mkdir(p.c_str(), 0755);
    }
    for (const char* d : {"/proc", "/sys", "/dev", "/tmp", "/run"}) {
        std::string to = std::string(nr) + d;
        if (::mount(d, to.c_str(), nullptr, MS_MOVE, nullptr) != 0) return StepError{"root", errno_text("move", d)};
    }
    if (::chdir(nr) != 0) return StepError{"root", errno_text("chdir", nr)};
    if (::mount(".", "/", nullptr, MS_MOVE, nullptr) != 0) return StepError{"root", errno_text("move", "/")};
    if (::chroot(".") != 0 || ::chdir("/") != 0) return StepError{"root", errno_text("chroot", ".")};
    struct M { const char *src, *dir, *type; };
    for (const M& m : {M{"securityfs", "/sys/kernel/security", "securityfs"}, M{"bpf", "/sys/fs/bpf", "bpf"},
                       M{"cgroup2", "/sys/fs/cgroup", "cgroup2"}}) {
        if (::mount(m.src, m.dir, m.type, MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0 && errno != EBUSY)
            return StepError{"root", errno_text("mount", m.dir)};
    }
    // Pure cgroup v2: the runs' leaves take memory, pids and cpu from here down.
    std::ofstream("/sys/fs/cgroup/cgroup.subtree_control") << "+memory +pids +cpu";
    return std::nullopt;
}

// 4. The channel: the virtio-serial port the host named bulwark.ctl.
std::expected<int, StepError> open_channel() {
    for (int i = 0; i < 500; ++i) {
        std::error_code ec;
        for (const auto& e : fs::directory_iterator("/sys/class/virtio-ports", ec)) {
            if (read_file((e.path() / "name").string()) != "bulwark.ctl") continue;
            std::string dev = "/dev/" + e.path().filename().string();
            int fd = ::open(dev.c_str(), O_RDWR | O_CLOEXEC);
            if (fd >= 0) return fd;
        }
        ::usleep(10000);
    }
    return std::unexpected(StepError{"channel", "no virtio-serial port named bulwark.ctl after 5 s"});
}

// Frames from the host, read by a thread of their own: Cancel acts at once
// (the run's cancel eventfd); the rest queue for the main thread.
class Channel {
public:
    explicit Channel(int fd) : fd_(fd), cancel_(::eventfd(0, EFD_CLOEXEC)) {
        reader_ = std::thread([this] { read_loop(); });
    }
    ~Channel() { reader_.detach(); }

    bool send(vm::FrameType t, std::string_view payload) {
        std::lock_guard lk(write_mu_);
        return vm::write_all(fd_, vm::encode(t, payload));
    }
    // The next frame other than Cancel, or why there is none.
    std::expected<vm::Frame, std::string> next(int timeout_ms) {
        std::unique_lock lk(mu_);
        if (!cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return !q_.empty() || !error_.empty(); }))
            return std::unexpected(std::string("timed out"));
        if (!q_.empty()) {
            auto f = std::move(q_.front());
            q_.pop_front();
            return f;
        }
        return std::unexpected(error_);
    }
    int cancel_fd() const { return cancel_; }
    bool cancelled() const { return cancelled_; }
    // Policy frames are answered by the reader at once (the tool runs on
    // the main thread): by the handler of the run in progress, else "no run".
    using PolicyHandler = std::function<json(const json&)>;
    void on_policy(PolicyHandler h) {
        std::lock_guard lk(policy_mu_);
        policy_ = std::move(h);
    }

private:
    void read_loop() {
        vm::FrameReader reader(vm::from_host);
        char buf[65536];
        for (;;) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, -1) < 0 && errno != EINTR) return fail(errno_text("poll", "channel"));
            ssize_t n = ::read(fd_, buf, sizeof buf);
            if (n < 0) {
                if (errno == EINTR || errno == EAGAIN) continue;
                return fail(errno_text("read", "channel"));
            }
            if (n == 0) {  // the host end is not open (yet, or any more)
                ::usleep(20000);
                continue;
            }
            reader.feed(std::string_view(buf, size_t(n)));
            for (;;) {
                auto f = reader.next();
                if (!f) return fail("from the host: " + f.error());
                if (!*f) break;
                if ((*f)->type == vm::FrameType::Policy) {
                    answer_policy((*f)->payload);
                    continue;
                }
                if ((*f)->type == vm::FrameType::Cancel) {
                    cancelled_ = true;
                    uint64_t one = 1;
                    (void)!::write(cancel_, &one, sizeof one);
                }
                std::lock_guard lk(mu_);
                q_.push_back(std::move(**f));
                cv_.notify_all();
            }
        }
    }
    void answer_policy(const std::string& payload) {
        auto doc = json::parse(payload, nullptr, false);
        json ans = {{"policy_version", doc.is_object() ? doc.value("policy_version", uint64_t(0)) : 0},
                    {"applied", false}};
        {
            std::lock_guard lk(policy_mu_);
            if (!doc.is_object()) ans["detail"] = "the policy frame is not a JSON object";
            else if (!policy_) ans["detail"] = "no run in progress in the guest";
            else ans = policy_(doc);
        }
        send(vm::FrameType::PolicyApplied, ans.dump());
    }
    void fail(std::string why) {
        std::lock_guard lk(mu_);
        error_ = std::move(why);
        cv_.notify_all();
    }

    int fd_;
    int cancel_;
    std::atomic<bool> cancelled_{false};
    std::mutex write_mu_, mu_, policy_mu_;
    PolicyHandler policy_;
    std::condition_variable cv_;
    std::deque<vm::Frame> q_;
    std::string error_;
    std::thread reader_;
};

// 3b. The network device, where the host gave one (a tool with network
// rules): qemu's user-mode network, the guest at 10.0.2.15/24, the host's
// side at 10.0.2.2, which routes out. Before Hello, so it is in the snapshot.
std::string configure_network() {
    if (::access("/sys/class/net/eth0", F_OK) != 0) return "none";
    int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return errno_text("socket", "AF_INET");
    auto addr = [](const char* a) {
        sockaddr_in in{};
        in.sin_family = AF_INET;
        ::inet_pton(AF_INET, a, &in.sin_addr);
        sockaddr out{};
        std::memcpy(&out, &in, sizeof in);
        return out;
    };
    auto up = [&](const char* dev) {
        ifreq r{};
        std::strncpy(r.ifr_name, dev, IFNAMSIZ - 1);
        if (::ioctl(s, SIOCGIFFLAGS, &r) != 0) return false;
        r.ifr_flags |= IFF_UP | IFF_RUNNING;
        return ::ioctl(s, SIOCSIFFLAGS, &r) == 0;
    };
    std::string why;
    ifreq r{};
    std::strncpy(r.ifr_name, "eth0", IFNAMSIZ - 1);
    r.ifr_addr = addr("10.0.2.15");
    if (::ioctl(s, SIOCSIFADDR, &r) != 0) why = errno_text("SIOCSIFADDR", "eth0");
    r.ifr_netmask = addr("255.255.255.0");
    if (why.empty() && ::ioctl(s, SIOCSIFNETMASK, &r) != 0) why = errno_text("SIOCSIFNETMASK", "eth0");
    if (why.empty() && !(up("lo") && up("eth0"))) why = errno_text("SIOCSIFFLAGS", "lo, eth0");
    rtentry rt{};
    rt.rt_dst = addr("0.0.0.0");
    rt.rt_genmask = addr("0.0.0.0");
    rt.rt_gateway = addr("10.0.2.2");
    rt.rt_flags = RTF_UP | RTF_GATEWAY;
    if (why.empty() && ::ioctl(s, SIOCADDRT, &rt) != 0 && errno != EEXIST) why = errno_text("SIOCADDRT", "default via 10.0.2.2");
    ::close(s);
    return why.empty() ? "eth0 10.0.2.15/24, default via 10.0.2.2 (the VMM's user-mode network)" : why;
}

json guest_facts(const std::string& network) {
    utsname u{};
    ::uname(&u);
    return {{"kernel", u.release},
            {"lsm", read_file("/sys/kernel/security/lsm")},
            {"landlock_abi", landlock_abi()},
            {"network", network},
            {"agent", "bulwark-guest"}};
}

// The job the host sent: Start, then the tool's stdin up to StdinEof.
struct Job {
    json start;
    std::string stdin_data;
    bool has_stdin = false;
    double parse_ms = 0;  // the Start frame's JSON
};

std::expected<Job, StepError> await_job(Channel& ch) {
    Job job;
    bool started = false;
    for (;;) {
        auto f = ch.next(600000);
        if (!f) return std::unexpected(StepError{"start", "no job from the host: " + f.error()});
        switch (f->type) {
            case vm::FrameType::Start:
                if (started) return std::unexpected(StepError{"start", "a second start frame"});
                {
                    auto t = std::chrono::steady_clock::now();
                    job.start = json::parse(f->payload, nullptr, false);
                    job.parse_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
                }
                if (job.start.is_discarded() || !job.start.is_object())
                    return std::unexpected(StepError{"start", "the start frame is not a JSON object"});
                started = true;
                break;
            case vm::FrameType::Stdin:
                job.stdin_data += f->payload;
                job.has_stdin = true;
                break;
            case vm::FrameType::StdinEof:
                if (!started) return std::unexpected(StepError{"start", "end of stdin before the start frame"});
                return job;
            case vm::FrameType::Cancel: return std::unexpected(StepError{"start", "cancelled by the host"});
            default: break;
        }
    }
}

// 5. The host's view of the tool's files (9p "root", read-only: what the
// VMM's own sandbox shows it) at the same paths, and the work directory.
std::optional<StepError> mount_shares(const json& start) {
    // cache=loose: one inode per file for the run's life (without a cache
    // 9p makes a new inode at every lookup, and Landlock's rules, which hold
    // on to inodes, would match none of them); the agent syncs before Exit.
    const std::string opts = "trans=virtio,version=9p2000.L,msize=262144,cache=loose";
    if (::mount("root", "/.host", "9p", MS_RDONLY | MS_NOSUID | MS_NODEV, opts.c_str()) != 0)
        return StepError{"shares", errno_text("mount 9p root", "/.host")};
    for (const auto& top : start.value("view", json::array())) {
        std::string name = top.get<std::string>();
        if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") continue;
        std::string src = "/.host/" + name, dst = "/" + name;
        struct stat st{}, have{};
        if (::lstat(src.c_str(), &st) != 0) continue;              // not in the host's view
        if (::lstat(dst.c_str(), &have) == 0 && !S_ISDIR(have.st_mode)) continue;
        if (S_ISLNK(st.st_mode)) {
            char target[4096];
            ssize_t n = ::readlink(src.c_str(), target, sizeof target - 1);
            if (n > 0 && ::symlink(std::string(target, size_t(n)).c_str(), dst.c_str()) != 0 && errno != EEXIST)
                return StepError{"shares", errno_text("symlink", dst)};
        } else if (S_ISDIR(st.st_mode)) {
            ::mkdir(dst.c_str(), 0755);
            if (::mount(src.c_str(), dst.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
                return StepError{"shares", errno_text("bind", dst)};
        }
    }
    std::string workdir = start.value("workdir", "");
    if (workdir.empty() || workdir[0] != '/') return StepError{"shares", "the start frame has no absolute workdir"};
    std::error_code ec;
    fs::create_directories(workdir, ec);  // below a guest tmpfs; under a host view it exists already
    if (::mount("work", workdir.c_str(), "9p", MS_NOSUID | MS_NODEV, opts.c_str()) != 0)
        return StepError{"shares", errno_text("mount 9p work", workdir)};
    return std::nullopt;
}

// 5b. Where the guest has a network device, its resolver is qemu's DNS
// forwarder (the host's own, e.g. 127.0.0.53, would be the guest's
// loopback): a file of the guest's over the host view's /etc/resolv.conf, or
// at the place its symlink leads to on the guest's own tmpfs (systemd's
// /run/systemd/resolve/stub-resolv.conf). The tool's DNS rules arrive
// rewritten to the forwarder (vm::guest_bundle). "" or why not.
std::string point_resolver_at_forwarder() {
    if (::access("/sys/class/net/eth0", F_OK) != 0) return "no network device";
    const std::string mine = "/run/bulwark-resolv.conf";
    const std::string text = std::string("# the VMM's DNS forwarder (qemu user-mode network)\nnameserver ") +
                             vm::kGuestDnsForwarder + "\n";
    std::ofstream(mine, std::ios::trunc) << text;
    std::error_code ec;
    fs::path target = fs::weakly_canonical("/etc/resolv.conf", ec);
    if (ec) return "resolving /etc/resolv.conf: " + ec.message();
    if (fs::exists(target, ec)) {
        if (::mount(mine.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0)
            return errno_text("bind", target.string());
        return "";
    }
    fs::create_directories(target.parent_path(), ec);
    std::ofstream out(target, std::ios::trunc);
    out << text;
    return out ? "" : "cannot write " + target.string() + " (the host's /etc/resolv.conf leads there)";
}

// A deny on a path absent from the guest (e.g. ${home}/.ssh of the host's
// home, not shared into the VM): the BPF LSM keys denies by inode, so the
// agent makes an empty directory there when the missing part lies on its own
// throwaway root (never inside a share from the host).
void make_deny_points(const policy::Bundle& b) {
    struct stat root{};
    if (::stat("/", &root) != 0) return;
    for (const auto& f : b.files) {
        if (!f.deny || f.path.empty() || f.path[0] != '/') continue;
        fs::path p(f.path), existing = p;
        std::error_code ec;
        while (!fs::exists(existing, ec) && existing.has_parent_path() && existing != existing.parent_path())
            existing = existing.parent_path();
        if (existing == p) continue;
        struct stat st{};
        if (::stat(existing.c_str(), &st) != 0 || st.st_dev != root.st_dev) continue;
        fs::create_directories(p, ec);
    }
}

// A guest restored from a snapshot shares that snapshot's RNG state and
// clock with every other restore: the host's fresh entropy is mixed in (and
// credited) and its time set, before anything of the run.
void fresh_entropy_and_clock(const json& start) {
    std::string hex = start.value("entropy", "");
    if (hex.size() >= 64 && hex.size() % 2 == 0) {
        struct {
            int entropy_count;
            int buf_size;
            unsigned char buf[64];
        } pool{};
        size_t n = std::min(hex.size() / 2, sizeof pool.buf);
        for (size_t i = 0; i < n; ++i) pool.buf[i] = static_cast<unsigned char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
        pool.buf_size = int(n);
        pool.entropy_count = int(n * 8);
        int fd = ::open("/dev/urandom", O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            if (::ioctl(fd, RNDADDENTROPY, &pool) != 0) console(errno_text("ioctl RNDADDENTROPY", "/dev/urandom"));
            ::close(fd);
        }
    }
    if (start.contains("now_ns") && start["now_ns"].is_number_unsigned()) {
        uint64_t ns = start["now_ns"].get<uint64_t>();
        timespec ts{time_t(ns / 1000000000ull), long(ns % 1000000000ull)};
        if (::clock_settime(CLOCK_REALTIME, &ts) != 0) console(errno_text("clock_settime", "CLOCK_REALTIME"));
    }
}

// The guest's report: run_tool's, without the output (streamed already),
// with the guest's facts.
json exit_document(RunReport rep, const json& facts, const json& bpf_status, const json& kaudit_status) {
    rep.stdout_data.clear();
    rep.stderr_data.clear();
    json doc = to_json(rep);
    doc["guest"] = facts;
    doc["guest"]["bpf"] = bpf_status;
    doc["guest"]["kernel_audit"] = kaudit_status;
    return doc;
}

RunReport step_failed(const StepError& e) {
    RunReport rep;
    rep.outcome = RunOutcome::SetupFailed;
    rep.error = "guest " + e.step + ": " + e.why;
    return rep;
}

// The guest's decision sources, started at boot, before Hello: the BPF
// programs loaded and proven by their canaries (slow under TCG) and the
// kernel audit reader are then part of a snapshot, and every restored run
// finds them ready. Their records go to the host as Record frames.
struct GuestLayers {
    RunRegistry registry;
    std::unique_ptr<KernelAuditReader> reader;
    std::string kaudit_unavailable;
    std::unique_ptr<bpf::BpfRuntime> bpf;
    std::string bpf_unavailable;
};

void start_layers(Channel& ch, GuestLayers& g) {
    auto sink = [&ch](audit::AuditRecord r) { ch.send(vm::FrameType::Record, audit::to_json(r).dump()); };
    KernelAuditOptions kopts;
    kopts.resolve = [&g](const kaudit::KernelDenial& d) { return g.registry.resolve(d); };
    kopts.sink = sink;
    if (auto r = KernelAuditReader::start(std::move(kopts)))
        g.reader = std::move(*r);
    else
        g.kaudit_unavailable = r.error();
    bpf::RuntimeOptions ro;
    // The guest has no /bin/true at boot: the canary executes this agent,
    // which, not PID 1, ends at once (main).
    ro.canary_exec = "/proc/self/exe";
    ro.sink = sink;
    ro.on_drops = [&ch](const std::string& source, uint64_t n) {
        ch.send(vm::FrameType::Log, std::to_string(n) + " record(s) lost in the guest: " + source);
    };
    if (auto rt = bpf::BpfRuntime::start(std::move(ro)))
        g.bpf = std::move(*rt);
    else
        g.bpf_unavailable = "BPF runtime did not start in the guest: " + rt.error().message();
}

// Where a job's time in the guest goes (the exit report's guest.timings_ms):
// each step from the job's Start on, in milliseconds.
class StepClock {
public:
    void mark(const char* step) {
        auto now = std::chrono::steady_clock::now();
        out_[step] = std::chrono::duration<double, std::milli>(now - last_).count();
        last_ = now;
    }
    void set(const char* step, double ms) { out_[step] = ms; }
    const json& steps() const { return out_; }

private:
    std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
    json out_ = json::object();
};

// What every launch would otherwise make or prove again, done once before
// Hello so that each restore of the snapshot finds it: the seccomp and
// Landlock canaries' verdicts (the same guest kernel after a restore) and a
// network namespace in the pool (a `none`/`loopback` tool's; creating one
// costs tens of milliseconds under TCG).
void prewarm_launches() {
    (void)seccomp_canary();
    (void)landlock_canary();
    std::string err;
    if (auto ns = NetnsPool::instance().acquire(err)) NetnsPool::instance().release(std::move(*ns));
    else console("network namespace pool: " + err);
}

// 6. The tool, under the rule file's bundle, with every layer of the guest.
// The run's bundle: the Start's, or (a warm VM's next run of the same
// policy) the one the guest holds from its last Start, named by its hash.
// The host compiled and hashed it; the channel is the host's own byte
// stream: the hash is not computed again here (bundle_from_json's cost under
// TCG is tens of milliseconds). `held` keeps the last one taken.
using Held = std::shared_ptr<const policy::Bundle>;
std::expected<Held, std::string> job_bundle(const json& start, Held& held) {
    if (!start.contains("bundle")) {
        std::string want = start.value("bundle_hash", "");
        if (held && !want.empty() && held->hash == want) return held;
        return std::unexpected("the start frame names bundle " + want + ", which the guest does not hold");
    }
    auto b = policy::bundle_from_own_json(start["bundle"]);
    if (!b) return std::unexpected(b.error());
    held = std::make_shared<const policy::Bundle>(std::move(*b));
    return held;
}

json run_job(Channel& ch, const Job& job, const json& facts, GuestLayers& layers, StepClock& clock, Held& held) {
    const auto& s = job.start;
    auto found = job_bundle(s, held);
    clock.mark("bundle");
    if (!found) return exit_document(step_failed({"bundle", found.error()}), facts, nullptr, nullptr);
    const Held& bundle = *found;
    fresh_entropy_and_clock(s);
    make_deny_points(*bundle);
    RunRequest req;
    req.argv = s.value("argv", std::vector<std::string>{});
    req.workdir = s.value("workdir", "");
    if (s.contains("uid")) req.uid = s["uid"].get<uid_t>();
    if (s.contains("gid")) req.gid = s["gid"].get<gid_t>();
    std::vector<std::pair<std::string, std::string>> env;
    for (const auto& kv : s.value("env", json::array())) env.emplace_back(kv.at(0).get<std::string>(), kv.at(1).get<std::string>());
    req.caller_env = std::move(env);
    if (job.has_stdin) req.stdin_data = job.stdin_data;
    req.hostname = s.value("hostname", "bulwark");
    req.cancel_fd = ch.cancel_fd();
    req.vm_layers = {{"microvm", ""}, {"tee", "the guest is not a confidential guest (no TEE on this host)"}};
    req.profile_scoring = s.value("profile_scoring", false);
    req.on_output = [&ch](int stream, std::string_view data) {
        ch.send(stream == 1 ? vm::FrameType::Stdout : vm::FrameType::Stderr, data);
    };
    const uint64_t run_id = s.value("run_id", uint64_t(1));
    const uint64_t task_id = s.value("task_id", uint64_t(0));
    DecisionSources sources;
    sources.kaudit = layers.reader.get();
    sources.registry = &layers.registry;
    sources.bpf = layers.bpf.get();
    sources.bpf_unavailable = layers.bpf_unavailable;
    json bpf_status = layers.bpf ? layers.bpf->status() : json{{"state", layers.bpf_unavailable}};
    json kaudit_status = layers.reader ? json(nullptr) : json{{"state", "unavailable: " + layers.kaudit_unavailable}};
    RunReport rep;
    {
        RunBinding binding(sources, *bundle,
                           RunContext{task_id, run_id, bundle->tool, 0, bundle});
        binding.prepare(req);
        // A task's new policy epoch while the tool runs: its BPF binding in
        // the guest follows, as a running tool's does on the host.
        ch.on_policy([&binding, &layers](const json& doc) {
            json ans = {{"policy_version", doc.value("policy_version", uint64_t(0))}, {"applied", false}};
            if (!layers.bpf) return ans["detail"] = "no BPF binding in the guest: " + layers.bpf_unavailable, ans;
            auto b = policy::bundle_from_own_json(doc.value("bundle", json::object()));
            if (!b) return ans["detail"] = "the policy frame's bundle: " + b.error(), ans;
            if (auto r = binding.rebind(*b, ans["policy_version"].get<uint64_t>()); !r)
                return ans["detail"] = r.error().message, ans;
            ans["applied"] = true;
            ans["detail"] = "the tool's BPF binding in the guest now holds " + b->hash;
            return ans;
        });
        clock.mark("prepare");
        rep = run_tool(*bundle, req);
        clock.mark("run_tool");
        clock.set("tool", double(rep.usage.wall_us) / 1000.0);  // of run_tool: the tool's exec to its exit
        ch.on_policy(nullptr);
        auto end = binding.finish(rep);
        clock.mark("finish");
        if (layers.reader) {
            kaudit_status = layers.reader->status();
            kaudit_status["state"] = end.kaudit_read ? "read" : "incomplete";
        }
    }
    json doc = exit_document(std::move(rep), facts, bpf_status, kaudit_status);
    doc["guest"]["timings_ms"] = clock.steps();
    return doc;
}

[[noreturn]] void power_off() {
    ::sync();
    ::reboot(RB_POWER_OFF);
    for (;;) ::pause();
}

}  // namespace

int agent_main() {
    spdlog::set_level(spdlog::level::warn);
    if (auto e = mount_kernel_filesystems()) console(e->step + ": " + e->why);
    // A canary VM (vm/kvm_canary.h): the host asks whether this kernel and
    // this agent run under its accelerator; the answer is on the console.
    if (std::string cmd = " " + read_file("/proc/cmdline") + " "; cmd.find(" bulwark.canary ") != std::string::npos) {
        utsname u{};
        ::uname(&u);
        console(std::string(vm::kCanaryAnswer) + " " + u.release);
        power_off();
    }
    if (auto e = load_modules()) console(e->step + ": " + e->why);
    auto early = leave_initramfs();
    const std::string network = configure_network();
    auto fd = open_channel();
    if (!fd) {
        console(fd.error().step + ": " + fd.error().why);
        power_off();
    }
    Channel ch(*fd);
    GuestLayers layers;
    Held held;  // the bundle of the last Start
    if (!early) {
        start_layers(ch, layers);
        prewarm_launches();
    }
    json facts = guest_facts(network);
    ch.send(vm::FrameType::Hello, facts.dump());
    // One job, or (a task's warm VM) one after another while the host parks
    // the guest after each: the shares are mounted once, the layers stay.
    for (bool shared = false;;) {
        auto job = await_job(ch);
        StepClock clock;
        if (job) clock.set("start_parse", job->parse_ms);
        json doc;
        if (early) {
            doc = exit_document(step_failed(*early), facts, nullptr, nullptr);
        } else if (!job) {
            doc = exit_document(step_failed(job.error()), facts, nullptr, nullptr);
        } else if (auto e = shared ? std::nullopt : mount_shares(job->start)) {
            doc = exit_document(step_failed(*e), facts, nullptr, nullptr);
        } else {
            if (!shared && network != "none") {
                std::string dns = point_resolver_at_forwarder();
                facts["dns"] = dns.empty() ? std::string(vm::kGuestDnsForwarder) +
                                                 " (qemu's forwarder: each query leaves as the VMM's own to the host's resolvers)"
                                           : "unchanged: " + dns;
            }
            shared = true;
            clock.mark("shares");
            doc = run_job(ch, *job, facts, layers, clock, held);
        }
        doc["guest"]["holds_bundle"] = held ? held->hash : "";  // exit_document's "guest"
        ::sync();  // the tool's writes reach the host's work directory before the host reads the report
        ch.send(vm::FrameType::Exit, doc.dump());
        // The host acknowledges the exit: parked, the next job; else it
        // tears the VM down (this powers off first if it does not).
        bool park = false;
        for (int i = 0; i < 50; ++i) {
            auto f = ch.next(100);
            if (f && f->type == vm::FrameType::Ack) {
                park = f->payload == vm::kAckPark && shared && !ch.cancelled();
                break;
            }
        }
        if (!park) power_off();
    }
}

}  // namespace bulwark::guest

// Not PID 1: executed as the BPF canary's exec target (start_layers), it
// does nothing.
int main() { return ::getpid() == 1 ? bulwark::guest::agent_main() : 0; }
