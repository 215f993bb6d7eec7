#include "vm/microvm_run.h"

#include <poll.h>
#include <csignal>
#include <sys/eventfd.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "bulwark/policy/compiler.h"
#include "common/fd.h"
#include "vm/channel.h"
#include "vm/kvm_canary.h"
#include "vm/qmp.h"
#include "vm/vmm_bundle.h"

extern char** environ;

namespace bulwark::vm {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

MicroVmHost probe_microvm_host(const std::vector<std::string>& rules_dirs, const std::vector<std::string>& image_dirs) {
    MicroVmHost h;
    std::vector<std::string> why;
    if (auto v = find_vmm()) h.vmm = *v;
    else why.push_back(v.error());
    std::string image_why;
    for (const auto& d : image_dirs) {
        auto img = load_guest_image(d);
        if (img) {
            h.image = *img;
            break;
        }
        image_why += (image_why.empty() ? "" : "; ") + img.error();
    }
    if (!h.image) why.push_back(image_why.empty() ? "no guest image directory configured" : image_why);
    if (h.vmm && h.image) settle_accel(*h.vmm, *h.image);  // KVM only where a canary VM of this image ran
    std::string rules_why = "no vmm/qemu.yaml in the rules directories";
    for (const auto& d : rules_dirs) {
        fs::path f = fs::path(d) / "vmm" / "qemu.yaml";
        std::error_code ec;
        if (!fs::exists(f, ec)) continue;
        policy::CompileOptions opts;
        opts.rules_dirs = rules_dirs;
        auto c = policy::compile_file(f.string(), opts);
        if (c.ok()) {
            h.vmm_rules = *c.bundle;
        } else {
            rules_why = "the VMM's rule file " + f.string() + " does not compile:\n" + policy::render_diagnostics(c);
        }
        break;
    }
    if (!h.vmm_rules) why.push_back(rules_why);
    for (const auto& w : why) h.unavailable += (h.unavailable.empty() ? "" : "; ") + w;
    return h;
}

namespace {

// Whether this host could run a confidential guest: never, today
// (docs/confidential.md); the reason names what was looked at.
std::string no_tee_reason() {
    std::string seen;
    for (const char* p : {"/sys/module/kvm_intel/parameters/tdx", "/sys/module/kvm_amd/parameters/sev_snp", "/dev/sev"}) {
        std::error_code ec;
        seen += std::string(seen.empty() ? "" : ", ") + p + (fs::exists(p, ec) ? " present" : " absent");
    }
    return "no TEE: this host has no TDX, SEV-SNP or CCA the microVM tier can launch a guest on (checked: " + seen +
           "; confidential guests are a design, docs/confidential.md)";
}

}  // namespace

bool route(const policy::Bundle& tool, const MicroVmHost& host, RunRequest& req, std::vector<std::string>& warnings) {
    const auto& m = tool.microvm;
    if (m.mode == policy::MicroVmMode::Off) return false;
    if (m.confidential) {
        req.vm_layers["tee"] = no_tee_reason();
        req.vm_layers["microvm"] = "a confidential guest is required: " + no_tee_reason();
        return false;
    }
    std::string why = host.unavailable;
    if (why.empty()) return true;
    req.vm_layers["microvm"] = "no microVM on this host: " + why;
    if (m.mode == policy::MicroVmMode::Preferred)
        warnings.push_back("microvm.mode preferred: the tool ran in the host sandbox (no microVM: " + why + ")");
    return false;
}

std::expected<MicroVmLaunch, std::string> plan_microvm(const policy::Bundle& tool, const MicroVmHost& host,
                                                       const policy::TaskVars& vars) {
    if (!host.unavailable.empty() || !host.vmm || !host.image || !host.vmm_rules)
        return std::unexpected("no microVM on this host: " + host.unavailable);
    auto vmm = policy::instantiate(*host.vmm_rules, vars, {});  // the VMM has no host-name rules
    if (!vmm) return std::unexpected("the VMM's rules do not instantiate: " + vmm.error().message);
    std::string snaps = "/var/cache/bulwark/microvm";
    if (const char* e = std::getenv("BULWARK_MICROVM_SNAPSHOTS"); e && *e) snaps = std::string(e) == "off" ? "" : e;
    auto composed = compose_vmm_bundle(*vmm, tool, host.image->dir);
    return MicroVmLaunch{std::move(composed), std::move(*vmm), *host.vmm, *host.image, snaps};
}

namespace {

// The caller's environment the tool's `environment.pass` names, no more:
// the rest of the host's environment never enters the guest.
std::vector<std::pair<std::string, std::string>> passed_env(const policy::Bundle& tool, const RunRequest& req) {
    std::vector<std::pair<std::string, std::string>> all;
    if (req.caller_env) {
        all = *req.caller_env;
    } else {
        for (char** e = environ; e && *e; ++e) {
            std::string_view kv(*e);
            auto eq = kv.find('=');
            if (eq != std::string_view::npos) all.emplace_back(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
        }
    }
    std::vector<std::pair<std::string, std::string>> out;
    for (auto& [k, v] : all)
        for (const auto& p : tool.env.pass)
            if (p == k) out.emplace_back(k, v);
    return out;
}

}  // namespace

// One VM and the runs it serves: the first boots (or restores) it; with
// `keep` the guest is parked after a run's exit and takes the next run's
// Start (a task's warm VM, VmSession); otherwise, or after any fault,
// cancel or timeout, the VM is torn down.
class MicroVmRun {
public:
    MicroVmRun(MicroVmLaunch l, const policy::Bundle& shape, RunRequest vmm_req)
        : launch_(std::move(l)), shape_(shape.microvm), network_(shape.network.mode == policy::NetMode::Rules),
          vreq_(std::move(vmm_req)) {}
    ~MicroVmRun() { tear_down(); }

