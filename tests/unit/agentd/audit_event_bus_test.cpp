// agentd/audit/event_bus.cpp: committed records fanned out to live
// subscribers. A slow subscriber loses records only from its own bounded
// queue, is told how many with a gap message placed where they were lost,
// and never holds up the publisher or the others.
#include <catch2/catch.hpp>

#include <vector>

#include <nlohmann/json.hpp>

#include "audit/event_bus.h"
#include "audit/metrics.h"

using namespace bulwark;
using namespace bulwark::audit;
using nlohmann::json;

namespace {

AuditRecord decision(uint64_t seq, uint64_t task, const char* tool, uint16_t layer, uint8_t verdict) {
    AuditRecord r;
    r.seq = seq;
    r.kind = RecordKind::Decision;
    r.task_id = task;
    r.tool = tool;
    r.layer = layer;
    r.decision = verdict;
    r.object = "/etc/passwd";
    return r;
}

AuditRecord gap(uint64_t seq) {
    AuditRecord r;
    r.seq = seq;
    r.kind = RecordKind::Gap;
    r.detail = json{{"source", "queue"}, {"dropped", 3}}.dump();
    return r;
}

std::vector<uint64_t> seqs(const std::vector<BusMessage>& ms) {
    std::vector<uint64_t> out;
    for (const auto& m : ms) out.push_back(m.type == BusMessage::Type::Gap ? 0 : m.seq);
    return out;
}

}  // namespace

TEST_CASE("each subscriber gets the committed records its filter takes, and every gap record") {
    EventBus bus;
    auto all = bus.subscribe({});
    auto task2_denials = bus.subscribe({.task_id = 2, .decision = BW_DECISION_DENY});
    auto git = bus.subscribe({.tool = "git"});
    std::vector<AuditRecord> batch = {
        decision(1, 1, "cat", BW_LAYER_LANDLOCK, BW_DECISION_DENY),
        decision(2, 2, "git", BW_LAYER_LANDLOCK, BW_DECISION_ALLOW),
        decision(3, 2, "git", BW_LAYER_SECCOMP, BW_DECISION_DENY),
        gap(4),
    };
    bus.on_committed(batch);
    CHECK(seqs(all->drain(100)) == std::vector<uint64_t>{1, 2, 3, 4});
    // A gap record reaches every stream, whatever it filters on.
    CHECK(seqs(task2_denials->drain(100)) == std::vector<uint64_t>{3, 4});
    CHECK(seqs(git->drain(100)) == std::vector<uint64_t>{2, 3, 4});
    auto starts = bus.subscribe({.kind = RecordKind::RunStart});
    bus.on_committed(std::vector<AuditRecord>{decision(10, 1, "cat", 1, 1), gap(11)});
    CHECK(seqs(starts->drain(100)) == std::vector<uint64_t>{11});
    all->drain(100);
    auto again = all->drain(100);
    CHECK(again.empty());
    // The text a stream sends is the record's JSON.
    bus.on_committed(std::vector<AuditRecord>{decision(5, 1, "cat", BW_LAYER_LANDLOCK, BW_DECISION_DENY)});
    auto m = all->drain(1);
    REQUIRE(m.size() == 1);
    auto j = json::parse(m[0].text());
    CHECK(j["seq"] == 5);
    CHECK(j["tool"] == "cat");
    CHECK(j["object"] == "/etc/passwd");
}

