#include "kaudit/kernel_audit.h"

#include <linux/audit.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <seccomp.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <spdlog/spdlog.h>

#include "bulwark/policy/bundle.h"
#include "bulwark/policy/cbpf.h"
#include "bulwark/policy/evaluator.h"
#include "bulwark/policy/seccomp.h"
#include "common/clock.h"

namespace bulwark {
namespace {

int64_t mono_ns() { return steady_now_ns(); }

std::string errstr(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

struct Blocker {
    std::string_view name;
    uint16_t op;
    uint32_t rights;  // BW_FS_* for explain (record_operation.cpp)
};
constexpr Blocker kBlockers[] = {
    {"fs.execute", BW_OP_EXEC, BW_FS_EXEC},
    {"fs.write_file", BW_OP_FILE_OPEN, BW_FS_WRITE},
    {"fs.read_file", BW_OP_FILE_OPEN, BW_FS_READ},
    {"fs.read_dir", BW_OP_FILE_OPEN, BW_FS_READ},
    {"fs.remove_dir", BW_OP_FILE_UNLINK, BW_FS_REMOVE},
    {"fs.remove_file", BW_OP_FILE_UNLINK, BW_FS_REMOVE},
    {"fs.make_char", BW_OP_FILE_CREATE, BW_FS_CREATE},
    {"fs.make_dir", BW_OP_MKDIR, BW_FS_CREATE},
    {"fs.make_reg", BW_OP_FILE_CREATE, BW_FS_CREATE},
    {"fs.make_sock", BW_OP_FILE_CREATE, BW_FS_CREATE},
    {"fs.make_fifo", BW_OP_FILE_CREATE, BW_FS_CREATE},
    {"fs.make_block", BW_OP_FILE_CREATE, BW_FS_CREATE},
    {"fs.make_sym", BW_OP_FILE_CREATE, BW_FS_CREATE},
    {"fs.refer", BW_OP_FILE_RENAME, BW_FS_CREATE},
    {"fs.truncate", BW_OP_FILE_TRUNCATE, BW_FS_WRITE},
    {"fs.ioctl_dev", BW_OP_FILE_OPEN, BW_FS_WRITE},
    {"fs.change_topology", BW_OP_MOUNT, 0},
    {"net.bind_tcp", BW_OP_BIND, 0},
    {"net.connect_tcp", BW_OP_CONNECT, 0},
    {"scope.abstract_unix_socket", BW_OP_CONNECT, 0},
    {"scope.signal", BW_OP_SIGNAL, 0},
};

}  // namespace

std::string syscall_name(uint32_t audit_arch, int64_t nr) {
    if (nr < 0 || nr > 0xffff) return "";
    // libseccomp's arch tokens are the AUDIT_ARCH_* values.
    char* n = seccomp_syscall_resolve_num_arch(audit_arch, static_cast<int>(nr));
    if (!n) return "";
    std::string s(n);
    ::free(n);
    return s;
}

namespace {

// The kernel's SECCOMP record names the syscall and the action, not the
// action's data (the errno) nor the arguments. The run's filter, asked about
// the same (arch, nr), gives both the errno and, through the reference
// evaluator, the deciding rule; they are taken only when its answer cannot
// depend on what the record lacks (the filter read no argument or instruction
// pointer on the way) and its action is the one the kernel logged. Otherwise
// the row says the outcome turned on the arguments.
void name_seccomp_rule(audit::AuditRecord& r, nlohmann::json& detail, const kaudit::KernelDenial& d,
                       const std::string& name, const RunContext& ctx) {
    if (!ctx.bundle || ctx.bundle->seccomp.program.empty() || d.syscall < 0 || name.empty()) return;
    seccomp_data q{};
    q.nr = static_cast<int>(d.syscall);
    q.arch = d.arch;
    bool read_more = false;
    uint32_t ret = policy::run_seccomp_filter(ctx.bundle->seccomp.program, q, &read_more);
    if (read_more || policy::seccomp_ret_action(ret) != (d.action & SECCOMP_RET_ACTION_FULL)) {
        detail["judged"] = "the filter's answer depends on the arguments, which the kernel's record does not carry";
        return;
    }
    if (policy::seccomp_ret_action(ret) == SECCOMP_RET_ERRNO) r.err = static_cast<int32_t>(policy::seccomp_ret_data(ret));
    policy::Operation op;
    op.kind = policy::OpKind::Syscall;
    op.syscall = name;
    op.arch = d.arch;
    auto dec = policy::evaluate(*ctx.bundle, op);
    if (dec.rule_id == BW_NO_RULE) return;
    r.rule_id = dec.rule_id;
    if (const auto* rule = ctx.bundle->rule(dec.rule_id)) {
        r.rule_file = rule->loc.file;
        r.rule_line = rule->loc.line;
        r.rule_text = rule->text;
    }
}

}  // namespace

audit::AuditRecord kernel_decision_record(const kaudit::KernelDenial& d, const RunContext& ctx) {
    audit::AuditRecord r;
    r.kind = audit::RecordKind::Decision;
    r.ts_ns = d.ts_ns;
    r.task_id = ctx.task_id;
    r.run_id = ctx.run_id;
    r.tool = ctx.tool;
    r.policy_version = ctx.policy_version;
    r.pid = d.pid;
    r.comm = d.comm;
    r.decision = BW_DECISION_DENY;
    std::string sc = d.syscall >= 0 ? syscall_name(d.arch, d.syscall) : "";
    nlohmann::json detail{{"source", "kernel_audit"}, {"serial", d.serial}};
    if (!d.exe.empty()) detail["exe"] = d.exe;
    if (d.syscall >= 0) {
        detail["syscall"] = sc.empty() ? nlohmann::json(d.syscall) : nlohmann::json(sc);
        detail["syscall_nr"] = d.syscall;
    }
    if (d.ppid) detail["ppid"] = d.ppid;
    if (!d.proctitle.empty()) detail["proctitle"] = d.proctitle;
    if (ctx.container) detail["container"] = *ctx.container;
    if (d.layer == kaudit::KernelDenial::Layer::Seccomp) {
        r.layer = BW_LAYER_SECCOMP;
        r.op = BW_OP_SYSCALL;
        r.object = sc.empty() ? "syscall " + std::to_string(d.syscall) : sc;
        std::string_view action = kaudit::seccomp_action_name(d.action);
        detail["action"] = action;
        if (action == "log") r.decision = BW_DECISION_AUDIT;  // SECCOMP_RET_LOG: allowed, logged
        if (d.signal) detail["signal"] = d.signal;
        detail["arch"] = d.arch;
        r.rule_text = "seccomp filter of the run: " + std::string(action);
        // A call through a compat ABI (i386 via int $0x80): say so, and
        // whether the run's rules accept that ABI at all.
        if (auto abi = policy::arch_name(d.arch); !abi.empty() && abi != "native") {
            detail["abi"] = abi;
            if (ctx.bundle && !ctx.bundle->seccomp.arches.empty() &&
                std::ranges::find(ctx.bundle->seccomp.arches, d.arch) == ctx.bundle->seccomp.arches.end()) {
                const std::string why = "the rules do not accept the " + std::string(abi) +
                                        " ABI (syscalls.architectures): each of its calls answers the violation "
                                        "action, a deny rule its own";
                detail["abi_refused"] = why;
                r.rule_text += " (" + why + ")";
            }
        }
        name_seccomp_rule(r, detail, d, sc, ctx);
    } else {
        r.layer = BW_LAYER_LANDLOCK;
        r.object = d.object;
        std::string_view first = d.blockers;
        if (auto c = first.find(','); c != std::string_view::npos) first = first.substr(0, c);
        uint32_t rights = 0;
        r.op = BW_OP_NONE;
        for (const auto& b : kBlockers)
            if (b.name == first) {
                r.op = b.op;
                rights = b.rights;
            }
        detail["access"] = d.blockers;
        if (rights) detail["rights"] = rights;
        char dom[32];
        std::snprintf(dom, sizeof dom, "%llx", static_cast<unsigned long long>(d.domain));
        detail["domain"] = dom;
        r.err = d.exit && *d.exit < 0 ? static_cast<int32_t>(-*d.exit) : EACCES;
        r.rule_text = "Landlock ruleset of the run: no rule grants " + d.blockers;
    }
    r.detail = detail.dump();
    return r;
}

std::expected<std::unique_ptr<KernelAuditReader>, std::string> KernelAuditReader::start(KernelAuditOptions opts) {
    if (!opts.resolve || !opts.sink) return std::unexpected("kernel audit: resolver and sink are required");
    std::unique_ptr<KernelAuditReader> r(new KernelAuditReader(std::move(opts)));
    r->mc_ = Fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_AUDIT));
    if (!r->mc_) return std::unexpected(errstr("socket(AF_NETLINK, NETLINK_AUDIT)"));
    int sz = r->opts_.rcvbuf_bytes;
    if (::setsockopt(r->mc_.get(), SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz) != 0)
        ::setsockopt(r->mc_.get(), SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    sockaddr_nl sa{};
    sa.nl_family = AF_NETLINK;
    sa.nl_groups = 1u << (AUDIT_NLGRP_READLOG - 1);
    if (::bind(r->mc_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
        return std::unexpected(errstr("bind(NETLINK_AUDIT, AUDIT_NLGRP_READLOG) (needs CAP_AUDIT_READ)"));
    r->ctl_ = Fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT));
    if (!r->ctl_) return std::unexpected(errstr("socket(AF_NETLINK, NETLINK_AUDIT) for control"));
    timeval tv{1, 0};
    ::setsockopt(r->ctl_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    r->wake_ = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!r->wake_) return std::unexpected(errstr("eventfd"));

    audit_status st{};
    if (auto g = r->control(AUDIT_GET, nullptr, 0, &st, sizeof st); !g)
        return std::unexpected("kernel audit: AUDIT_GET: " + g.error());
    r->kernel_lost_ = st.lost;
    r->kernel_lost_at_start_ = st.lost;
    r->backlog_limit_ = st.backlog_limit;
    if (st.enabled == 0) {
        if (!r->opts_.enable_audit) {
            r->enabled_state_ = "off (not enabled: enable_audit=false); Landlock denials are not logged";
        } else {
            audit_status set{};
            set.mask = AUDIT_STATUS_ENABLED;
            set.enabled = 1;
            if (auto s = r->control(AUDIT_SET, &set, sizeof set, nullptr, 0); !s) {
                r->enabled_state_ = "off, and AUDIT_SET enabled=1 failed (" + s.error() +
                                    "); Landlock denials are not logged";
            } else {
                r->enabled_state_ = "on (was off; enabled by agentd with AUDIT_SET enabled=1)";
                r->audit_on_ = true;
                spdlog::warn("kernel audit was off; agentd enabled it (AUDIT_SET enabled=1) so Landlock denials are logged");
            }
        }
    } else {
        r->enabled_state_ = st.enabled == 2 ? "on (locked)" : "on";
        r->audit_on_ = true;
    }
    // Unique per reader: several readers (in one process or several) see
    // each other's marks.
    static std::atomic<unsigned> instances{0};
    char tag[64];
    std::snprintf(tag, sizeof tag, "bulwark-barrier=%d.%u:", static_cast<int>(::getpid()), instances++);
    r->barrier_tag_ = tag;
    r->thread_ = std::jthread([p = r.get()](std::stop_token st) { p->run(st); });
    return r;
}

KernelAuditReader::~KernelAuditReader() {
    if (thread_.joinable()) {
        thread_.request_stop();
        uint64_t one = 1;
        [[maybe_unused]] auto n = ::write(wake_.get(), &one, sizeof one);
        thread_.join();
    }
}

std::expected<void, std::string> KernelAuditReader::control(uint16_t type, const void* payload, size_t len,
                                                            void* reply, size_t reply_len) {
    std::lock_guard lk(ctl_mu_);
    std::vector<char> msg(NLMSG_SPACE(len), 0);
    auto* h = reinterpret_cast<nlmsghdr*>(msg.data());
    h->nlmsg_len = NLMSG_LENGTH(len);
    h->nlmsg_type = type;
    h->nlmsg_flags = NLM_F_REQUEST | (reply ? 0 : NLM_F_ACK);
    h->nlmsg_seq = ++ctl_seq_;
    if (len) std::memcpy(NLMSG_DATA(h), payload, len);
    sockaddr_nl k{};
    k.nl_family = AF_NETLINK;
    if (::sendto(ctl_.get(), msg.data(), h->nlmsg_len, 0, reinterpret_cast<sockaddr*>(&k), sizeof k) < 0)
        return std::unexpected(errstr("sendto(NETLINK_AUDIT)"));
    alignas(nlmsghdr) char buf[8192];
    for (int tries = 0; tries < 16; ++tries) {
        ssize_t n = ::recv(ctl_.get(), buf, sizeof buf, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return std::unexpected(errstr("recv(NETLINK_AUDIT)"));
        }
        int rem = static_cast<int>(n);
        for (auto* m = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(m, rem); m = NLMSG_NEXT(m, rem)) {
            if (m->nlmsg_seq != ctl_seq_) continue;  // a late answer to an earlier request
            if (m->nlmsg_type == NLMSG_ERROR) {
                auto* e = static_cast<nlmsgerr*>(NLMSG_DATA(m));
                if (e->error != 0) return std::unexpected(std::string("netlink: ") + std::strerror(-e->error));
                if (!reply) return {};
                continue;
            }
            if (reply && m->nlmsg_type == type) {
                size_t got = m->nlmsg_len - NLMSG_HDRLEN;
                std::memcpy(reply, NLMSG_DATA(m), std::min(got, reply_len));
                return {};
            }
        }
    }
    return std::unexpected("no answer from the kernel");
}

std::expected<void, std::string> KernelAuditReader::refresh_status() {
    audit_status st{};
    if (auto g = control(AUDIT_GET, nullptr, 0, &st, sizeof st); !g) return g;
    uint64_t prev = kernel_lost_.exchange(st.lost);
    backlog_ = st.backlog;
    backlog_limit_ = st.backlog_limit;
    // The counter is the kernel's, for every audit record of the host: a
    // loss here may or may not be a sandbox's. It is reported as a gap.
    if (st.lost > prev && opts_.on_lost) opts_.on_lost("kernel_audit_lost", st.lost - prev);
    return {};
}

bool KernelAuditReader::barrier(std::chrono::milliseconds timeout) {
    ++barriers_;
    if (!audit_on_) {
        // The kernel drops user messages while audit is disabled, so there is
        // no mark to wait for (seccomp records still come): settle for a
        // quiet reader, 20 ms without a record, 200 ms at most. Counted.
        auto end = std::chrono::steady_clock::now() + std::min(timeout, std::chrono::milliseconds(200));
        while (std::chrono::steady_clock::now() < end && mono_ns() - last_record_ns_.load() < 20'000'000)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        ++barrier_timeouts_;
        return false;
    }
    uint64_t n;
    {
        std::lock_guard lk(mu_);
        n = ++barrier_sent_;
    }
    std::string text = barrier_tag_ + std::to_string(n);
    if (auto s = control(kaudit::rtype::kTrustedApp, text.c_str(), text.size() + 1, nullptr, 0); !s) {
        ++barrier_timeouts_;
        spdlog::warn("kernel audit barrier: {}", s.error());
        return false;
    }
    // Marks that never arrive (an audit rule excluding user messages, say)
    // would cost every run the full timeout: after three misses in a row
    // the wait is cut to 100 ms until a mark arrives again (status says so).
    if (consecutive_timeouts_.load() >= 3) timeout = std::min(timeout, std::chrono::milliseconds(100));
    std::unique_lock lk(mu_);
    if (!barrier_cv_.wait_for(lk, timeout, [&] { return barrier_seen_ >= n; })) {
        ++barrier_timeouts_;
        ++consecutive_timeouts_;
        return false;
    }
    consecutive_timeouts_ = 0;
    lk.unlock();
    // The kernel's lost counter as of now, so a loss during the run shows.
    if (auto r = refresh_status(); !r) spdlog::warn("kernel audit: AUDIT_GET: {}", r.error());
    return true;
}

void KernelAuditReader::deliver(std::vector<kaudit::KernelDenial>& ds) {
    for (const auto& d : ds) {
        auto ctx = opts_.resolve(d);
        if (!ctx) {
            ++unattributed_;
            continue;
        }
        opts_.sink(kernel_decision_record(d, *ctx));
        ++decisions_;
    }
    ds.clear();
}

void KernelAuditReader::handle(uint16_t type, std::string_view body, int64_t now_ns) {
    if (type == kaudit::rtype::kTrustedApp) {
        // Our own barrier marks (another agentd's carry another pid).
        auto at = body.find(barrier_tag_);
        if (at == std::string_view::npos) return;
        uint64_t n = 0;
        for (size_t i = at + barrier_tag_.size(); i < body.size() && body[i] >= '0' && body[i] <= '9'; ++i)
            n = n * 10 + uint64_t(body[i] - '0');
        std::lock_guard lk(mu_);
        stats_snapshot_ = assembler_.stats();
        if (n > barrier_seen_) barrier_seen_ = n;
        barrier_cv_.notify_all();
        return;
    }
    std::vector<kaudit::KernelDenial> out;
    assembler_.feed(type, body, now_ns, out);
    deliver(out);
}

void KernelAuditReader::run(std::stop_token st) {
    alignas(nlmsghdr) static thread_local char buf[16384];  // > MAX_AUDIT_MESSAGE_LENGTH (8970) + header
    auto next_poll = std::chrono::steady_clock::now() + opts_.status_poll;
    const int64_t timeout_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.event_timeout).count();
    while (!st.stop_requested()) {
        pollfd p[2] = {{mc_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
        int rc = ::poll(p, 2, 50);
        if (rc < 0 && errno != EINTR) {
            spdlog::error("kernel audit: poll: {}", std::strerror(errno));
            break;
        }
        if (p[1].revents) break;
        if (rc > 0 && (p[0].revents & (POLLIN | POLLERR))) {
            for (int i = 0; i < 4096; ++i) {
                ssize_t n = ::recv(mc_.get(), buf, sizeof buf, MSG_DONTWAIT);
                if (n < 0) {
                    if (errno == EINTR) continue;
                    if (errno == ENOBUFS) {
                        // The kernel could not queue multicast copies for this
                        // socket: an unknown number of records is gone.
                        ++overruns_;
                        if (opts_.on_lost) opts_.on_lost("kernel_audit_overrun", 1);
                        continue;
                    }
                    break;  // EAGAIN
                }
                int64_t now = mono_ns();
                last_record_ns_ = now;
                int rem = static_cast<int>(n);
                for (auto* m = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(m, rem); m = NLMSG_NEXT(m, rem)) {
                    size_t len = m->nlmsg_len - NLMSG_HDRLEN;
                    handle(m->nlmsg_type, std::string_view(static_cast<const char*>(NLMSG_DATA(m)), len), now);
                }
            }
        }
        std::vector<kaudit::KernelDenial> out;
        assembler_.flush_older(mono_ns() - timeout_ns, out);
        deliver(out);
        if (std::chrono::steady_clock::now() >= next_poll) {
            next_poll = std::chrono::steady_clock::now() + opts_.status_poll;
            if (auto r = refresh_status(); !r) spdlog::warn("kernel audit: AUDIT_GET: {}", r.error());
        }
        std::lock_guard lk(mu_);
        stats_snapshot_ = assembler_.stats();
    }
    // Stopping: events still waiting for their EOE are delivered as they are.
    std::vector<kaudit::KernelDenial> out;
    assembler_.flush_all(out);
    deliver(out);
}

nlohmann::json KernelAuditReader::status() const {
    kaudit::EventAssembler::Stats s;
    {
        std::lock_guard lk(mu_);
        s = stats_snapshot_;
    }
    nlohmann::json j{
        {"source", "NETLINK_AUDIT multicast (AUDIT_NLGRP_READLOG)"},
        {"audit", enabled_state_},
        {"records", s.records},
        {"records_malformed", s.malformed},
        {"records_other_types", s.ignored},
        {"denials_parsed", s.denials},
        {"decisions", decisions_.load()},
        {"denials_not_sandboxed", unattributed_.load()},
        {"events_without_eoe", s.incomplete},
        {"events_evicted", s.evicted},
        {"landlock_domains", s.landlock_domains},
        {"landlock_domain_denials", s.landlock_domain_denials},
        {"socket_overruns", overruns_.load()},
        {"kernel_lost", kernel_lost_.load()},
        {"kernel_lost_since_start", kernel_lost_.load() - kernel_lost_at_start_.load()},
        {"kernel_backlog", backlog_.load()},
        {"kernel_backlog_limit", backlog_limit_.load()},
        {"barriers", barriers_.load()},
        {"barrier_timeouts", barrier_timeouts_.load()},
    };
    if (consecutive_timeouts_.load() >= 3)
        j["barrier_state"] = "marks not arriving (audit disabled, or user messages filtered by an audit rule): "
                             "runs wait 100 ms at most for their records";
    if (!s.last_error.empty()) j["last_malformed"] = s.last_error;
    return j;
}

}  // namespace bulwark