    RunReport run(const policy::Bundle& tool, const RunRequest& req, bool keep, uint64_t policy_version = 0) {
        tool_ = &tool;
        req_ = &req;
        begin_run(policy_version);
        if (!started_) {
            started_ = true;
            if (auto e = open_channel(); !e.empty()) return end_run(failed(e));
            choose_start();
            start_vmm();
            if (restoring_) restore();
        } else if (!parked()) {
            return end_run(failed("the task's VM is no longer parked"));
        } else {
            warm_ = true;
            send_start();
        }
        converse();
        parked_ = keep && exited_ && error_.empty() && !cancelled_ && !timed_out_ &&
                  send(FrameType::Ack, kAckPark);
        if (!parked_) {
            if (exited_) send(FrameType::Ack, {});  // the guest powers off
            stop_vmm();
        }
        return end_run(report());
    }

    // Ready for the next run: parked after an exit, the VMM running, and
    // nothing from the guest since (a parked guest that gives up waiting
    // says so and powers off).
    bool parked() const {
        if (!parked_ || stopped_) return false;
        pollfd p[2] = {{mine_.get(), POLLIN, 0}, {vmm_done_.get(), POLLIN, 0}};
        return ::poll(p, 2, 0) == 0;
    }
    void tear_down() {
        parked_ = false;
        if (started_ && !stopped_) {
            kill_vm();
            stop_vmm();
        }
    }

    void switch_policy(const policy::Bundle& tool, uint64_t version) {
        std::lock_guard lk(policy_mu_);
        if (version <= run_version_) return;
        if (!start_sent_) {  // the run's Start carries it
            if (!next_ || version > next_->second) next_.emplace(tool, version);
            return;
        }
        run_version_ = version;
        json frame = {{"bundle", hashed_guest_bundle(tool)}, {"policy_version", version}};
        bool sent = send(FrameType::Policy, frame.dump());
        switches_.push_back({{"policy_version", version},
                             {"hash", tool.hash},
                             {"at_ms", ms_since(t0_)},
                             {"applied", false},
                             {"detail", sent ? "sent to the guest, no answer yet"
                                             : std::string("the channel to the guest: write: ") + std::strerror(errno)}});
    }

