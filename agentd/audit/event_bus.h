#pragma once
// In-process fan-out of committed audit records to live subscribers (SSE and
// WebSocket clients, the OTLP exporter). The writer thread publishes; it
// never blocks on a subscriber: each subscriber has its own bounded queue,
// and when it is full the record is dropped for that subscriber only,
// counted, and the subscriber is told with a gap message before its next
// record. A subscriber takes each record as its JSON text (the streams) or as
// the record itself (the exporter: no JSON is made for it).
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "audit/audit_record.h"

namespace bulwark {
struct Metrics;
}

namespace bulwark::audit {

struct BusFilter {
    std::optional<uint64_t> task_id;
    std::optional<std::string> tool;
    std::optional<uint16_t> layer;
    std::optional<uint8_t> decision;
    std::optional<RecordKind> kind;
    bool matches(const AuditRecord& r) const;
};

struct BusMessage {
    enum class Type { Record, Gap } type = Type::Record;
    std::shared_ptr<const std::string> json;    // record JSON (Record, Payload::Json)
    std::shared_ptr<const AuditRecord> record;  // the record (Record, Payload::Record)
    uint64_t dropped = 0;                     // Gap: records this subscriber missed
    uint64_t seq = 0;                         // Record: its seq
    std::string text() const;                 // JSON text of either type
};

class EventBus;

// What a subscriber's messages carry for each record.
enum class Payload { Json, Record };

class Subscription {
public:
    Subscription(BusFilter f, size_t capacity, Payload p = Payload::Json)
        : filter_(std::move(f)), capacity_(capacity), payload_(p) {}
    // Next messages, oldest first; a pending gap comes before later records.
    std::vector<BusMessage> drain(size_t max);
    // Called on the publisher's thread whenever messages become available.
    // Must be cheap and must not call back into the bus.
    void set_notify(std::function<void()> fn);
    uint64_t dropped() const { return dropped_total_.load(std::memory_order_relaxed); }
    // Messages queued now (records and a pending gap).
    size_t depth();
    const BusFilter& filter() const { return filter_; }
    Payload payload() const { return payload_; }

private:
    friend class EventBus;
    // Appends the messages (what does not fit is dropped, counted, and said
    // by a gap message), under one lock.
    void push(std::vector<BusMessage>& msgs, Metrics* m);

    BusFilter filter_;
    size_t capacity_;
    Payload payload_;
    std::mutex mu_;
    std::deque<BusMessage> q_;
    uint64_t pending_gap_ = 0;
    std::function<void()> notify_;
    std::atomic<uint64_t> dropped_total_{0};
};

class EventBus final : public CommitListener {
public:
    explicit EventBus(Metrics* metrics = nullptr) : metrics_(metrics) {}
    std::shared_ptr<Subscription> subscribe(BusFilter f, size_t capacity = 4096, Payload p = Payload::Json);
    void on_committed(std::span<const AuditRecord> batch) override;
    // Record subscribers get the records moved out of the batch, not copied.
    void on_committed_owned(std::span<AuditRecord> batch) override;
    size_t subscriber_count();

private:
    template <class Record>
    void publish(std::span<Record> batch);
    Metrics* metrics_;
    std::mutex mu_;
    std::vector<std::weak_ptr<Subscription>> subs_;
};

}  // namespace bulwark::audit
