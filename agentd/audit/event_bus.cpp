#include "audit/event_bus.h"

#include <algorithm>
#include <type_traits>

#include "audit/metrics.h"

namespace bulwark::audit {

bool BusFilter::matches(const AuditRecord& r) const {
    // Gap records of the store are always delivered (GET /v1/events): a
    // filtered stream still learns what was lost, whichever task or tool it
    // watches.
    if (r.kind == RecordKind::Gap) return true;
    if (kind && r.kind != *kind) return false;
    if (task_id && r.task_id != *task_id) return false;
    if (tool && r.tool != *tool) return false;
    // Layer and decision filters select decision rows only.
    if (layer && (r.kind != RecordKind::Decision || r.layer != *layer)) return false;
    if (decision && (r.kind != RecordKind::Decision || r.decision != *decision)) return false;
    return true;
}

std::string BusMessage::text() const {
    if (type == Type::Record) return json ? *json : std::string("{}");
    return nlohmann::json{{"kind", "gap"}, {"source", "subscriber"}, {"dropped", dropped}}.dump();
}

std::vector<BusMessage> Subscription::drain(size_t max) {
    std::vector<BusMessage> out;
    std::lock_guard lk(mu_);
    while (!q_.empty() && out.size() < max) {
        out.push_back(std::move(q_.front()));
        q_.pop_front();
    }
    if (q_.empty() && pending_gap_ && out.size() < max) {
        // drops happened after everything now queued: report them last
        BusMessage g;
        g.type = BusMessage::Type::Gap;
        g.dropped = std::exchange(pending_gap_, 0);
        out.push_back(std::move(g));
    }
    return out;
}

void Subscription::set_notify(std::function<void()> fn) {
    bool have;
    {
        std::lock_guard lk(mu_);
        notify_ = std::move(fn);
        have = !q_.empty() || pending_gap_;
    }
    if (have && notify_) notify_();
}

size_t Subscription::depth() {
    std::lock_guard lk(mu_);
    return q_.size() + (pending_gap_ ? 1 : 0);
}

void Subscription::push(std::vector<BusMessage>& msgs, Metrics* m) {
    uint64_t dropped = 0;
    {
        std::lock_guard lk(mu_);
        for (auto& msg : msgs) {
            if (q_.size() >= capacity_) {
                ++pending_gap_;
                ++dropped;
                continue;
            }
            if (pending_gap_) {
                // the gap precedes this record in the stream
                BusMessage g;
                g.type = BusMessage::Type::Gap;
                g.dropped = std::exchange(pending_gap_, 0);
                q_.push_back(std::move(g));
            }
            q_.push_back(std::move(msg));
        }
    }
    msgs.clear();
    if (dropped) {
        dropped_total_.fetch_add(dropped, std::memory_order_relaxed);
        if (m) m->subscriber_drops.fetch_add(dropped, std::memory_order_relaxed);
    }
}

std::shared_ptr<Subscription> EventBus::subscribe(BusFilter f, size_t capacity, Payload p) {
    auto s = std::make_shared<Subscription>(std::move(f), std::max<size_t>(capacity, 1), p);
    std::lock_guard lk(mu_);
    subs_.push_back(s);
    if (metrics_) metrics_->subscribers.store(subs_.size(), std::memory_order_relaxed);
    return s;
}

size_t EventBus::subscriber_count() {
    std::lock_guard lk(mu_);
    std::erase_if(subs_, [](auto& w) { return w.expired(); });
    return subs_.size();
}

void EventBus::on_committed(std::span<const AuditRecord> batch) { publish(batch); }
void EventBus::on_committed_owned(std::span<AuditRecord> batch) { publish(batch); }

// Record: const (a copy for each record subscriber takes) or not (the
// store's own batch, discarded afterwards: records are moved out of it).
template <class Record>
void EventBus::publish(std::span<Record> batch) {
    std::vector<std::shared_ptr<Subscription>> live;
    {
        std::lock_guard lk(mu_);
        std::erase_if(subs_, [](auto& w) { return w.expired(); });
        if (metrics_) metrics_->subscribers.store(subs_.size(), std::memory_order_relaxed);
        if (subs_.empty()) return;
        live.reserve(subs_.size());
        for (auto& w : subs_)
            if (auto s = w.lock()) live.push_back(std::move(s));
    }
    // Each subscriber's messages of this batch, pushed under one lock.
    std::vector<std::vector<BusMessage>> out(live.size());
    for (auto& r : batch) {
        // Made once per record, for the first subscriber that takes it: the
        // text first (a moved record has none left to write).
        std::shared_ptr<const std::string> json;
        std::shared_ptr<const AuditRecord> record;
        for (size_t i = 0; i < live.size(); ++i) {
            if (live[i]->payload_ != Payload::Json || !live[i]->filter_.matches(r)) continue;
            // a file name's bytes need not be UTF-8: replaced, never thrown on the writer thread
            if (!json)
                json = std::make_shared<const std::string>(
                    to_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
            BusMessage& msg = out[i].emplace_back();
            msg.seq = r.seq;
            msg.json = json;
        }
        for (size_t i = 0; i < live.size(); ++i) {
            // once moved, the record is read where it went
            const AuditRecord& now = record ? *record : r;
            if (live[i]->payload_ != Payload::Record || !live[i]->filter_.matches(now)) continue;
            if (!record) {
                const uint64_t seq = r.seq;
                if constexpr (std::is_const_v<Record>)
                    record = std::make_shared<const AuditRecord>(r);
                else
                    record = std::make_shared<const AuditRecord>(std::move(r));
                BusMessage& msg = out[i].emplace_back();
                msg.seq = seq;
                msg.record = record;
                continue;
            }
            BusMessage& msg = out[i].emplace_back();
            msg.seq = record->seq;
            msg.record = record;
        }
    }
    for (size_t i = 0; i < live.size(); ++i) {
        // a drop also needs a wake-up: the subscriber must drain to see its gap
        if (out[i].empty()) continue;
        live[i]->push(out[i], metrics_);
        std::function<void()> fn;
        {
            std::lock_guard lk(live[i]->mu_);
            fn = live[i]->notify_;
        }
        if (fn) fn();
    }
}

template void EventBus::publish(std::span<const AuditRecord>);
template void EventBus::publish(std::span<AuditRecord>);

}  // namespace bulwark::audit
