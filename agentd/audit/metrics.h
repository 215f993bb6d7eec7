#pragma once
// Process-wide counters for the audit pipeline and the API, rendered as
// Prometheus text (GET /metrics). Every counter is a relaxed atomic: writers
// (the audit writer thread, API sessions) never take a lock to count.
#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include <bulwark_abi.h>

namespace bulwark {

// Fixed-bucket histogram of durations in seconds (Prometheus "le" buckets).
class LatencyHistogram {
public:
    static constexpr std::array<double, 14> kBounds = {
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
        0.025,  0.05,    0.1,    0.25,  0.5,    1.0,   5.0};
    void observe(double seconds) noexcept;
    void render(std::string& out, const char* name, const char* help) const;

private:
    std::array<std::atomic<uint64_t>, kBounds.size() + 1> buckets_{};  // last = +Inf
    std::atomic<uint64_t> count_{0};
    std::atomic<uint64_t> sum_ns_{0};
};

inline constexpr int kLayers = 10;    // BW_LAYER_NONE..BW_LAYER_CGROUP
// Why the OTLP exporter dropped records (metrics label `reason`).
enum class OtlpDrop : uint8_t {
    QueueFull = 0,     // its bounded queue was full: the bus dropped them for it
    ExportFailed = 1,  // the endpoint did not take the batch within the attempts (or failed for good)
    Rejected = 2,      // the endpoint refused them (4xx other than 429, or partial success)
    Shutdown = 3,      // still queued when agentd stopped and the shutdown deadline passed
};
inline constexpr int kOtlpDropReasons = 4;
std::string_view otlp_drop_name(OtlpDrop why);  // queue_full, export_failed, rejected, shutdown
inline constexpr int kDecisions = 4;  // BW_DECISION_*

struct Metrics {
    // audit store
    std::array<std::array<std::atomic<uint64_t>, kDecisions>, kLayers> decisions{};
    std::atomic<uint64_t> rows_committed{0};
    std::atomic<uint64_t> batches_committed{0};
    std::atomic<uint64_t> records_dropped{0};     // queue full: counted, then a gap record
    std::atomic<uint64_t> source_drops{0};        // reported by sources (ring buffer reserve failures)
    std::atomic<uint64_t> gap_records{0};
    std::atomic<uint64_t> commit_failures{0};
    std::atomic<uint64_t> queue_depth{0};         // gauge
    std::atomic<uint64_t> store_refusing{0};      // gauge: 1 = refusing new runs
    std::atomic<uint64_t> retention_deleted{0};
    std::atomic<uint64_t> queries_interrupted{0};
    LatencyHistogram commit_latency;              // one batch: BEGIN..COMMIT
    LatencyHistogram event_to_commit_latency;     // enqueue -> committed, per row
    // event bus
    std::atomic<uint64_t> subscribers{0};         // gauge
    std::atomic<uint64_t> subscriber_drops{0};
    // API
    std::array<std::atomic<uint64_t>, 6> http_responses{};  // by status class 1xx..5xx (index 1..5)
    std::atomic<uint64_t> http_connections{0};               // gauge
    std::atomic<uint64_t> http_connections_refused{0};       // over max_connections
    std::atomic<uint64_t> http_timeouts{0};
    // tasks and runs
    std::array<std::atomic<uint64_t>, 5> runs{};  // by RunOutcome: exited signaled refused setup_failed exec_failed
    std::atomic<uint64_t> runs_timed_out{0};
    std::atomic<uint64_t> runs_oom_killed{0};
    std::atomic<uint64_t> runs_running{0};        // gauge
    std::atomic<uint64_t> tasks_open{0};          // gauge
    std::atomic<uint64_t> epochs{0};              // policy epochs started (create, update, timebox, expiry)
    LatencyHistogram run_latency;                 // exec: request accepted -> reply ready
    // OTLP export (telemetry/otlp_exporter)
    std::atomic<uint64_t> otlp_enabled{0};           // gauge: 1 when an endpoint is configured
    std::atomic<uint64_t> otlp_records_exported{0};  // log records the endpoint accepted
    std::atomic<uint64_t> otlp_requests{0};          // export requests sent (retries included)
    std::atomic<uint64_t> otlp_retries{0};           // requests sent again after a retryable failure
    std::array<std::atomic<uint64_t>, kOtlpDropReasons> otlp_dropped{};  // by OtlpDrop
    std::atomic<uint64_t> otlp_queue_depth{0};       // gauge: records waiting to be exported
    LatencyHistogram otlp_export_latency;            // one request: sent -> answered

    void count_otlp_drop(OtlpDrop why, uint64_t n) noexcept {
        otlp_dropped[size_t(why)].fetch_add(n, std::memory_order_relaxed);
    }

    void count_decision(unsigned layer, unsigned decision) noexcept {
        if (layer < kLayers && decision < kDecisions)
            decisions[layer][decision].fetch_add(1, std::memory_order_relaxed);
    }
    std::string render_prometheus() const;
};

}  // namespace bulwark
