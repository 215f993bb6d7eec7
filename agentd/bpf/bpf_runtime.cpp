#include "bpf/bpf_runtime.h"

#include <bpf/bpf.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "common/clock.h"

namespace bulwark::bpf {
namespace {

// A failed map or cgroup operation as a BindError (its message as before).
BindError kernel_error(const SysError& e, const std::string& what = {}) {
    return BindError{BindError::Code::Kernel, what + e.message(), e};
}

}  // namespace

namespace {

// How long a slot switched away from stays intact before it is freed.
constexpr std::chrono::milliseconds kSlotGrace{100};
// Programs a `network:` rules policy needs proven before such a tool may run.
constexpr const char* kNetPrograms[] = {"bw_connect4", "bw_connect6", "bw_sendmsg4", "bw_sendmsg6"};
constexpr const char* kUnixPrograms[] = {"bw_connect_unix", "bw_sendmsg_unix"};

std::string state_text(const ProgramStatus& p) {
    std::string s = to_string(p.state);
    if (!p.reason.empty()) s += ": " + p.reason;
    return s;
}

// Does the cgroup with this kernfs id still exist? Unknown (no handle
// support, EPERM): treated as alive, so a live binding is never removed.
bool cgroup_alive(int mnt_fd, int handle_type, uint64_t id) {
    struct {
        struct file_handle fh;
        uint64_t id;
    } h{};
    h.fh.handle_bytes = sizeof(uint64_t);
    h.fh.handle_type = handle_type;
    std::memcpy(h.fh.f_handle, &id, sizeof id);
    int fd = ::open_by_handle_at(mnt_fd, &h.fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        ::close(fd);
        return true;
    }
    return !(errno == ESTALE || errno == ENOENT);
}

}  // namespace

// ---------------------------------------------------------------- lock

BpfRuntime::MapsLock::MapsLock(BpfRuntime& rt, std::chrono::milliseconds wait)
    : rt_(rt), lk_(rt.maps_mu_, std::defer_lock), wait_(wait) {
    auto deadline = std::chrono::steady_clock::now() + wait;
    if (!lk_.try_lock_until(deadline)) return;
    // Our own reader's shared hold is brief; another process's exclusive one
    // may not be (a stopped `agentd run`): polled, never waited for blindly.
    for (;;) {
        if (::flock(rt_.lock_fd_.get(), LOCK_EX | LOCK_NB) == 0) {
            held_ = true;
            rt_.ex_held_.store(true);
            return;
        }
        if (errno != EWOULDBLOCK && errno != EINTR) break;
        if (std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    lk_.unlock();
}
BpfRuntime::MapsLock::~MapsLock() {
    if (!held_) return;
    rt_.ex_held_.store(false);
    ::flock(rt_.lock_fd_.get(), LOCK_UN);
}
std::string BpfRuntime::MapsLock::refused() const {
    return "the lock of the pin root " + rt_.opts_.pin_root + " was held by " +
           describe_holders(flock_holders(rt_.opts_.pin_root)) + " for the " + std::to_string(wait_.count()) +
           " ms waited (another agentd sharing it, stopped or stuck?)";
}

// ---------------------------------------------------------------- start / stop

std::expected<std::unique_ptr<BpfRuntime>, SysError> BpfRuntime::start(RuntimeOptions opts) {
    std::unique_ptr<BpfRuntime> rt(new BpfRuntime());
    rt->opts_ = std::move(opts);
    rt->boot_offset_ns_ = audit::boot_to_realtime_offset_ns();
    if (auto r = ensure_bpffs(); !r) return std::unexpected(r.error());
    std::error_code ec;
    std::filesystem::create_directories(rt->opts_.pin_root, ec);
    if (ec) return std::unexpected(SysError{"mkdir -p " + rt->opts_.pin_root, ec.value()});
    rt->lock_fd_ = Fd(::open(rt->opts_.pin_root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!rt->lock_fd_) return std::unexpected(SysError::last("open(" + rt->opts_.pin_root + ", O_DIRECTORY)"));
    rt->consume_lock_fd_ = Fd(::open(rt->opts_.pin_root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!rt->consume_lock_fd_)
        return std::unexpected(SysError::last("open(" + rt->opts_.pin_root + ", O_DIRECTORY)"));
    {
        MapsLock lk(*rt, rt->opts_.start_lock_wait);
        if (!lk) return std::unexpected(SysError{lk.refused(), EWOULDBLOCK});
        LoaderOptions lo;
        lo.pin_root = rt->opts_.pin_root;
        lo.cgroup_parent = rt->opts_.cgroup_parent;
        lo.lsm = rt->opts_.lsm;
        lo.monitor = rt->opts_.monitor;
        lo.trace_syscalls = rt->opts_.trace_syscalls;
        lo.truth_check = rt->opts_.truth_check;
        lo.reuse_proof = rt->opts_.reuse_proof;
        lo.canary_exec = rt->opts_.canary_exec;
        BpfRuntime* self = rt.get();
        lo.foreign_event_sink = [self](const bw_event& e) { self->on_event(e); };
        auto loader = BpfLoader::start(std::move(lo));
        if (!loader) return std::unexpected(loader.error());
        rt->loader_ = std::move(*loader);
        const ProgramStatus* fo = rt->loader_->program("bw_file_open");
        rt->lsm_files_ = fo && fo->state == ProgState::Enforcing;
        rt->reap_dead_bindings();
    }
    if (auto st = rt->loader_->maps().stats()) rt->last_reserve_failures_ = st->ringbuf_reserve_failures;
    BpfRuntime* self = rt.get();
    auto reader = RingbufReader::create(rt->loader_->maps().events_fd(), [self](const bw_event& e) { self->on_event(e); });
    if (!reader) return std::unexpected(reader.error());
    rt->reader_ = std::move(*reader);
    rt->stop_fd_ = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!rt->stop_fd_) return std::unexpected(SysError::last("eventfd (BPF reader stop)"));
    rt->thread_ = std::thread([self] { self->reader_loop(); });
    return rt;
}

BpfRuntime::~BpfRuntime() {
    if (readers_ahead_.valid()) readers_ahead_.wait();  // it reads the loader's maps
    if (thread_.joinable()) {
        uint64_t one = 1;
        if (::write(stop_fd_.get(), &one, sizeof one) != sizeof one) spdlog::warn("bpf: reader stop write failed");
        thread_.join();
    }
}

void BpfRuntime::reap_dead_bindings() {
    PolicyMaps& maps = loader_->maps();
    auto all = maps.bindings();
    if (!all) {
        spdlog::warn("bpf: reap: {}", all.error().message());
        return;
    }
    auto mnt = cgroup2_mount();
    Fd mnt_fd(mnt ? ::open(mnt->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1);
    if (!mnt_fd) {
        spdlog::warn("bpf: reap skipped: cannot open the cgroup v2 mount ({})", std::strerror(errno));
        return;
    }
    // Handles of this mount's cgroups have the parent's type.
    auto parent = cgroup_handle(loader_->parent_cgroup());
    if (!parent) {
        spdlog::warn("bpf: reap skipped: cannot build cgroup handles ({})", parent.error().message());
        return;
    }
    std::set<uint32_t> live_slots;
    for (const auto& [cg, b] : *all) {
        if (cgroup_alive(mnt_fd.get(), parent->type, cg)) {
            live_slots.insert(b.policy_id);
            continue;
        }
        if (auto r = maps.unbind(cg); !r) {
            spdlog::warn("bpf: reap: {}", r.error().message());
            live_slots.insert(b.policy_id);
            continue;
        }
        reaped_bindings_.fetch_add(1);
    }
    if (auto r = maps.sync_slots(); !r) {
        spdlog::warn("bpf: reap: {}", r.error().message());
        return;
    }
    for (uint32_t slot = 0; slot < BW_MAX_POLICIES; ++slot) {
        if (!maps.slot_used(slot) || live_slots.contains(slot)) continue;
        if (auto r = maps.free(slot); !r)
            spdlog::warn("bpf: reap slot {}: {}", slot, r.error().message());
        else
            reaped_slots_.fetch_add(1);
    }
    if (reaped_bindings_ || reaped_slots_)
        spdlog::warn("bpf: removed {} binding(s) of cgroups that no longer exist and {} policy slot(s) only they used",
                     reaped_bindings_.load(), reaped_slots_.load());
    // Usage counts of runs whose binding is gone (their process ended first).
    if (auto r = maps.drop_unbound_usage(); !r) spdlog::warn("bpf: reap: {}", r.error().message());
    else if (*r) spdlog::info("bpf: removed the usage counts of {} run(s) no longer bound", *r);
}

// ---------------------------------------------------------------- events

void BpfRuntime::on_event(const bw_event& ev) {
    events_.fetch_add(1, std::memory_order_relaxed);
    RunContext ctx;  // the run, with the bundle of the epoch the event names
    std::optional<uint64_t> epoch_version;
    bool mine = false;
    {
        std::lock_guard lk(ctx_mu_);
        if (auto it = runs_.find(ev.cgroup_id); it != runs_.end()) {
            mine = true;
            ctx.task_id = it->second.run.task_id;
            ctx.run_id = it->second.run.run_id;
            ctx.tool = it->second.run.tool;
            ctx.container = it->second.run.container;
            for (const auto& e : it->second.epochs)
                if (e.kernel_version == ev.policy_version) {
                    ctx.bundle = e.bundle;
                    epoch_version = e.policy_version;
                }
        }
    }
    audit::AuditRecord rec;
    if (mine) {
        rec = audit::decision_from_event(ev, ctx, boot_offset_ns_);
    } else {
        // A cgroup bound by another process sharing these maps (or the
        // canary): its binding names the task and run.
        foreign_.fetch_add(1, std::memory_order_relaxed);
        if (loader_) {
            if (auto b = loader_->maps().binding(ev.cgroup_id)) {
                ctx.task_id = b->task_id;
                ctx.run_id = b->run_id;
            }
        }
        rec = audit::decision_from_event(ev, ctx, boot_offset_ns_);
        auto d = rec.detail.empty() ? nlohmann::json::object() : nlohmann::json::parse(rec.detail, nullptr, false);
        if (!d.is_object()) d = nlohmann::json::object();
        d["cgroup_id"] = ev.cgroup_id;
        d["bound_by"] = "another process sharing " + opts_.pin_root;
        rec.detail = d.dump();
    }
    if (epoch_version) rec.policy_version = *epoch_version;
    decisions_.fetch_add(1, std::memory_order_relaxed);
    if (opts_.sink) opts_.sink(std::move(rec));
}

std::vector<BpfRuntime::Reader> BpfRuntime::other_readers() const {
    std::vector<Reader> out;
    bpf_map_info info{};
    uint32_t len = sizeof info;
    if (bpf_obj_get_info_by_fd(loader_->maps().events_fd(), &info, &len) != 0) return out;
    // Children hold copies of this process's descriptors only until they
    // close them (canaries, sandboxes): not readers of their own.
    for (auto& h : other_map_holders(info.id, false)) out.push_back({h.pid, std::move(h.comm)});
    return out;
}

void BpfRuntime::scan_readers_ahead() {
    std::lock_guard lk(readers_mu_);
    if (readers_ahead_.valid()) return;
    readers_ahead_ = std::async(std::launch::async, [this] {
        auto readers = other_readers();
        return ReadersSeen{std::chrono::steady_clock::now(), std::move(readers)};
    });
}

std::vector<std::string> BpfRuntime::reader_warnings() const {
    std::lock_guard lk(readers_mu_);
    auto said = [this](const std::vector<Reader>& readers) {
        readers_warnings_.clear();
        for (const auto& r : readers)
            readers_warnings_.push_back("bpf: the ring buffer is also read by pid " + std::to_string(r.pid) + " (" +
                                        r.comm + "); events of this run it read are recorded there "
                                        "(detail.bound_by), so this report may lack them");
    };
    if (readers_ahead_.valid()) {
        auto [at, readers] = readers_ahead_.get();
        said(readers);
        readers_at_ = at;
    }
    auto now = std::chrono::steady_clock::now();
    if (readers_at_ != std::chrono::steady_clock::time_point{} && now - readers_at_ < std::chrono::seconds(1))
        return readers_warnings_;
    said(other_readers());
    readers_at_ = now;
    return readers_warnings_;
}

void BpfRuntime::check_drops() {
    if (auto st = loader_->maps().stats()) {
        uint64_t now = st->ringbuf_reserve_failures;
        if (now > last_reserve_failures_) {
            uint64_t d = now - last_reserve_failures_;
            reserve_failures_.fetch_add(d);
            if (opts_.on_drops) opts_.on_drops("bpf ring buffer (reserve failures)", d);
        }
        last_reserve_failures_ = now;
    }
    if (reader_ && reader_->malformed() > reported_malformed_) {
        uint64_t d = reader_->malformed() - reported_malformed_;
        reported_malformed_ = reader_->malformed();
        if (opts_.on_drops) opts_.on_drops("bpf ring buffer (malformed records)", d);
    }
}

bool BpfRuntime::drain() {
    std::lock_guard lk(reader_mu_);
    // The ring buffer has one consumer position for every process: while
    // another process holds the pin root exclusively (its truth check waits
    // for its canary's events), this reader stands back. Under our own
    // exclusive lock (release() draining a run) it consumes directly.
    bool shared = false;
    if (!ex_held_.load()) {
        if (::flock(consume_lock_fd_.get(), LOCK_SH | LOCK_NB) != 0) {
            note_held_back();
            check_drops();  // what the kernel drops meanwhile is a gap now, not later
            return false;
        }
        shared = true;
    }
    note_reading();
    if (auto r = reader_->consume(); !r) spdlog::warn("bpf: {}", r.error().message());
    if (shared) ::flock(consume_lock_fd_.get(), LOCK_UN);
    check_drops();
    return true;
}

namespace {
int64_t steady_ns() { return steady_now_ns(); }
// A hold-back shorter than this (a peer's truth check, a map change) is routine.
constexpr int64_t kNotableHoldBackNs = 100'000'000;
}  // namespace

void BpfRuntime::note_held_back() {
    if (blocked_since_ns_.load() != 0) return;
    std::string by = describe_holders(flock_holders(opts_.pin_root));
    std::lock_guard lk(block_mu_);
    blocked_by_ = std::move(by);
    blocked_since_ns_.store(steady_ns());
}

void BpfRuntime::note_reading() {
    int64_t since = blocked_since_ns_.load();
    if (since == 0) return;
    int64_t took = steady_ns() - since;
    blocked_since_ns_.store(0);
    if (took < kNotableHoldBackNs) return;
    reader_blocks_.fetch_add(1);
    std::lock_guard lk(block_mu_);
    last_block_ = "held back by " + blocked_by_ + " for " + std::to_string(took / 1'000'000) + " ms";
    spdlog::warn("bpf: the ring buffer reader was {}", last_block_);
}

nlohmann::json BpfRuntime::reader_status() const {
    int64_t since = blocked_since_ns_.load();
    std::lock_guard lk(block_mu_);
    nlohmann::json j{{"state", since ? "blocked" : "reading"}, {"hold_backs", reader_blocks_.load()}};
    if (since) {
        j["blocked_ms"] = (steady_ns() - since) / 1'000'000;
        j["by"] = blocked_by_;
    }
    if (!last_block_.empty()) j["last_hold_back"] = last_block_;
    return j;
}

void BpfRuntime::retry_deferred() {
    {
        std::lock_guard lk(deferred_mu_);
        if (deferred_.empty()) return;
    }
    MapsLock ml(*this, std::chrono::milliseconds(0));
    if (!ml) return;
    std::vector<Deferred> todo;
    {
        std::lock_guard lk(deferred_mu_);
        todo.swap(deferred_);
    }
    for (const auto& d : todo) {
        if (!d.unbound)
            if (auto r = loader_->maps().unbind(d.cgid); !r) spdlog::warn("bpf: {}", r.error().message());
        for (uint32_t s : d.slots)
            if (auto r = loader_->maps().free(s); !r) spdlog::warn("bpf: free slot {}: {}", s, r.error().message());
        {
            std::lock_guard cl(ctx_mu_);
            runs_.erase(d.cgid);
        }
        spdlog::info("bpf: deferred release of cgroup {} done", d.cgid);
    }
}

void BpfRuntime::reader_loop() {
    Fd ep(::epoll_create1(EPOLL_CLOEXEC));
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.u32 = 1;
    ::epoll_ctl(ep.get(), EPOLL_CTL_ADD, reader_->epoll_fd(), &e);
    e.data.u32 = 2;
    ::epoll_ctl(ep.get(), EPOLL_CTL_ADD, stop_fd_.get(), &e);
    for (;;) {
        epoll_event got[2];
        int n = ::epoll_wait(ep.get(), got, 2, opts_.poll_interval_ms);
        bool stop = false;
        for (int i = 0; i < n; ++i)
            if (got[i].data.u32 == 2) stop = true;
        if (!drain() && !stop) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        else retry_deferred();
        if (stop) return;
    }
}

// ---------------------------------------------------------------- policy

bool BpfRuntime::net_enforcing() const {
    for (const char* p : kNetPrograms) {
        const ProgramStatus* s = loader_->program(p);
        if (!s || s->state != ProgState::Enforcing) return false;
    }
    return true;
}

std::string BpfRuntime::syscall_counting_gap() const {
    // sys_enter counts; the exec tracepoint starts the count at the tool's exec.
    for (const char* name : {"bw_sys_enter", "bw_proc_exec"}) {
        const ProgramStatus* p = loader_->program(name);
        if (!p) return std::string("the monitor object has no program ") + name;
        if (p->state != ProgState::Observing)
            return p->section + ": " + (p->reason.empty() ? std::string(to_string(p->state)) : p->reason);
    }
    return "";
}

std::map<std::string, std::string> BpfRuntime::layer_states() const {
    std::map<std::string, std::string> out{{"sock_addr", ""}, {"bpf_lsm", ""}};
    bool any_lsm = false;
    for (const auto& p : loader_->programs()) {
        std::string layer = p.object == "lsm" ? "bpf_lsm" : p.object == "sock_addr" ? "sock_addr" : "";
        if (layer.empty()) continue;
        any_lsm |= layer == "bpf_lsm";
        if (p.state != ProgState::Enforcing && out[layer].empty()) out[layer] = p.section + ": " + state_text(p);
    }
    if (!any_lsm) out["bpf_lsm"] = "no BPF LSM program loaded";
    out["sock_unix"] = unix_enforcing() ? "" : unix_state();
    return out;
}

bool BpfRuntime::unix_enforcing() const {
    for (const char* p : kUnixPrograms) {
        const ProgramStatus* s = loader_->program(p);
        if (!s || s->state != ProgState::Enforcing) return false;
    }
    return true;
}

std::string BpfRuntime::unix_state() const {
    if (unix_enforcing()) return "enforcing";
    std::string why;
    for (const char* p : kUnixPrograms)
        if (const ProgramStatus* s = loader_->program(p); !s || s->state != ProgState::Enforcing)
            why += (why.empty() ? "" : "; ") + (s ? s->line() : std::string(p) + ": not loaded");
    return "unavailable: " + why;
}

std::expected<BpfRuntime::Epoch, BindError> BpfRuntime::load_epoch(const policy::Bundle& bundle,
                                                                  uint64_t policy_version) {
    PolicyMaps& maps = loader_->maps();
    policy::BpfTables tables = bundle.bpf;
    // Without a BPF LSM file program nothing reads bw_file_rules: writing them
    // would only stat paths for no effect (and fail on deny rules of paths
    // that do not exist yet).
    if (!lsm_files_) tables.files.clear();
    if (auto r = maps.sync_slots(); !r) return std::unexpected(kernel_error(r.error()));
    auto rep = maps.load(tables);
    if (!rep) return std::unexpected(kernel_error(rep.error(), "policy load: "));
    auto b = std::make_shared<const policy::Bundle>(bundle);
    return Epoch{rep->handle.version, policy_version, rep->handle.slot, std::move(b), std::move(rep->absent_denies)};
}

std::string BpfRuntime::in_force() const {
    std::vector<std::string> enforcing;
    std::map<std::string, std::vector<std::string>> unavailable;  // reason -> sections
    for (const auto& p : loader_->programs()) {
        if (p.state == ProgState::Enforcing || p.state == ProgState::Observing)
            enforcing.push_back(p.section);
        else
            unavailable[std::string(to_string(p.state)) + ": " + p.reason].push_back(p.section);
    }
    std::string s = "enforcing/observing: ";
    for (size_t i = 0; i < enforcing.size(); ++i) s += (i ? ", " : "") + enforcing[i];
    if (enforcing.empty()) s += "none";
    for (const auto& [why, secs] : unavailable) {
        s += "; " + why + " (";
        for (size_t i = 0; i < secs.size(); ++i) s += (i ? ", " : "") + secs[i];
        s += ")";
    }
    if (loader_->proof_reused()) s += "; verdicts of the " + loader_->proof();
    return s;
}

nlohmann::json BpfRuntime::status() const {
    nlohmann::json progs = nlohmann::json::object();
    size_t good = 0;
    for (const auto& p : loader_->programs()) {
        progs[p.section] = state_text(p);
        if (p.state == ProgState::Enforcing || p.state == ProgState::Observing) ++good;
    }
    size_t bound;
    {
        std::lock_guard lk(ctx_mu_);
        bound = runs_.size();
    }
    auto c = counters();
    return {{"state", good == loader_->programs().size() ? "enforcing" : good ? "partial" : "unavailable"},
            {"network_rules", net_enforcing() ? "enforcing"
                                              : "unavailable: cgroup connect/sendmsg programs not proven by the canary"},
            {"unix_sockets", unix_state()},
            {"pin_root", opts_.pin_root},
            {"build", bpf_build_id()},
            {"proof", loader_->proof()},
            {"cgroup_parent", loader_->parent_cgroup()},
            {"programs", std::move(progs)},
            {"runs_bound", bound},
            {"events", c.events},
            {"decisions", c.decisions},
            {"foreign_events", c.foreign},
            {"drops", {{"reserve_failures", c.reserve_failures}, {"malformed", c.malformed}}},
            {"reader", reader_status()},
            {"deferred_releases", c.deferred_releases},
            {"reaped_at_start", {{"bindings", c.reaped_bindings}, {"slots", c.reaped_slots}}}};
}

BpfRuntime::Counters BpfRuntime::counters() const {
    Counters c;
    c.events = events_.load();
    c.decisions = decisions_.load();
    c.foreign = foreign_.load();
    c.malformed = reported_malformed_;
    c.reserve_failures = reserve_failures_.load();
    c.reaped_bindings = reaped_bindings_.load();
    c.reaped_slots = reaped_slots_.load();
    c.reader_blocks = reader_blocks_.load();
    c.deferred_releases = deferred_total_.load();
    return c;
}

std::expected<std::shared_ptr<Attachment>, BindError> BpfRuntime::attach(const policy::Bundle& bundle,
                                                                         RunContext run) {
    if (bundle.network.mode == policy::NetMode::Rules && !net_enforcing()) {
        std::string why;
        for (const char* p : kNetPrograms)
            if (const ProgramStatus* s = loader_->program(p); !s || s->state != ProgState::Enforcing)
                why += (why.empty() ? "" : "; ") + (s ? s->line() : std::string(p) + ": not loaded");
        return std::unexpected(BindError{BindError::Code::NetProgramsDown,
                                         "network rules need the cgroup connect/sendmsg programs enforcing: " + why});
    }
    std::shared_ptr<Attachment> a(new Attachment());
    a->rt_ = this;
    a->policy_version_ = run.policy_version;
    run.bundle.reset();
    a->run_ = std::move(run);
    a->bundle_ = std::make_shared<const policy::Bundle>(bundle);
    return a;
}

std::expected<std::shared_ptr<Attachment>, BindError> BpfRuntime::adopt(const std::string& cgroup_path,
                                                                        const policy::Bundle& bundle, RunContext run) {
    auto id = bpf::cgroup_id(cgroup_path);
    if (!id) return std::unexpected(kernel_error(id.error()));
    std::optional<bw_binding> found;
    {
        MapsLock ml(*this);
        if (!ml) return std::unexpected(BindError{BindError::Code::LockHeld, ml.refused()});
        auto all = loader_->maps().bindings();
        if (!all) return std::unexpected(kernel_error(all.error()));
        for (const auto& [cg, b] : *all)
            if (cg == *id && b.run_id == run.run_id && b.task_id == run.task_id) found = b;
    }
    if (!found) {
        auto a = attach(bundle, std::move(run));
        if (!a) return a;
        auto bound = (*a)->bind(cgroup_path);
        if (!bound) return std::unexpected(bound.error());
        return a;
    }
    std::shared_ptr<Attachment> a(new Attachment());
    a->rt_ = this;
    a->policy_version_ = run.policy_version;
    a->cgid_ = *id;
    a->slots_ = {found->policy_id};
    {
        std::lock_guard cl(ctx_mu_);
        auto& bound = runs_[*id];
        bound.run = run;
        bound.run.bundle.reset();
        bound.epochs = {Epoch{found->policy_version, run.policy_version, found->policy_id,
                              std::make_shared<const policy::Bundle>(bundle)}};
    }
    if (auto st = loader_->maps().stats()) a->reserve_failures_at_bind_ = st->ringbuf_reserve_failures;
    a->blocks_at_bind_ = reader_blocks_.load();
    a->run_ = std::move(run);
    a->run_.bundle.reset();
    return a;
}

// ---------------------------------------------------------------- attachment

Attachment::~Attachment() { release(); }

uint64_t Attachment::cgroup_id() const {
    std::lock_guard lk(mu_);
    return cgid_;
}

std::expected<std::optional<bw_run_usage>, SysError> Attachment::take_usage() {
    uint64_t cg = cgroup_id();
    if (!cg) return std::nullopt;
    return rt_->loader_->maps().take_usage(cg);
}

std::function<std::expected<std::string, std::string>(int, const std::string&)> Attachment::hook() {
    return [this](int, const std::string& path) -> std::expected<std::string, std::string> {
        auto r = bind(path);
        if (!r) return std::unexpected(std::move(r.error().message));
        return std::move(*r);
    };
}

std::expected<std::string, BindError> Attachment::bind(const std::string& cgroup_path) {
    using Code = BindError::Code;
    std::lock_guard lk(mu_);
    if (released_) return std::unexpected(BindError{Code::Ended, "the run's BPF binding was already released"});
    if (cgid_)
        return std::unexpected(
            BindError{Code::AlreadyBound, "the run is already bound (cgroup " + std::to_string(cgid_) + ")"});
    const std::string& parent = rt_->cgroup_parent();
    if (!cgroup_path.starts_with(parent + "/"))
        return std::unexpected(BindError{Code::CgroupOutside, "run cgroup " + cgroup_path +
                                                                  " is not below the BPF cgroup parent " + parent +
                                                                  ": the cgroup programs attached there would not judge it"});
    auto id = bpf::cgroup_id(cgroup_path);
    if (!id) return std::unexpected(kernel_error(id.error()));
    BpfRuntime::MapsLock ml(*rt_);
    if (!ml) return std::unexpected(BindError{Code::LockHeld, ml.refused()});
    auto ep = rt_->load_epoch(*bundle_, policy_version_);
    if (!ep) return std::unexpected(ep.error());
    {
        std::lock_guard cl(rt_->ctx_mu_);
        auto& bound = rt_->runs_[*id];
        bound.run = run_;
        bound.epochs = {*ep};
    }
    PolicyMaps& maps = rt_->loader_->maps();
    // A profile's run is counted from its first instruction (no entry: the
    // run's report says it was not counted).
    if (bundle_->profile.enabled)
        if (auto r = maps.start_usage(*id); !r) spdlog::warn("bpf: run {}: {}", run_.run_id, r.error().message());
    // Bound in setup: the sandbox's own code runs in the cgroup until the
    // tool's exec, which the LSM judges and which arms the binding.
    if (auto r = maps.bind(*id, PolicyHandle{ep->slot, ep->kernel_version}, run_.task_id, run_.run_id,
                           BW_BIND_SETUP);
        !r) {
        (void)maps.free(ep->slot);
        std::lock_guard cl(rt_->ctx_mu_);
        rt_->runs_.erase(*id);
        return std::unexpected(kernel_error(r.error()));
    }
    cgid_ = *id;
    if (auto st = maps.stats()) reserve_failures_at_bind_ = st->ringbuf_reserve_failures;
    blocks_at_bind_ = rt_->reader_blocks_.load();
    slots_.push_back(ep->slot);
    bundle_.reset();
    std::string absent;
    for (const auto& a : ep->absent_denies) absent += (absent.empty() ? "" : ", ") + a;
    return "cgroup " + std::to_string(cgid_) + " bound to policy slot " + std::to_string(ep->slot) + " (version " +
           std::to_string(ep->kernel_version) + ", " +
           (ep->bundle->bpf.header.mode == BW_MODE_AUDIT ? "audit mode" : "enforce mode") + ") below " + parent +
           "; " + rt_->in_force() +
           (absent.empty() ? "" : "; denies on paths absent at launch that cannot appear there: " + absent);
}

std::expected<void, BindError> Attachment::retarget(const RunContext& run) {
    std::lock_guard lk(mu_);
    if (released_) return std::unexpected(BindError{BindError::Code::Ended, "the binding was released"});
    if (!cgid_) {
        run_ = run;
        return {};
    }
    BpfRuntime::MapsLock ml(*rt_);
    if (!ml) return std::unexpected(BindError{BindError::Code::LockHeld, ml.refused()});
    PolicyHandle in_force{};
    {
        std::lock_guard cl(rt_->ctx_mu_);
        auto it = rt_->runs_.find(cgid_);
        if (it == rt_->runs_.end() || it->second.epochs.empty())
            return std::unexpected(BindError{BindError::Code::Ended, "the cgroup's binding is gone"});
        in_force = PolicyHandle{it->second.epochs.back().slot, it->second.epochs.back().kernel_version};
        RunContext next = run;
        next.bundle = it->second.run.bundle;  // each epoch names its own bundle
        it->second.run = next;
    }
    if (auto r = rt_->loader_->maps().bind(cgid_, in_force, run.task_id, run.run_id); !r)
        return std::unexpected(kernel_error(r.error()));
    run_ = run;
    return {};
}

std::expected<void, BindError> Attachment::rebind(const policy::Bundle& bundle, uint64_t policy_version) {
    std::lock_guard lk(mu_);
    if (released_) return std::unexpected(BindError{BindError::Code::Ended, "the run has ended"});
    if (!cgid_) {  // not bound yet: the hook binds the newest epoch
        bundle_ = std::make_shared<const policy::Bundle>(bundle);
        policy_version_ = policy_version;
        return {};
    }
    BpfRuntime::MapsLock ml(*rt_);
    if (!ml) return std::unexpected(BindError{BindError::Code::LockHeld, ml.refused()});
    auto ep = rt_->load_epoch(bundle, policy_version);
    if (!ep) return std::unexpected(ep.error());
    {
        std::lock_guard cl(rt_->ctx_mu_);
        rt_->runs_[cgid_].epochs.push_back(*ep);
    }
    PolicyMaps& maps = rt_->loader_->maps();
    // The switch: one update of the cgroup's bw_sandboxes value (slot and
    // version together), armed (no BW_BIND_SETUP: a rebind never reopens the
    // setup window, even if it lands before the tool's exec).
    if (auto r = maps.bind(cgid_, PolicyHandle{ep->slot, ep->kernel_version}, run_.task_id, run_.run_id); !r) {
        (void)maps.free(ep->slot);
        return std::unexpected(kernel_error(r.error()));
    }
    // Earlier epochs' slots are retired, not freed: a program that read the
    // old binding just before the switch completes against an intact slot.
    // BPF programs here never sleep, so a slot retired for kSlotGrace is
    // no longer read by anyone. Their bundles stay for the events still in
    // the buffer.
    auto now = std::chrono::steady_clock::now();
    std::erase_if(retired_, [&](const auto& r) {
        if (now - r.second < kSlotGrace) return false;
        if (auto f = maps.free(r.first); !f) spdlog::warn("bpf: free slot {}: {}", r.first, f.error().message());
        return true;
    });
    for (uint32_t s : slots_) retired_.emplace_back(s, now);
    slots_ = {ep->slot};
    policy_version_ = policy_version;
    return {};
}

void Attachment::keep_bound() {
    std::lock_guard lk(mu_);
    released_ = true;
}

void Attachment::release() {
    std::lock_guard lk(mu_);
    if (released_) return;
    released_ = true;
    if (!cgid_) return;
    std::vector<uint32_t> slots = slots_;
    for (const auto& [s, at] : retired_) slots.push_back(s);
    slots_.clear();
    retired_.clear();
    auto defer = [&](bool unbound, const std::string& why) {
        spdlog::warn("bpf: run {} (cgroup {}): {}; its release is retried until the lock is free", run_.run_id, cgid_, why);
        rt_->deferred_total_.fetch_add(1);
        std::lock_guard dl(rt_->deferred_mu_);
        rt_->deferred_.push_back({cgid_, std::move(slots), unbound});
    };
    {
        BpfRuntime::MapsLock ml(*rt_);
        if (!ml) return defer(false, ml.refused());
        if (auto r = rt_->loader_->maps().unbind(cgid_); !r) spdlog::warn("bpf: {}", r.error().message());
    }
    // The run's processes are gone: everything they caused is in the buffer.
    // Another process's exclusive hold (a truth check, a map change) is short.
    for (int i = 0; i < 1000 && !rt_->drain(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    {
        BpfRuntime::MapsLock ml(*rt_);
        if (!ml) return defer(true, ml.refused());
        for (uint32_t s : slots)
            if (auto r = rt_->loader_->maps().free(s); !r) spdlog::warn("bpf: free slot {}: {}", s, r.error().message());
    }
    std::lock_guard cl(rt_->ctx_mu_);
    rt_->runs_.erase(cgid_);
}

std::vector<std::string> Attachment::warnings() const {
    std::vector<std::string> out = rt_->reader_warnings();
    uint64_t at_bind, blocks_at_bind;
    {
        std::lock_guard lk(mu_);
        if (!cgid_) return out;
        at_bind = reserve_failures_at_bind_;
        blocks_at_bind = blocks_at_bind_;
    }
    auto st = rt_->loader_->maps().stats();
    if (!st || st->ringbuf_reserve_failures <= at_bind) return out;
    std::string why = "its reader did not keep up";
    if (rt_->blocked_since_ns_.load()) {
        std::lock_guard bl(rt_->block_mu_);
        why = "its reader is held back by " + rt_->blocked_by_;
    } else if (rt_->reader_blocks_.load() > blocks_at_bind) {
        std::lock_guard bl(rt_->block_mu_);
        why = "its reader was " + rt_->last_block_;
    }
    out.push_back("bpf: " + std::to_string(st->ringbuf_reserve_failures - at_bind) +
                  " event(s) of the host's sandboxes could not be queued while this run was bound: the ring buffer "
                  "was full (" + why + "); a gap record counts them, so this run's decisions may be incomplete");
    return out;
}

}  // namespace bulwark::bpf
