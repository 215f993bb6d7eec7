#pragma once
// The kernel audit source of the decision pipeline. On this host kernel BPF
// LSM programs are refused, so Landlock and seccomp are what deny file access
// and syscalls, and their denials are visible only as kernel audit records
// (docs/kernel-audit.md: what arrives, which flags make it arrive, rate
// limits, how losses are counted).
//
// KernelAuditReader joins the NETLINK_AUDIT multicast group
// AUDIT_NLGRP_READLOG (needs CAP_AUDIT_READ; any number of readers coexist,
// with or without a host auditd), turns audit on (AUDIT_SET enabled=1) only
// when it is off (Landlock logs nothing while audit is disabled) and says so
// in status(), parses records (kernel_audit_parse.h) on its own thread, asks
// the resolver which run a denial belongs to, and hands each one of a sandbox
// to the sink as a decision record (layer landlock or seccomp, decision deny).
// Records of processes that are no sandbox's are ignored (counted).
//
// Nothing is dropped silently: unparsable records, socket overruns
// (ENOBUFS: the kernel dropped multicast copies for this reader), the
// kernel's own `lost` counter (AUDIT_GET, polled), unattributed denials while
// runs were live: all counted in status(), and losses reported through
// on_lost so the store writes a gap record.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "audit/audit_record.h"
#include "common/fd.h"
#include "kaudit/kernel_audit_parse.h"
#include "kaudit/run_registry.h"

namespace bulwark {

// The decision row of one kernel denial in a run (layer landlock/seccomp,
// the operation, the object, the syscall's name through libseccomp).
audit::AuditRecord kernel_decision_record(const kaudit::KernelDenial& d, const RunContext& ctx);
// Name of a syscall number on an AUDIT_ARCH_* value ("" when unknown).
std::string syscall_name(uint32_t audit_arch, int64_t nr);

struct KernelAuditOptions {
    std::function<std::optional<RunContext>(const kaudit::KernelDenial&)> resolve;
    std::function<void(audit::AuditRecord)> sink;
    // Losses: source "kernel_audit_lost" (kernel counter delta) or
    // "kernel_audit_overrun" (socket overruns; the count of records is unknown).
    std::function<void(std::string source, uint64_t count)> on_lost;
    bool enable_audit = true;  // AUDIT_SET enabled=1 when audit is off
    int rcvbuf_bytes = 8 << 20;
    std::chrono::milliseconds status_poll{1000};
    // An event still waiting for its EOE this long is completed without it.
    std::chrono::milliseconds event_timeout{200};
};

class KernelAuditReader {
public:
    // Opens the sockets, reads the audit status, enables audit if needed and
    // starts the reader thread. Errors name the failing call.
    static std::expected<std::unique_ptr<KernelAuditReader>, std::string> start(KernelAuditOptions opts);
    ~KernelAuditReader();
    KernelAuditReader(const KernelAuditReader&) = delete;
    KernelAuditReader& operator=(const KernelAuditReader&) = delete;

    // Bounded wait for "everything the kernel queued before now has been
    // consumed": sends a mark (an AUDIT_TRUSTED_APP user message) through the
    // kernel's audit queue, which is FIFO, and waits until the reader thread
    // has read it and handed every earlier denial to the sink. false on
    // timeout (counted), or when audit is disabled (user messages are then
    // discarded by the kernel: nothing to wait for, counted too).
    bool barrier(std::chrono::milliseconds timeout);

    // Counters and state, for /v1/health and `agentd run`'s report.
    nlohmann::json status() const;
    // The kernel's lost counter as last read, overruns so far.
    uint64_t kernel_lost() const { return kernel_lost_.load(); }
    uint64_t kernel_lost_since_start() const { return kernel_lost_.load() - kernel_lost_at_start_.load(); }
    uint64_t overruns() const { return overruns_.load(); }
    uint64_t decisions() const { return decisions_.load(); }
    // Reads AUDIT_GET now (the reader also polls it).
    std::expected<void, std::string> refresh_status();

private:
    explicit KernelAuditReader(KernelAuditOptions opts) : opts_(std::move(opts)) {}
    void run(std::stop_token st);
    void handle(uint16_t type, std::string_view body, int64_t now_ns);
    void deliver(std::vector<kaudit::KernelDenial>& ds);
    std::expected<void, std::string> control(uint16_t type, const void* payload, size_t len, void* reply,
                                             size_t reply_len);

    KernelAuditOptions opts_;
    Fd mc_;       // multicast (READLOG) socket, read by the thread
    Fd ctl_;      // unicast control socket: AUDIT_GET/SET, barrier marks
    Fd wake_;     // eventfd: stop
    std::mutex ctl_mu_;
    uint32_t ctl_seq_ = 0;
    kaudit::EventAssembler assembler_;  // reader thread only
    std::string enabled_state_;         // "on", "on (enabled by agentd)", "locked", ...
    bool audit_on_ = false;
    std::atomic<uint64_t> kernel_lost_{0}, kernel_lost_at_start_{0}, backlog_{0}, backlog_limit_{0};
    std::atomic<uint64_t> overruns_{0}, decisions_{0}, unattributed_{0}, barriers_{0}, barrier_timeouts_{0},
        consecutive_timeouts_{0};
    std::atomic<int64_t> last_record_ns_{0};  // steady clock of the last record read
    mutable std::mutex mu_;  // assembler stats snapshot, barrier state
    kaudit::EventAssembler::Stats stats_snapshot_;
    std::condition_variable barrier_cv_;
    uint64_t barrier_sent_ = 0, barrier_seen_ = 0;
    std::string barrier_tag_;
    std::jthread thread_;
};

}  // namespace bulwark
