// Disk full, for real: the store lives on a 2 MiB tmpfs. When SQLite reports
// SQLITE_FULL, or free space falls below the headroom, the store refuses new
// runs and says why; records that could not be queued meanwhile are counted
// and written as a gap once space is back. Needs root (mount).
#include <catch2/catch.hpp>

#include <sys/mount.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "audit/audit_db.h"
#include "audit_test_util.h"
#include "audit/metrics.h"

using namespace bulwark;
using namespace bulwark::audit;
using namespace std::chrono_literals;

namespace {

struct SmallFs {
    test::TempDir dir;
    explicit SmallFs(const char* size) {
        std::string opts = std::string("size=") + size + ",mode=0700";
        if (mount("tmpfs", dir.path.c_str(), "tmpfs", 0, opts.c_str()) != 0)
            FAIL("mount tmpfs " << opts << " on " << dir.path << ": " << std::strerror(errno));
    }
    ~SmallFs() { umount2(dir.path.c_str(), MNT_DETACH); }
};

template <class F>
bool eventually(F f, std::chrono::milliseconds limit) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
        if (f()) return true;
        std::this_thread::sleep_for(10ms);
    }
    return f();
}

}  // namespace

TEST_CASE("SQLITE_FULL puts the store in the refusing state; it recovers and records the loss", "[diskfull]") {
    SmallFs fs("4m");
    auto filler = fs.dir.path / "filler";
    {
        std::ofstream f(filler, std::ios::binary);
        std::string block(64 * 1024, 'x');
        for (int i = 0; i < 32; ++i) f << block;  // 2 MiB to free later
    }
    Metrics m;
    auto opened = AuditStore::open({.path = fs.dir.path / "audit.db", .queue_capacity = 100,
                                    .batch_rows = 50, .batch_linger = 0ms, .min_free_bytes = 0,
                                    .retry_interval = 50ms},
                                   &m);
    REQUIRE(opened);
    auto& s = **opened;
    REQUIRE(s.accepting_runs());

    std::string big(4000, 'o');
    uint64_t accepted = 0, dropped = 0;
    bool refused = eventually(
        [&] {
            for (int i = 0; i < 20; ++i) {
                auto r = test::decision(1, "fill", BW_LAYER_BPF_LSM, BW_DECISION_ALLOW);
                r.object = big + std::to_string(i);
                (s.enqueue(std::move(r)) ? accepted : dropped)++;
            }
            return !s.accepting_runs();
        },
        30s);
    REQUIRE(refused);
    auto st = s.status();
    CHECK(st.state == StoreState::Refusing);
    CHECK_THAT(st.reason, Catch::Contains("disk full"));
    CHECK(m.store_refusing.load() == 1);
    CHECK(m.commit_failures.load() >= 1);
    CHECK(st.to_json()["state"] == "refusing");

    // keep producing while full: the queue fills and records are dropped, counted
    for (int i = 0; i < 1000; ++i) {
        auto r = test::decision(1, "fill", BW_LAYER_BPF_LSM, BW_DECISION_DENY);
        (s.enqueue(std::move(r)) ? accepted : dropped)++;
    }
    CHECK(dropped > 0);
    CHECK_FALSE(s.accepting_runs());

    // space comes back: the held batch and the queue are written, then the gap
    std::filesystem::remove(filler);
    REQUIRE(eventually([&] { return s.accepting_runs(); }, 10s));
    INFO("status after recovery: " << s.status().to_json().dump());
    REQUIRE(s.flush(20s));
    auto rows = s.read_sql("SELECT count(*) FROM records WHERE kind = 1", 5000ms);
    REQUIRE(rows);
    CHECK((*rows)[0][0].get<uint64_t>() == accepted);
    auto gaps = s.read_sql("SELECT coalesce(sum(json_extract(detail,'$.count')),0) FROM records WHERE kind = 5",
                           5000ms);
    REQUIRE(gaps);
    CHECK((*gaps)[0][0].get<uint64_t>() == dropped);
    auto ic = s.read_sql("PRAGMA integrity_check", 30000ms);
    REQUIRE(ic);
    CHECK((*ic)[0][0] == "ok");
    CHECK(s.status().state == StoreState::Ok);
}

TEST_CASE("free space below the headroom refuses new runs from the start", "[diskfull]") {
    SmallFs fs("2m");
    auto opened = AuditStore::open({.path = fs.dir.path / "audit.db", .min_free_bytes = 8ull << 20});
    REQUIRE(opened);
    auto& s = **opened;
    CHECK_FALSE(s.accepting_runs());
    auto st = s.status();
    CHECK(st.state == StoreState::Refusing);
    CHECK_THAT(st.reason, Catch::Contains("headroom"));
    // records are still written while there is physical room
    auto seq = s.enqueue(test::decision(1, "x", BW_LAYER_BPF_LSM, BW_DECISION_DENY));
    REQUIRE(seq);
    CHECK(s.wait_committed(*seq, 5s));
    CHECK_FALSE(s.accepting_runs());
}