    policy::Bundle vmm_bundle_for(const policy::Bundle& tool) const {
        policy::Bundle b = compose_vmm_bundle(launch_.vmm_rules, tool, launch_.image.dir);
        b.limits = launch_.vmm_bundle.limits;  // a warm VM's life, not the run's
        return b;
    }

private:
    static uint64_t ms_since(Clock::time_point t) {
        return uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count());
    }
    // The tool's instantiated bundle as the guest binds it, hashed again
    // (guest_bundle changed it; the guest takes the hash as sent).
    static json hashed_guest_bundle(const policy::Bundle& tool) {
        policy::Bundle sent = guest_bundle(tool);
        sent.hash = policy::bundle_hash(sent);
        return policy::bundle_to_json(sent);
    }

    void begin_run(uint64_t policy_version) {
        {
            std::lock_guard lk(policy_mu_);
            run_version_ = policy_version;
            start_sent_ = false;
            switches_ = json::array();
            if (next_ && next_->second <= policy_version) next_.reset();
            t0_ = Clock::now();  // switch_policy reads it on another thread
        }
        ++runs_;
        warm_ = false;
        exited_ = cancelled_ = timed_out_ = false;
        guest_rep_.reset();
        out_.clear();
        err_.clear();
        error_.clear();
        records_ = json::array();
        records_dropped_ = 0;
        log_.clear();
    }
    RunReport end_run(RunReport rep) {
        {
            std::lock_guard lk(policy_mu_);
            start_sent_ = false;
            next_.reset();
        }
        tool_ = nullptr;
        req_ = nullptr;
        return rep;
    }

    // 1. The channel: a socket pair, the VMM's end its virtio-serial port's backend.
    std::string open_channel() {
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
            return std::string("socketpair: ") + std::strerror(errno);
        mine_ = Fd(sv[0]);
        theirs_ = Fd(sv[1]);
        kill_ = Fd(::eventfd(0, EFD_CLOEXEC));
        vmm_done_ = Fd(::eventfd(0, EFD_CLOEXEC));
        if (!kill_ || !vmm_done_) return std::string("eventfd: ") + std::strerror(errno);
        int qv[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, qv) != 0)
            return std::string("socketpair: ") + std::strerror(errno);
        qmp_mine_ = Fd(qv[0]);
        qmp_theirs_ = Fd(qv[1]);
        return "";
    }

