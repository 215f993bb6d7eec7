#pragma once
// Fleet telemetry: every committed audit record exported as an OTLP log
// record (OTLP/HTTP, protobuf or JSON) to one endpoint.
//
// Threads. The exporter subscribes to the event bus (audit/event_bus.h) for
// the records themselves: the store's writer thread only moves each record
// into the subscription's bounded queue and never waits for the exporter;
// when the queue is full the bus drops the record for the exporter alone,
// counts it, and the exporter exports a gap log record saying how many it
// missed (bulwark.export_gap). The exporter's own thread batches the records
// (up to batch_records, or what came within batch_linger of the first), maps
// each to a log record (telemetry/otlp_log.h) and POSTs the batch
// (telemetry/otlp_http.h), one request at a time.
//
// Retries. A batch answered 429, 502, 503 or 504, or not answered at all
// (connect, write or read failure, timeout), is sent again after an
// exponential backoff with jitter (initial_backoff doubling up to
// max_backoff), or after the answer's Retry-After when that is longer (up to
// max_retry_after), max_attempts times in all; then its records are dropped
// (export_failed). Another 4xx or 5xx drops them at once (rejected), as do
// the records an answer's partial success names as rejected. Every drop is
// counted by reason in Metrics (bulwark_otlp_records_dropped_total) and in
// status() (/v1/health telemetry.otlp).
//
// Trace context. A run's start record carries the traceparent of the request
// that caused it (detail.traceparent); the exporter remembers each run's
// trace context and container from its start record and puts them on every
// record of the run (trace_id, span_id, flags; container.id, k8s.*). A
// record of a run whose start it did not see (the exporter started later, or
// the start record was dropped from its queue) has the start record looked
// up in the store once per run.
//
// Its thread runs 5 nice levels below agentd: when CPU is short the store and
// the decision sources go first, and the export catches up from its queue.
//
// Stop. stop() (or the destructor) exports what is queued until
// shutdown_timeout has passed; what is left then is dropped (shutdown).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "audit/metrics.h"
#include "telemetry/otlp_encode.h"
#include "telemetry/otlp_http.h"
#include "telemetry/otlp_log.h"

namespace bulwark::audit {
class AuditStore;
class EventBus;
class Subscription;
struct AuditRecord;
}  // namespace bulwark::audit

namespace bulwark::telemetry {

struct OtlpOptions {
    OtlpEndpoint endpoint;  // parse_endpoint()
    OtlpEncoding encoding = OtlpEncoding::Protobuf;
    std::vector<std::pair<std::string, std::string>> headers;  // sent with every request (authorization, ...)
    size_t queue_capacity = 65536;                  // records waiting for the exporter
    size_t batch_records = 1024;                    // log records in one request at most
    std::chrono::milliseconds batch_linger{200};    // how long a batch waits to fill
    std::chrono::milliseconds timeout{10000};       // one request, connect to answer
    unsigned max_attempts = 5;                      // requests of one batch in all
    std::chrono::milliseconds initial_backoff{500};
    std::chrono::milliseconds max_backoff{5000};
    std::chrono::milliseconds max_retry_after{60000};  // a longer Retry-After is cut to this
    std::chrono::milliseconds shutdown_timeout{5000};
    OtlpResource resource = default_resource();

    // service.name bulwark-agentd, service.version, host.name, os.type, process.pid.
    static OtlpResource default_resource();
};

class OtlpExporter {
public:
    // Subscribes to `bus` and starts the exporter thread. `store`: where the
    // start record of a run not seen yet is looked up (nullptr: never).
    // `metrics`: the daemon's counters (nullptr: counters of its own).
    OtlpExporter(OtlpOptions opts, audit::EventBus& bus, const audit::AuditStore* store, Metrics* metrics);
    ~OtlpExporter();
    OtlpExporter(const OtlpExporter&) = delete;
    OtlpExporter& operator=(const OtlpExporter&) = delete;

    void stop();
    // Waits until everything the bus gave the exporter so far is exported or
    // dropped (tests and benchmarks). False on timeout.
    bool flush(std::chrono::milliseconds timeout);
    // /v1/health telemetry.otlp: endpoint, encoding, state (idle, ok,
    // retrying, failing), counters, queue depth, the last error.
    nlohmann::json status() const;
    const Metrics& metrics() const { return *m_; }

private:
    // Records taken from the bus and their log records (whose strings point
    // into the records: the pointers keep them alive).
    struct Batch {
        std::vector<std::shared_ptr<const audit::AuditRecord>> records;
        // The records' log records and the exporter's own gap records: the
        // first n. Their room is kept from one batch to the next.
        std::vector<LogRecord> logs;
        size_t n = 0;
        LogRecord& next() {
            if (n == logs.size()) logs.emplace_back();
            return logs[n++];
        }
        std::span<const LogRecord> current() const { return {logs.data(), n}; }
        void clear() { records.clear(), n = 0; }
    };
    // The bus's notification outlives the exporter (the bus may call it while
    // the exporter is being destroyed): the lock and the condition it signals
    // are shared with it.
    struct Waker {
        std::mutex mu;
        std::condition_variable cv;  // the bus has records; stop
    };
    void run();
    void take(Batch& batch, size_t max);
    void send(Batch& batch);
    void drop(size_t records, OtlpDrop why, const std::string& error);
    bool wait_backoff(std::chrono::steady_clock::time_point until);
    void note(const char* state, const std::string& error);
    const RunInfo* run_info(const audit::AuditRecord& r);
    OtlpOptions opts_;
    const audit::AuditStore* store_;
    Metrics own_metrics_;
    Metrics* m_;
    std::shared_ptr<audit::Subscription> sub_;
    HttpPoster poster_;
    std::string body_;  // the request being sent (kept between batches: no reallocation)

    // runs: their trace context and container, oldest first for eviction
    std::unordered_map<uint64_t, RunInfo> runs_;
    std::deque<uint64_t> run_order_;

    std::shared_ptr<Waker> wake_ = std::make_shared<Waker>();  // its mu guards what follows
    std::condition_variable idle_cv_;  // the exporter has nothing queued or in flight
    bool stop_ = false;
    bool busy_ = false;  // a batch is being built or sent
    std::chrono::steady_clock::time_point stop_deadline_;
    std::string state_ = "idle";
    std::string last_error_;
    int64_t last_error_ns_ = 0, last_export_ns_ = 0;
    std::thread thread_;
};

}  // namespace bulwark::telemetry
