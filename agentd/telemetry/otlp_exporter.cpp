#include "telemetry/otlp_exporter.h"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include <spdlog/spdlog.h>

#include "audit/audit_db.h"
#include "audit/event_bus.h"
#include "bulwark/version.h"
#include "common/clock.h"

namespace bulwark::telemetry {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr size_t kMaxRuns = 16384;  // runs whose trace context is remembered
constexpr int kExporterNice = 5;    // the exporter thread's nice value over agentd's own

bool retryable(const HttpAnswer& a) {
    return a.status == 0 || a.status == 429 || a.status == 502 || a.status == 503 || a.status == 504;
}

std::string answer_text(const HttpAnswer& a) {
    if (a.status == 0) return a.error;
    std::string s = "HTTP " + std::to_string(a.status);
    if (!a.body.empty() && a.content_type.starts_with("text/")) s += ": " + a.body.substr(0, 200);
    return s;
}

}  // namespace

OtlpResource OtlpOptions::default_resource() {
    OtlpResource r;
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) host[0] = 0;
    r.attributes = {{"service.name", "bulwark-agentd"},
                    {"service.version", version_string()},
                    {"host.name", host},
                    {"os.type", "linux"},
                    {"process.pid", std::to_string(::getpid())}};
    r.scope_version = version_string();
    return r;
}

OtlpExporter::OtlpExporter(OtlpOptions opts, audit::EventBus& bus, const audit::AuditStore* store, Metrics* metrics)
    : opts_(std::move(opts)),
      store_(store),
      m_(metrics ? metrics : &own_metrics_),
      poster_(opts_.endpoint, opts_.headers) {
    opts_.batch_records = std::max<size_t>(opts_.batch_records, 1);
    opts_.max_attempts = std::max(opts_.max_attempts, 1u);
    m_->otlp_enabled.store(1, std::memory_order_relaxed);
    sub_ = bus.subscribe({}, opts_.queue_capacity, audit::Payload::Record);
    sub_->set_notify([w = wake_] {
        { std::lock_guard lk(w->mu); }
        w->cv.notify_one();
    });
    thread_ = std::thread([this] { run(); });
}

OtlpExporter::~OtlpExporter() { stop(); }

void OtlpExporter::stop() {
    {
        std::lock_guard lk(wake_->mu);
        if (!stop_) {
            stop_ = true;
            stop_deadline_ = Clock::now() + opts_.shutdown_timeout;
        }
    }
    wake_->cv.notify_all();
    if (thread_.joinable()) thread_.join();
    m_->otlp_queue_depth.store(0, std::memory_order_relaxed);
}

bool OtlpExporter::flush(milliseconds timeout) {
    std::unique_lock lk(wake_->mu);
    return idle_cv_.wait_for(lk, timeout, [&] { return !busy_ && sub_->depth() == 0; });
}

void OtlpExporter::run() {
    pthread_setname_np(pthread_self(), "otlp-export");
    // Below the store's writer and the decision sources when CPU is short:
    // the export catches up when it is not (its queue absorbs the burst, and
    // what overflows it is counted), the audit path never waits for it.
    const auto tid = id_t(::gettid());
    errno = 0;
    const int nice_now = ::getpriority(PRIO_PROCESS, tid);
    if (errno == 0 && ::setpriority(PRIO_PROCESS, tid, std::min(nice_now + kExporterNice, 19)) != 0)
        spdlog::debug("otlp: setpriority(+{}): {}", kExporterNice, std::strerror(errno));
    Batch batch;
    batch.records.reserve(opts_.batch_records);
    batch.logs.reserve(opts_.batch_records);
    std::unique_lock lk(wake_->mu);
    for (;;) {
        wake_->cv.wait(lk, [&] { return stop_ || sub_->depth() > 0; });
        if (sub_->depth() == 0) break;  // stopped, nothing left
        busy_ = true;
        const auto linger_end = Clock::now() + opts_.batch_linger;
        // The batch: what is queued, then what comes within the linger
        // (none while stopping: send what there is).
        do {
            lk.unlock();
            take(batch, opts_.batch_records - batch.n);
            lk.lock();
        } while (batch.n < opts_.batch_records &&
                 (stop_ ? sub_->depth() > 0
                        : wake_->cv.wait_until(lk, linger_end, [&] { return stop_ || sub_->depth() > 0; })));
        const bool late = stop_ && Clock::now() >= stop_deadline_;
        lk.unlock();
        if (late)  // past the shutdown deadline: what is left is not sent
            drop(batch.records.size(), OtlpDrop::Shutdown, "agentd stopped before these records were exported");
        else if (batch.n)
            send(batch);
        batch.clear();
        m_->otlp_queue_depth.store(sub_->depth(), std::memory_order_relaxed);
        lk.lock();
        busy_ = false;
        if (sub_->depth() == 0) idle_cv_.notify_all();
    }
    idle_cv_.notify_all();
}