    // 1b. Cold boot, or restore the snapshot of a parked guest agent of this
    // image and shape (made at the first cold boot, after its Hello).
    void choose_start() {
        if (launch_.snapshot_dir.empty()) return;
        snap_dir_ = launch_.snapshot_dir + "/" + snapshot_key();
        std::ifstream meta(snap_dir_ + "/meta.json");
        auto m = json::parse(meta, nullptr, false);
        if (!meta || m.is_discarded() || !m.contains("hello")) return;
        int fd = ::open((snap_dir_ + "/state").c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return;
        incoming_ = Fd(fd);
        restoring_ = true;
        facts_ = m["hello"];
    }

    std::string snapshot_key() const {
        std::string d = launch_.image.digest.substr(launch_.image.digest.find(':') + 1, 16);
        // The device layout of qemu_argv: a snapshot restores only into the
        // same devices, so a change of them is a new key.
        constexpr const char* kLayout = "l1";
        return d + "-m" + std::to_string(shape_.memory_bytes >> 20) + "-c" + std::to_string(shape_.vcpus) +
               "-" + launch_.vmm.accel + "-" + kLayout + (guest_network() ? "-net" : "");
    }

    // A tool with network rules gets a network device; its traffic leaves
    // through the VMM (compose_vmm_bundle gives the VMM the same rules).
    bool guest_network() const { return network_; }

    // 2b. The restore: the migration stream read, the VM continued; the
    // guest agent is where the snapshot left it (after its Hello, waiting
    // for Start), so Start goes at once.
    void restore() {
        Qmp q(qmp_mine_.get());
        auto fail = [&](const std::string& why) {
            // This run fails; the snapshot goes, so the next one boots cold
            // and makes a new one.
            error_ = "snapshot restore: " + why + " (the snapshot " + snap_dir_ + " was removed)";
            std::error_code ec;
            fs::remove_all(snap_dir_, ec);
            kill_vm();
        };
        if (auto h = q.handshake(std::chrono::seconds(10)); !h) return fail(h.error());
        if (auto w = q.wait_migration(std::chrono::seconds(30)); !w) return fail(w.error());
        if (auto c = q.run("cont", json::object(), std::chrono::seconds(5)); !c) return fail(c.error());
        hello_ = true;
        restored_ = true;
        boot_ms_ = uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0_).count());
        send_start();
    }

    // At the first cold boot's Hello: the parked guest saved for the next
    // runs (stop, migrate to a file, continue). Failing leaves no snapshot.
    void make_snapshot() {
        if (launch_.snapshot_dir.empty()) return;
        auto t = Clock::now();
        std::error_code ec;
        fs::create_directories(snap_dir_, ec);
        ::chmod(launch_.snapshot_dir.c_str(), 0700);
        std::string tmp = snap_dir_ + "/state.tmp." + std::to_string(::getpid()) + "." + std::to_string(uintptr_t(this));
        Fd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
        Qmp q(qmp_mine_.get());
        auto warn = [&](const std::string& why) {
            snapshot_note_ = "no snapshot made: " + why;
            (void)q.run("cont", json::object(), std::chrono::seconds(5));
            ::unlink(tmp.c_str());
        };
        if (!out) return warn(std::string("open ") + tmp + ": " + std::strerror(errno));
        if (auto h = q.handshake(std::chrono::seconds(10)); !h) return warn(h.error());
        if (auto r = q.run("stop", json::object(), std::chrono::seconds(5)); !r) return warn(r.error());
        if (auto r = q.send_fd("snap", out.get(), std::chrono::seconds(5)); !r) return warn(r.error());
        if (auto r = q.run("migrate", {{"uri", "fd:snap"}}, std::chrono::seconds(5)); !r) return warn(r.error());
        if (auto w = q.wait_migration(std::chrono::seconds(30)); !w) return warn(w.error());
        out = Fd();
        if (::rename(tmp.c_str(), (snap_dir_ + "/state").c_str()) != 0) return warn(std::string("rename: ") + std::strerror(errno));
        json meta = {{"hello", facts_}, {"image", launch_.image.digest}, {"created_ns", uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count())}};
        std::ofstream(snap_dir_ + "/meta.json.tmp") << meta.dump();
        fs::rename(snap_dir_ + "/meta.json.tmp", snap_dir_ + "/meta.json", ec);
        if (auto r = q.run("cont", json::object(), std::chrono::seconds(5)); !r) return warn(r.error());
        snapshot_note_ = "snapshot made in " +
                         std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count()) +
                         " ms: " + snap_dir_;
    }

    // 2. The VMM, confined by run_tool under its own policy, on a thread.
    void start_vmm() {
        VmShape shape{shape_.memory_bytes, shape_.vcpus, req_->workdir, theirs_.get(), qmp_theirs_.get(),
                      incoming_ ? incoming_.get() : -1, guest_network()};
        vreq_.argv = qemu_argv(launch_.vmm, launch_.image, shape);
        vreq_.workdir = req_->workdir;
        vreq_.uid = req_->uid;
        vreq_.gid = req_->gid;
        vreq_.keep_fds = {theirs_.get(), qmp_theirs_.get()};
        if (incoming_) vreq_.keep_fds.push_back(incoming_.get());
        vreq_.cancel_fd = kill_.get();
        vreq_.caller_env = std::vector<std::pair<std::string, std::string>>{};
        vreq_.stdin_data.reset();
        vreq_.on_output = [this](int, std::string_view d) {
            std::lock_guard lk(console_mu_);
            console_.append(d);
            if (console_.size() > 65536) console_.erase(0, console_.size() - 65536);
        };
        vmm_thread_ = std::thread([this] {
            vmm_rep_ = run_tool(launch_.vmm_bundle, vreq_);
            uint64_t one = 1;
            (void)!::write(vmm_done_.get(), &one, sizeof one);
        });
    }

    void kill_vm() {
        uint64_t one = 1;
        (void)!::write(kill_.get(), &one, sizeof one);
    }

    bool send(FrameType t, std::string_view p) {
        std::lock_guard lk(send_mu_);
        return write_all(mine_.get(), encode(t, p));
    }

    void send_start() {
        std::lock_guard lk(policy_mu_);
        // The run's policy, or the newer epoch a switch brought before the
        // Start went out.
        json bundle;
        if (next_ && next_->second > run_version_) {
            bundle = hashed_guest_bundle(next_->first);
            run_version_ = next_->second;
            switches_.push_back({{"policy_version", run_version_},
                                 {"hash", next_->first.hash},
                                 {"at_ms", ms_since(t0_)},
                                 {"applied", true},
                                 {"detail", "switched before the tool started: the run's Start carries it"}});
        } else {
            bundle = hashed_guest_bundle(*tool_);
        }
        next_.reset();
        start_sent_ = true;
        json start = {{"argv", req_->argv},
                      {"workdir", req_->workdir},
                      {"hostname", req_->hostname},
                      {"view", view_tops()}};
        // The guest keeps the last Start's bundle (its exit report says
        // which): a warm VM's next run of the same policy names it only.
        if (!guest_holds_.empty() && bundle.value("hash", "") == guest_holds_)
            start["bundle_hash"] = guest_holds_;
        else
            start["bundle"] = std::move(bundle);
        if (req_->uid) start["uid"] = *req_->uid;
        if (req_->gid) start["gid"] = *req_->gid;
        // The host scores the run against the tool's profile (coverage's
        // "profile" layer is in force in the guest too).
        if (req_->profile_scoring) start["profile_scoring"] = true;
        // A restored guest shares its snapshot's RNG state and clock: fresh
        // entropy and the time for every run.
        unsigned char seed[32];
        if (::getrandom(seed, sizeof seed, 0) == ssize_t(sizeof seed)) {
            static const char* hx = "0123456789abcdef";
            std::string h;
            for (unsigned char c : seed) h += {hx[c >> 4], hx[c & 15]};
            start["entropy"] = h;
        }
        start["now_ns"] = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                       .count());
        json env = json::array();
        for (const auto& [k, v] : passed_env(*tool_, *req_)) env.push_back({k, v});
        start["env"] = std::move(env);
        bool ok = send(FrameType::Start, start.dump());
        if (req_->stdin_data)
            for (size_t off = 0; ok && off < req_->stdin_data->size(); off += 65536)
                ok = send(FrameType::Stdin, std::string_view(*req_->stdin_data).substr(off, 65536));
        if (ok) ok = send(FrameType::StdinEof, {});
        if (!ok) error_ = std::string("the channel to the guest: write: ") + std::strerror(errno);
    }

    // The top-level names of the host's view the guest binds from 9p "root":
    // the system directories and the first component of every path the
    // tool's rules name.
    json view_tops() const {
        std::vector<std::string> tops = {"usr", "etc", "bin", "lib", "lib64", "sbin"};
        auto add = [&](const std::string& p) {
            if (p.size() < 2 || p[0] != '/') return;
            std::string t = p.substr(1, p.find('/', 1) == std::string::npos ? std::string::npos : p.find('/', 1) - 1);
            if (t == "proc" || t == "sys" || t == "dev" || t == "tmp" || t == "run") return;
            if (std::find(tops.begin(), tops.end(), t) == tops.end()) tops.push_back(t);
        };
        for (const auto& f : tool_->files) add(f.path);
        add(req_->workdir);
        return tops;
    }

    // 3. The conversation, until the guest's Exit, the VMM's end, a
    // protocol error, the deadline or (after a cancel) its grace.
    void converse() {
        FrameReader reader(from_guest);
        const uint64_t timeout_ms = (tool_->limits.timeout_ms ? *tool_->limits.timeout_ms : 600'000) + kBootAllowanceMs;
        const auto deadline = t0_ + std::chrono::milliseconds(timeout_ms);
        const uint64_t out_cap = (tool_->limits.output_bytes ? *tool_->limits.output_bytes : (16u << 20)) + (64u << 10);
        std::optional<Clock::time_point> grace;
        bool cancel_sent = false;
        char buf[65536];
        while (!exited_ && error_.empty()) {
            auto now = Clock::now();
            if (now >= deadline) {
                timed_out_ = true;
                error_ = "the VM did not finish within the tool's timeout plus " + std::to_string(kBootAllowanceMs / 1000) +
                         " s of boot";
                break;
            }
            if (grace && now >= *grace) {
                error_ = "cancelled: the guest did not stop within 5 s";
                break;
            }
            auto until = grace ? std::min(deadline, *grace) : deadline;
            int wait = int(std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count()) + 1;
            pollfd p[3] = {{mine_.get(), POLLIN, 0}, {vmm_done_.get(), POLLIN, 0},
                           {cancel_sent ? -1 : req_->cancel_fd, POLLIN, 0}};
            if (::poll(p, 3, std::min(wait, 1000)) < 0) {
                if (errno == EINTR) continue;
                error_ = std::string("poll: ") + std::strerror(errno);
                break;
            }
            if (p[2].revents & POLLIN) {
                cancel_sent = true;
                cancelled_ = true;
                if (!hello_ || !send(FrameType::Cancel, {})) break;  // not booted: tear it down now
                grace = Clock::now() + std::chrono::seconds(5);
            }
            if (p[0].revents & (POLLIN | POLLHUP)) {
                ssize_t n = ::read(mine_.get(), buf, sizeof buf);
                if (n <= 0) {
                    if (n < 0 && errno == EINTR) continue;
                    error_ = "the VM closed the channel before the tool's exit";
                    break;
                }
                reader.feed(std::string_view(buf, size_t(n)));
                for (;;) {
                    auto f = reader.next();
                    if (!f) {
                        error_ = "the guest broke the channel protocol: " + f.error();
                        break;
                    }
                    if (!*f) break;
                    on_frame(**f, out_cap);
                    if (!error_.empty() || exited_) break;
                }
            }
            if (p[1].revents & POLLIN) {
                // The VMM ended: drain what the guest sent before it went.
                if (!exited_ && error_.empty()) error_ = "the VM ended before the tool's exit";
                break;
            }
        }
    }

    void on_frame(Frame& f, uint64_t out_cap) {
        switch (f.type) {
            case FrameType::Hello:
                if (hello_) {
                    error_ = "the guest said hello twice";
                    return;
                }
                hello_ = true;
                boot_ms_ = uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0_).count());
                facts_ = json::parse(f.payload, nullptr, false);
                if (facts_.is_discarded()) facts_ = nullptr;
                if (!launch_.snapshot_dir.empty()) {
                    snap_dir_ = launch_.snapshot_dir + "/" + snapshot_key();
                    make_snapshot();
                }
                send_start();
                return;
            case FrameType::Stdout:
            case FrameType::Stderr: {
                std::string& to = f.type == FrameType::Stdout ? out_ : err_;
                if (out_.size() + err_.size() + f.payload.size() > out_cap) {
                    error_ = "the guest sent more output than the tool's limit allows";
                    return;
                }
                to += f.payload;
                if (req_->on_output) req_->on_output(f.type == FrameType::Stdout ? 1 : 2, f.payload);
                return;
            }
            case FrameType::Record: {
                if (records_.size() >= 100000) {
                    ++records_dropped_;
                    return;
                }
                auto r = json::parse(f.payload, nullptr, false);
                if (r.is_discarded() || !r.is_object()) {
                    error_ = "the guest sent a record that is not a JSON object";
                    return;
                }
                r["in_guest"] = true;
                records_.push_back(std::move(r));
                return;
            }
            case FrameType::Log:
                if (log_.size() < 100) log_.push_back(f.payload.substr(0, 1000));
                return;
            case FrameType::PolicyApplied: {
                auto a = json::parse(f.payload, nullptr, false);
                if (a.is_discarded() || !a.is_object() || !a.contains("policy_version")) {
                    error_ = "the guest's answer to a policy switch is not a JSON object with its version";
                    return;
                }
                std::lock_guard lk(policy_mu_);
                for (auto& sw : switches_)
                    if (sw["policy_version"] == a["policy_version"]) {
                        sw["applied"] = a.value("applied", false);
                        sw["detail"] = a.value("detail", std::string());
                        sw["answered_ms"] = ms_since(t0_);
                    }
                return;
            }
            case FrameType::Exit: {
                auto doc = json::parse(f.payload, nullptr, false);
                auto rep = doc.is_discarded() ? std::unexpected(std::string("not JSON")) : report_from_json(doc);
                if (!rep) {
                    error_ = "the guest's exit report: " + rep.error();
                    return;
                }
                guest_rep_ = std::move(*rep);
                if (doc.contains("guest")) guest_ = doc["guest"];
                guest_holds_ = guest_.is_object() ? guest_.value("holds_bundle", "") : "";
                exited_ = true;
                return;
            }
            default: error_ = "unexpected frame " + std::string(frame_name(f.type)); return;
        }
    }

    // 4. The VMM down: after Exit and Ack the guest powers off by itself;
    // otherwise (or if it lingers) it is killed.
    void stop_vmm() {
        pollfd p{vmm_done_.get(), POLLIN, 0};
        if (!exited_ || ::poll(&p, 1, 3000) <= 0) kill_vm();
        if (vmm_thread_.joinable()) vmm_thread_.join();
        stopped_ = true;
    }

    RunReport failed(const std::string& why) {
        RunReport rep;
        rep.tool = tool_->tool;
        rep.argv = req_->argv;
        rep.outcome = RunOutcome::SetupFailed;
        rep.error = "microVM: " + why;
        return rep;
    }

    // 5. The report: the guest's, with the VM's facts and the VMM's own run.
    RunReport report() {
        RunReport rep;
        if (guest_rep_) {
            rep = std::move(*guest_rep_);
        } else if (vmm_rep_.outcome == RunOutcome::Refused || vmm_rep_.outcome == RunOutcome::ExecFailed) {
            rep.outcome = vmm_rep_.outcome;
            rep.error = "microVM: the VMM's launch was " + std::string(vmm_rep_.outcome == RunOutcome::Refused ? "refused" : "not executed") +
                        ": " + vmm_rep_.error;
            rep.refusal_code = vmm_rep_.refusal_code;
        } else {
            rep.outcome = cancelled_ ? RunOutcome::Signaled : RunOutcome::SetupFailed;
            if (cancelled_) rep.signal = SIGKILL;
            rep.timed_out = timed_out_;
            if (timed_out_) {
                rep.outcome = RunOutcome::Signaled;
                rep.signal = SIGKILL;
            }
            std::lock_guard lk(console_mu_);
            rep.error = "microVM: " + (error_.empty() ? std::string("no exit report from the guest") : error_);
            if (!console_.empty()) {
                auto tail = console_.size() > 2000 ? console_.substr(console_.size() - 2000) : console_;
                rep.error += "; the guest's console ends: " + tail;
            }
        }
        if (guest_rep_ && !error_.empty()) rep.warnings.push_back("microVM: " + error_);
        rep.tool = tool_->tool;
        rep.argv = req_->argv;
        rep.stdout_data = std::move(out_);
        rep.stderr_data = std::move(err_);
        if (cancelled_ && !guest_rep_) rep.denials.push_back("cancelled by the caller");
        LayerStatus vm{"microvm", LayerState::Enforcing, "", {}};
        vm.detail = "qemu -M microvm (" + launch_.vmm.accel + ": " + launch_.vmm.why_accel + "), guest kernel " +
                    launch_.image.kernel_version + ", image " + launch_.image.digest;
        if (!hello_) vm.state = LayerState::Unavailable;
        rep.layers.insert(rep.layers.begin(), vm);
        // A parked VM's VMM is still running: its run report comes at the end.
        json vmm = parked_ ? json{{"outcome", "running"}, {"note", "the task's VM, kept warm for its next run"}}
                           : to_json(vmm_rep_);
        vmm.erase("stdout");
        vmm.erase("stderr");
        {
            std::lock_guard lk(console_mu_);
            vmm["console_tail"] = console_.size() > 4000 ? console_.substr(console_.size() - 4000) : console_;
        }
        rep.microvm = {{"vmm", launch_.vmm.binary},
                       {"accel", launch_.vmm.accel},
                       {"accel_reason", launch_.vmm.why_accel},
                       {"memory_bytes", tool_->microvm.memory_bytes},
                       {"vcpus", tool_->microvm.vcpus},
                       {"image", {{"digest", launch_.image.digest},
                                  {"kernel_version", launch_.image.kernel_version},
                                  {"kernel_package", launch_.image.kernel_package}}},
                       {"boot_ms", warm_ ? json(0) : hello_ ? json(boot_ms_) : json(nullptr)},
                       {"start", warm_ ? "warm: run " + std::to_string(runs_) + " in the task's VM"
                                 : restored_ ? "restored from a snapshot" : "cold boot"},
                       {"kept_warm", parked_},
                       {"snapshot", warm_ ? json(nullptr)
                                    : snapshot_note_.empty() ? (restored_ ? json(snap_dir_) : json(nullptr))
                                                             : json(snapshot_note_)},
                       {"wall_ms", uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0_).count())},
                       {"guest", guest_.is_null() ? facts_ : guest_},
                       {"vmm_run", std::move(vmm)},
                       {"decisions", std::move(records_)},
                       {"decisions_dropped", records_dropped_},
                       {"log", log_}};
        {
            std::lock_guard lk(policy_mu_);
            if (!switches_.empty()) rep.microvm["policy_switches"] = switches_;
        }
        return rep;
    }

    const MicroVmLaunch launch_;
    const policy::MicroVmPlan shape_;  // of the tool the VM was started for
    const bool network_;
    const policy::Bundle* tool_ = nullptr;  // the current run's
    const RunRequest* req_ = nullptr;
    RunRequest vreq_;
    bool started_ = false, stopped_ = false, parked_ = false, warm_ = false;
    uint64_t runs_ = 0;
    Fd mine_, theirs_, kill_, vmm_done_, qmp_mine_, qmp_theirs_, incoming_;
    bool restoring_ = false, restored_ = false;
    std::string snap_dir_, snapshot_note_;
    std::thread vmm_thread_;
    RunReport vmm_rep_;
    std::mutex console_mu_;
    std::string console_;
    Clock::time_point t0_;
    bool hello_ = false, exited_ = false, cancelled_ = false, timed_out_ = false;
    uint64_t boot_ms_ = 0;
    json facts_, guest_;
    std::optional<RunReport> guest_rep_;
    std::string out_, err_, error_;
    json records_ = json::array();
    uint64_t records_dropped_ = 0;
    std::vector<std::string> log_;
    // Policy switches (switch_policy, any thread): the version the guest
    // holds, a newer epoch waiting for the Start, what was sent and answered.
    std::mutex send_mu_, policy_mu_;
    uint64_t run_version_ = 0;
    bool start_sent_ = false;
    std::optional<std::pair<policy::Bundle, uint64_t>> next_;
    json switches_ = json::array();
    std::string guest_holds_;  // the hash of the bundle the guest keeps from its last Start
};


RunReport run_in_microvm(const MicroVmLaunch& launch, const policy::Bundle& tool, const RunRequest& req,
                         RunRequest vmm_req) {
    MicroVmRun r(launch, tool, std::move(vmm_req));
    return r.run(tool, req, false);
}

VmSession::VmSession(MicroVmLaunch launch, const policy::Bundle& tool, RunRequest vmm_req) {
    launch.vmm_bundle.limits.timeout_ms = kWarmVmLifeMs;
    vm_ = std::make_unique<MicroVmRun>(std::move(launch), tool, std::move(vmm_req));
}

VmSession::~VmSession() = default;

RunReport VmSession::run(const policy::Bundle& tool, const RunRequest& req, uint64_t policy_version) {
    return vm_->run(tool, req, true, policy_version);
}

void VmSession::switch_policy(const policy::Bundle& tool, uint64_t policy_version) {
    vm_->switch_policy(tool, policy_version);
}

policy::Bundle VmSession::vmm_bundle_for(const policy::Bundle& tool) const { return vm_->vmm_bundle_for(tool); }

bool VmSession::parked() const { return vm_->parked(); }

void VmSession::close() { vm_->tear_down(); }

}  // namespace bulwark::vm