TEST_CASE("a full subscriber queue drops for that subscriber only, and says how many where they were lost") {
    Metrics metrics;
    EventBus bus(&metrics);
    auto slow = bus.subscribe({}, 2);
    auto fast = bus.subscribe({}, 100);
    int woken = 0;
    slow->set_notify([&] { ++woken; });
    std::vector<AuditRecord> batch;
    for (uint64_t s = 1; s <= 5; ++s) batch.push_back(decision(s, 1, "cat", BW_LAYER_LANDLOCK, BW_DECISION_DENY));
    bus.on_committed(batch);
    CHECK(woken == 1);
    CHECK(seqs(fast->drain(100)) == std::vector<uint64_t>{1, 2, 3, 4, 5});
    CHECK(slow->dropped() == 3);
    CHECK(metrics.subscriber_drops.load() == 3);
    // Drained: records 1 and 2, then the gap for 3..5.
    auto first = slow->drain(100);
    REQUIRE(first.size() == 3);
    CHECK(first[0].seq == 1);
    CHECK(first[1].seq == 2);
    CHECK(first[2].type == BusMessage::Type::Gap);
    CHECK(first[2].dropped == 3);
    CHECK(json::parse(first[2].text()) == json{{"kind", "gap"}, {"source", "subscriber"}, {"dropped", 3}});

    // A drop followed by a record that fits: the gap comes before the record.
    bus.on_committed(std::vector<AuditRecord>{decision(6, 1, "cat", 1, 1), decision(7, 1, "cat", 1, 1),
                                              decision(8, 1, "cat", 1, 1)});
    auto part = slow->drain(1);
    CHECK(seqs(part) == std::vector<uint64_t>{6});
    bus.on_committed(std::vector<AuditRecord>{decision(9, 1, "cat", 1, 1)});
    CHECK(seqs(slow->drain(100)) == std::vector<uint64_t>{7, 0, 9});
}

TEST_CASE("a subscriber that is gone is forgotten") {
    EventBus bus;
    auto keep = bus.subscribe({});
    {
        auto gone = bus.subscribe({});
        CHECK(bus.subscriber_count() == 2);
    }
    CHECK(bus.subscriber_count() == 1);
    bus.on_committed(std::vector<AuditRecord>{decision(1, 1, "cat", 1, 1)});
    CHECK(keep->drain(10).size() == 1);
}

TEST_CASE("a record whose object is not UTF-8 reaches a stream subscriber", "[bus]") {
    EventBus bus;
    auto sub = bus.subscribe({});
    auto r = decision(1, 1, "cat", BW_LAYER_LANDLOCK, BW_DECISION_DENY);
    r.object = "/work/\xff\xfe.txt";  // a file name's bytes, as the kernel reports them
    std::vector<AuditRecord> batch{r};
    REQUIRE_NOTHROW(bus.on_committed(batch));
    auto got = sub->drain(10);
    REQUIRE(got.size() == 1);
    CHECK(json::parse(*got[0].json)["object"] == "/work/\xef\xbf\xbd\xef\xbf\xbd.txt");
}

TEST_CASE("the store's own batch: record subscribers get the records moved, the streams their whole text", "[bus]") {
    EventBus bus;
    auto stream = bus.subscribe({});
    auto all = bus.subscribe({}, 16, Payload::Record);
    BusFilter cat;
    cat.tool = "cat";
    auto cats = bus.subscribe(cat, 16, Payload::Record);
    std::vector<AuditRecord> batch{decision(1, 1, "cat", BW_LAYER_LANDLOCK, BW_DECISION_DENY),
                                   decision(2, 1, "sh", BW_LAYER_LANDLOCK, BW_DECISION_ALLOW)};
    bus.on_committed_owned(batch);
    auto s = stream->drain(10);
    REQUIRE(s.size() == 2);
    CHECK(json::parse(*s[0].json)["tool"] == "cat");
    CHECK(json::parse(*s[0].json)["object"] == "/etc/passwd");
    auto a = all->drain(10);
    REQUIRE(a.size() == 2);
    CHECK(a[0].record->tool == "cat");
    CHECK(a[0].record->object == "/etc/passwd");
    CHECK(a[1].record->seq == 2);
    auto c = cats->drain(10);  // its filter reads the record where it went
    REQUIRE(c.size() == 1);
    CHECK(c[0].record == a[0].record);  // one record, shared
    CHECK(batch[0].object.empty());     // moved out of the store's batch
}