void OtlpExporter::take(Batch& batch, size_t max) {
    auto msgs = sub_->drain(max);
    const int64_t now = unix_now_ns();
    for (auto& msg : msgs) {
        if (msg.type == audit::BusMessage::Type::Gap) {
            // the bus dropped records for the exporter: counted, and said
            m_->count_otlp_drop(OtlpDrop::QueueFull, msg.dropped);
            batch.next() = export_gap_record(msg.dropped, otlp_drop_name(OtlpDrop::QueueFull), now);
            continue;
        }
        if (!msg.record) continue;
        to_log_record(*msg.record, run_info(*msg.record), now, batch.next());
        batch.records.push_back(std::move(msg.record));
    }
    m_->otlp_queue_depth.store(sub_->depth() + batch.n, std::memory_order_relaxed);
}

// A run's trace context and container: from its start record when the
// exporter sees it, else looked up in the store once.
const RunInfo* OtlpExporter::run_info(const audit::AuditRecord& r) {
    if (!r.run_id) return nullptr;
    auto remember = [&](RunInfo info) -> const RunInfo* {
        auto [it, fresh] = runs_.insert_or_assign(r.run_id, std::move(info));
        if (fresh) {
            run_order_.push_back(r.run_id);
            if (run_order_.size() > kMaxRuns) {
                if (run_order_.front() != r.run_id) runs_.erase(run_order_.front());
                run_order_.pop_front();
            }
        }
        return &it->second;
    };
    if (r.kind == audit::RecordKind::RunStart)
        return remember(run_info_from_detail(nlohmann::json::parse(r.detail, nullptr, false)));
    if (auto it = runs_.find(r.run_id); it != runs_.end()) return &it->second;
    RunInfo info;
    if (store_) {
        audit::Query q;
        if (r.task_id) q.task_id = r.task_id;  // a container's run has no task
        q.run_id = r.run_id;
        q.kind = audit::RecordKind::RunStart;
        q.limit = 1;
        q.timeout = milliseconds(250);
        if (auto res = store_->query(q); res && !res->rows.empty())
            info = run_info_from_detail(nlohmann::json::parse(res->rows.front().detail, nullptr, false));
    }
    return remember(std::move(info));
}

void OtlpExporter::note(const char* state, const std::string& error) {
    std::lock_guard lk(wake_->mu);
    state_ = state;
    if (!error.empty()) {
        last_error_ = error;
        last_error_ns_ = unix_now_ns();
    } else if (std::string_view(state) == "ok") {
        last_export_ns_ = unix_now_ns();
    }
}

void OtlpExporter::drop(size_t records, OtlpDrop why, const std::string& error) {
    if (records) m_->count_otlp_drop(why, records);
    spdlog::warn("otlp: {} audit records not exported ({}): {}", records, otlp_drop_name(why), error);
    note(why == OtlpDrop::Shutdown ? "stopped" : "failing", error);
}

// Waits out a backoff; false when agentd stops and its shutdown deadline
// comes first.
bool OtlpExporter::wait_backoff(Clock::time_point until) {
    std::unique_lock lk(wake_->mu);
    auto cut_short = [&] { return stop_ && stop_deadline_ < until; };
    wake_->cv.wait_until(lk, until, cut_short);
    return !cut_short();
}

