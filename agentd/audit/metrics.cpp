#include "audit/metrics.h"

#include <cstdio>
#include <iterator>

#include "audit/audit_record.h"

namespace bulwark {

void LatencyHistogram::observe(double seconds) noexcept {
    size_t i = 0;
    while (i < kBounds.size() && seconds > kBounds[i]) ++i;
    buckets_[i].fetch_add(1, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
    sum_ns_.fetch_add(uint64_t(seconds > 0 ? seconds * 1e9 : 0), std::memory_order_relaxed);
}

void LatencyHistogram::render(std::string& out, const char* name, const char* help) const {
    char buf[256];
    out += "# HELP "; out += name; out += " "; out += help; out += "\n";
    out += "# TYPE "; out += name; out += " histogram\n";
    uint64_t cum = 0;
    for (size_t i = 0; i < kBounds.size(); ++i) {
        cum += buckets_[i].load(std::memory_order_relaxed);
        std::snprintf(buf, sizeof buf, "%s_bucket{le=\"%g\"} %llu\n", name, kBounds[i], (unsigned long long)cum);
        out += buf;
    }
    cum += buckets_[kBounds.size()].load(std::memory_order_relaxed);
    std::snprintf(buf, sizeof buf, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9f\n%s_count %llu\n", name,
                  (unsigned long long)cum, name, double(sum_ns_.load()) / 1e9, name,
                  (unsigned long long)count_.load());
    out += buf;
}

std::string_view otlp_drop_name(OtlpDrop why) {
    static constexpr std::string_view kNames[] = {"queue_full", "export_failed", "rejected", "shutdown"};
    static_assert(std::size(kNames) == kOtlpDropReasons);
    return size_t(why) < std::size(kNames) ? kNames[size_t(why)] : "unknown";
}

namespace {
void counter(std::string& out, const char* name, const char* type, const char* help, uint64_t v) {
    out += "# HELP "; out += name; out += " "; out += help; out += "\n";
    out += "# TYPE "; out += name; out += " "; out += type; out += "\n";
    out += name; out += " "; out += std::to_string(v); out += "\n";
}
}  // namespace

std::string Metrics::render_prometheus() const {
    std::string out;
    out.reserve(8192);
    out += "# HELP bulwark_decisions_total Decisions committed to the audit store, by layer and outcome.\n"
           "# TYPE bulwark_decisions_total counter\n";
    for (int l = 0; l < kLayers; ++l)
        for (int d = 0; d < kDecisions; ++d) {
            out += "bulwark_decisions_total{layer=\"";
            out += audit::layer_name(unsigned(l));
            out += "\",decision=\"";
            out += audit::decision_name(unsigned(d));
            out += "\"} ";
            out += std::to_string(decisions[size_t(l)][size_t(d)].load(std::memory_order_relaxed));
            out += "\n";
        }
    auto ld = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    counter(out, "bulwark_audit_rows_committed_total", "counter", "Rows committed to the audit store.", ld(rows_committed));
    counter(out, "bulwark_audit_batches_committed_total", "counter", "Write transactions committed.", ld(batches_committed));
    counter(out, "bulwark_audit_records_dropped_total", "counter",
            "Records dropped because the audit queue was full (each loss is recorded as a gap record).",
            ld(records_dropped));
    counter(out, "bulwark_audit_source_drops_total", "counter",
            "Records lost before reaching the store, as reported by their source (ring buffer reserve failures).",
            ld(source_drops));
    counter(out, "bulwark_audit_gap_records_total", "counter", "Gap records committed.", ld(gap_records));
    counter(out, "bulwark_audit_commit_failures_total", "counter", "Batches whose commit failed (retried).",
            ld(commit_failures));
    counter(out, "bulwark_audit_queue_depth", "gauge", "Records waiting for the writer.", ld(queue_depth));
    counter(out, "bulwark_audit_refusing", "gauge",
            "1 while the audit store refuses new runs (disk full or write failure).", ld(store_refusing));
    counter(out, "bulwark_audit_retention_deleted_total", "counter", "Rows deleted by retention.", ld(retention_deleted));
    counter(out, "bulwark_audit_queries_interrupted_total", "counter", "Queries cut off at their deadline.",
            ld(queries_interrupted));
    commit_latency.render(out, "bulwark_audit_commit_seconds", "Duration of one write transaction.");
    event_to_commit_latency.render(out, "bulwark_audit_event_to_commit_seconds",
                                   "Time from enqueue to commit, per row.");
    counter(out, "bulwark_event_subscribers", "gauge", "Live event stream subscribers.", ld(subscribers));
    counter(out, "bulwark_event_subscriber_drops_total", "counter",
            "Records not delivered to a slow live subscriber (it is sent a gap message).", ld(subscriber_drops));
    out += "# HELP bulwark_http_responses_total API responses by status class.\n"
           "# TYPE bulwark_http_responses_total counter\n";
    for (int c = 1; c <= 5; ++c)
        out += "bulwark_http_responses_total{class=\"" + std::to_string(c) + "xx\"} " +
               std::to_string(ld(http_responses[size_t(c)])) + "\n";
    counter(out, "bulwark_http_connections", "gauge", "Open API connections.", ld(http_connections));
    counter(out, "bulwark_http_connections_refused_total", "counter", "Connections refused over the limit.",
            ld(http_connections_refused));
    counter(out, "bulwark_http_timeouts_total", "counter", "Connections closed by a read/idle timeout.",
            ld(http_timeouts));
    out += "# HELP bulwark_runs_total Tool runs ended, by outcome.\n"
           "# TYPE bulwark_runs_total counter\n";
    static constexpr const char* kOutcomes[] = {"exited", "signaled", "refused", "setup_failed", "exec_failed"};
    for (size_t i = 0; i < runs.size(); ++i)
        out += std::string("bulwark_runs_total{outcome=\"") + kOutcomes[i] + "\"} " + std::to_string(ld(runs[i])) + "\n";
    counter(out, "bulwark_runs_timed_out_total", "counter", "Runs killed at their wall-clock limit.", ld(runs_timed_out));
    counter(out, "bulwark_runs_oom_killed_total", "counter", "Runs with an OOM kill in their memory cgroup.",
            ld(runs_oom_killed));
    counter(out, "bulwark_runs_running", "gauge", "Tool runs in progress.", ld(runs_running));
    counter(out, "bulwark_tasks_open", "gauge", "Open tasks.", ld(tasks_open));
    counter(out, "bulwark_policy_epochs_total", "counter", "Task policy epochs started.", ld(epochs));
    run_latency.render(out, "bulwark_exec_seconds", "Exec requests: accepted to reply ready, run included.");
    counter(out, "bulwark_otlp_enabled", "gauge", "1 when records are exported to an OTLP endpoint.", ld(otlp_enabled));
    counter(out, "bulwark_otlp_records_exported_total", "counter",
            "Audit records the OTLP endpoint accepted as log records.", ld(otlp_records_exported));
    counter(out, "bulwark_otlp_requests_total", "counter", "OTLP export requests sent, retries included.",
            ld(otlp_requests));
    counter(out, "bulwark_otlp_retries_total", "counter",
            "OTLP export requests sent again after a retryable failure (429, 502, 503, 504, connection errors).",
            ld(otlp_retries));
    out += "# HELP bulwark_otlp_records_dropped_total Audit records not exported, by reason.\n"
           "# TYPE bulwark_otlp_records_dropped_total counter\n";
    for (size_t i = 0; i < otlp_dropped.size(); ++i)
        out += std::string("bulwark_otlp_records_dropped_total{reason=\"") +
               std::string(otlp_drop_name(OtlpDrop(i))) + "\"} " + std::to_string(ld(otlp_dropped[i])) + "\n";
    counter(out, "bulwark_otlp_queue_depth", "gauge", "Audit records waiting to be exported.", ld(otlp_queue_depth));
    otlp_export_latency.render(out, "bulwark_otlp_export_seconds", "One OTLP export request: sent to answered.");
    return out;
}

}  // namespace bulwark