void OtlpExporter::send(Batch& batch) {
    encode_logs_request(opts_.encoding, opts_.resource, batch.current(), body_);
    const size_t n = batch.records.size();
    static thread_local std::minstd_rand jitter{std::random_device{}()};
    for (unsigned attempt = 1;; ++attempt) {
        milliseconds timeout = opts_.timeout;
        bool too_late = false;
        {
            std::lock_guard lk(wake_->mu);
            if (stop_) {  // while stopping, no request outlasts the shutdown deadline
                auto left = std::chrono::duration_cast<milliseconds>(stop_deadline_ - Clock::now());
                too_late = left.count() <= 0;
                timeout = std::min(timeout, left);
            }
        }
        if (too_late) return drop(n, OtlpDrop::Shutdown, "agentd stopped before these records were exported");
        m_->otlp_requests.fetch_add(1, std::memory_order_relaxed);
        const auto t0 = Clock::now();
        HttpAnswer ans = poster_.post(content_type(opts_.encoding), body_, timeout);
        m_->otlp_export_latency.observe(std::chrono::duration<double>(Clock::now() - t0).count());

        if (ans.status >= 200 && ans.status < 300) {
            uint64_t rejected = 0;
            if (auto ps = parse_export_response(ans.content_type, ans.body); ps && ps->rejected > 0) {
                rejected = std::min<uint64_t>(uint64_t(ps->rejected), n);
                drop(rejected, OtlpDrop::Rejected, "partial success: " + ps->message);
            }
            m_->otlp_records_exported.fetch_add(n - rejected, std::memory_order_relaxed);
            if (!rejected) note("ok", {});
            return;
        }
        const std::string why = answer_text(ans);
        if (!retryable(ans)) return drop(n, OtlpDrop::Rejected, why);
        if (attempt >= opts_.max_attempts)
            return drop(n, OtlpDrop::ExportFailed, why + " (" + std::to_string(attempt) + " attempts)");
        // exponential backoff with jitter, or the answer's Retry-After
        auto base = opts_.initial_backoff * (int64_t(1) << std::min(attempt - 1, 20u));
        base = std::min(base, opts_.max_backoff);
        auto delay = milliseconds(int64_t(double(base.count()) * std::uniform_real_distribution<>(0.5, 1.0)(jitter)));
        if (ans.retry_after)
            delay = std::max(delay, std::min(milliseconds(*ans.retry_after), opts_.max_retry_after));
        note("retrying", why);
        spdlog::debug("otlp: {}; attempt {} of {} in {} ms", why, attempt + 1, opts_.max_attempts, delay.count());
        if (!wait_backoff(Clock::now() + delay))
            return drop(n, OtlpDrop::Shutdown, why + "; agentd stopped before the next attempt");
        m_->otlp_retries.fetch_add(1, std::memory_order_relaxed);
    }
}

nlohmann::json OtlpExporter::status() const {
    auto ld = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    nlohmann::json dropped = nlohmann::json::object();
    for (int i = 0; i < kOtlpDropReasons; ++i)
        dropped[std::string(otlp_drop_name(OtlpDrop(i)))] = ld(m_->otlp_dropped[size_t(i)]);
    nlohmann::json j{{"endpoint", opts_.endpoint.url},
                     {"encoding", encoding_name(opts_.encoding)},
                     {"records_exported", ld(m_->otlp_records_exported)},
                     {"requests", ld(m_->otlp_requests)},
                     {"retries", ld(m_->otlp_retries)},
                     {"dropped", std::move(dropped)},
                     {"queue_depth", ld(m_->otlp_queue_depth)},
                     {"queue_capacity", opts_.queue_capacity}};
    std::lock_guard lk(wake_->mu);
    j["state"] = state_;
    if (last_export_ns_) j["last_export_ns"] = last_export_ns_;
    if (!last_error_.empty()) {
        j["last_error"] = last_error_;
        j["last_error_ns"] = last_error_ns_;
    }
    return j;
}

}  // namespace bulwark::telemetry
