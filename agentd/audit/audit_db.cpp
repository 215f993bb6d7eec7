#include "audit/audit_db.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include <spdlog/spdlog.h>

#include "audit/metrics.h"
#include "common/clock.h"

namespace bulwark::audit {
namespace {

using Clock = std::chrono::steady_clock;

struct DbClose {
    void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
};
struct StmtFinalize {
    void operator()(sqlite3_stmt* s) const noexcept { sqlite3_finalize(s); }
};
using DbPtr = std::unique_ptr<sqlite3, DbClose>;
using StmtPtr = std::unique_ptr<sqlite3_stmt, StmtFinalize>;

struct Migration {
    int version;
    const char* description;
    const char* sql;
};

// Append-only: a released version is never edited; a change is a new entry.
constexpr Migration kMigrations[] = {
    {1, "records table, query indexes, store metadata", R"sql(
CREATE TABLE records(
  seq            INTEGER PRIMARY KEY,
  kind           INTEGER NOT NULL,
  ts_ns          INTEGER NOT NULL,
  task_id        INTEGER,
  run_id         INTEGER,
  tool           TEXT,
  policy_version INTEGER,
  rule_id        INTEGER,            -- NULL: the policy's default decided
  rule_file      TEXT,
  rule_line      INTEGER,
  rule_text      TEXT,
  layer          INTEGER NOT NULL,
  op             INTEGER NOT NULL,
  object         TEXT,
  decision       INTEGER,            -- NULL for non-decision records
  errno          INTEGER NOT NULL DEFAULT 0,
  pid            INTEGER,
  comm           TEXT,
  detail         TEXT                -- JSON object, kind-specific
);
CREATE INDEX records_ts       ON records(ts_ns);
CREATE INDEX records_task     ON records(task_id, seq);
CREATE INDEX records_tool     ON records(tool, seq);
CREATE INDEX records_rule     ON records(rule_id, seq) WHERE rule_id IS NOT NULL;
CREATE INDEX records_decision ON records(decision, seq) WHERE decision IS NOT NULL;
CREATE INDEX records_layer    ON records(layer, seq);
CREATE TABLE store_meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
)sql"},
    {2, "index of run start and exit records (open runs at restart)", R"sql(
CREATE INDEX records_runs ON records(run_id, kind) WHERE kind IN (2, 3);
)sql"},
};
static_assert(std::size(kMigrations) == kSchemaVersion);

constexpr const char* kColumns =
    "seq,kind,ts_ns,task_id,run_id,tool,policy_version,rule_id,rule_file,rule_line,rule_text,"
    "layer,op,object,decision,errno,pid,comm,detail";

DbError sql_error(sqlite3* db, std::string what) {
    int rc = db ? sqlite3_extended_errcode(db) : SQLITE_ERROR;
    int prim = rc & 0xff;
    DbError::Code c = prim == SQLITE_FULL ? DbError::Code::Full
                      : prim == SQLITE_INTERRUPT ? DbError::Code::Timeout
                                                 : DbError::Code::Sql;
    return DbError{c, std::move(what) + ": " + (db ? sqlite3_errmsg(db) : "no connection") +
                          " (" + sqlite3_errstr(rc) + ")"};
}

std::expected<void, DbError> exec(sqlite3* db, const char* sql) {
    char* msg = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &msg) != SQLITE_OK) {
        auto e = sql_error(db, std::string("exec ") + std::string(sql).substr(0, 60));
        sqlite3_free(msg);
        return std::unexpected(e);
    }
    return {};
}

std::expected<StmtPtr, DbError> prepare(sqlite3* db, const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v3(db, sql.c_str(), int(sql.size()), SQLITE_PREPARE_PERSISTENT, &s,
                           nullptr) != SQLITE_OK)
        return std::unexpected(sql_error(db, "prepare " + sql.substr(0, 60)));
    return StmtPtr(s);
}

void bind_text_or_null(sqlite3_stmt* s, int i, const std::string& v) {
    if (v.empty())
        sqlite3_bind_null(s, i);
    else
        sqlite3_bind_text(s, i, v.data(), int(v.size()), SQLITE_STATIC);
}
void bind_u64_or_null(sqlite3_stmt* s, int i, uint64_t v) {
    if (v == 0)
        sqlite3_bind_null(s, i);
    else
        sqlite3_bind_int64(s, i, int64_t(v));
}

std::string col_text(sqlite3_stmt* s, int i) {
    auto p = sqlite3_column_text(s, i);
    return p ? std::string(reinterpret_cast<const char*>(p), size_t(sqlite3_column_bytes(s, i)))
             : std::string();
}

AuditRecord read_row(sqlite3_stmt* s) {
    AuditRecord r;
    r.seq = uint64_t(sqlite3_column_int64(s, 0));
    r.kind = RecordKind(sqlite3_column_int(s, 1));
    r.ts_ns = sqlite3_column_int64(s, 2);
    r.task_id = uint64_t(sqlite3_column_int64(s, 3));
    r.run_id = uint64_t(sqlite3_column_int64(s, 4));
    r.tool = col_text(s, 5);
    r.policy_version = uint64_t(sqlite3_column_int64(s, 6));
    r.rule_id = sqlite3_column_type(s, 7) == SQLITE_NULL ? BW_NO_RULE : uint32_t(sqlite3_column_int64(s, 7));
    r.rule_file = col_text(s, 8);
    r.rule_line = uint32_t(sqlite3_column_int64(s, 9));
    r.rule_text = col_text(s, 10);
    r.layer = uint16_t(sqlite3_column_int(s, 11));
    r.op = uint16_t(sqlite3_column_int(s, 12));
    r.object = col_text(s, 13);
    r.decision = sqlite3_column_type(s, 14) == SQLITE_NULL ? uint8_t(BW_DECISION_OBSERVE)
                                                           : uint8_t(sqlite3_column_int(s, 14));
    r.err = sqlite3_column_int(s, 15);
    r.pid = uint32_t(sqlite3_column_int64(s, 16));
    r.comm = col_text(s, 17);
    r.detail = col_text(s, 18);
    return r;
}

// A profile snapshot is neither: it only saves a restart the replay of the
// runs recorded before it (docs/profiles.md), so it is batched and synced like
// an allowed decision, and a full queue may drop it (a gap says so).
bool security_relevant(const AuditRecord& r) {
    if (r.kind == RecordKind::Profile) return false;
    if (r.kind != RecordKind::Decision) return true;
    return r.decision == BW_DECISION_DENY || r.decision == BW_DECISION_AUDIT;
}

bool is_control(const AuditRecord& r) { return r.kind != RecordKind::Decision && r.kind != RecordKind::Profile; }

int64_t mono_ns() { return steady_now_ns(); }

struct Deadline {
    Clock::time_point at;
};
int progress_cb(void* p) { return Clock::now() > static_cast<Deadline*>(p)->at ? 1 : 0; }

}  // namespace

nlohmann::json StoreStatus::to_json() const {
    nlohmann::json j{{"state", state == StoreState::Ok ? "ok" : "refusing"},
                     {"committed_seq", committed_seq},
                     {"last_seq", last_seq},
                     {"queue_depth", queue_depth},
                     {"dropped", dropped},
                     {"gap_records", gap_records}};
    if (!reason.empty()) j["reason"] = reason;
    return j;
}

struct AuditStore::Impl {
    AuditStore& self;
    DbPtr wdb;
    StmtPtr insert;
    bool sync_full = false;  // current synchronous setting of wdb

    mutable std::mutex mu;
    std::condition_variable work_cv;
    // Callers blocked in wait_committed(): the writer skips its linger for them.
    mutable size_t waiters = 0;
    mutable std::condition_variable commit_cv;
    // A queue entry. Losses are queued too, as gap records at the place in
    // the seq order where they happened: a drop increments the gap at the
    // queue's tail, or queues a new one (from the control reserve), so the
    // gap is committed in order and the watermark stays exact.
    struct Item {
        AuditRecord r;
        uint64_t gap_count = 0;  // r.kind == Gap: records lost
        std::string gap_source;
        bool urgent = false;  // a control record: committed without lingering
    };
    std::deque<Item> q;
    // Control records queued (run start and exit, epochs, host status): a
    // caller is usually about to wait for one, so the writer commits at once.
    size_t urgent_queued = 0;
    uint64_t next_seq = 1;
    std::vector<RunWatch*> watches;  // guarded by mu
    // losses that found no room even for a gap entry (queue and reserve
    // full), and losses reported by sources; written once the queue drains
    std::vector<std::pair<std::string, uint64_t>> pending_gaps;
    bool stop = false;
    // retention requests
    struct RetentionReq {
        int64_t cutoff;
        uint64_t deleted = 0;
        bool done = false;
        std::optional<DbError> error;
    };
    std::shared_ptr<RetentionReq> retention;
    std::condition_variable retention_cv;

    std::atomic<uint64_t> committed{0};
    std::atomic<uint64_t> dropped_total{0};
    std::atomic<uint64_t> gaps_total{0};
    std::atomic<bool> refusing{false};
    std::string refuse_reason;  // under mu
    bool full_error = false;    // writer only: last commit failed for lack of space

    std::thread writer;

    // Checkpoints run on their own connection and thread, so copying the WAL
    // into the database (and its fsync) never stalls a commit. The writer's
    // WAL hook wakes the checkpointer once the WAL passes kCheckpointPages.
    static constexpr int kCheckpointPages = 1000;
    DbPtr ckdb;
    std::thread checkpointer;
    std::mutex ck_mu;
    std::condition_variable ck_cv;
    bool ck_due = false;
    bool ck_stop = false;

    static int wal_hook(void* p, sqlite3*, const char*, int pages) {
        if (pages >= kCheckpointPages) {
            auto* self = static_cast<Impl*>(p);
            {
                std::lock_guard lk(self->ck_mu);
                self->ck_due = true;
            }
            self->ck_cv.notify_one();
        }
        return SQLITE_OK;
    }

    void run_checkpointer() {
        std::unique_lock lk(ck_mu);
        for (;;) {
            ck_cv.wait_for(lk, std::chrono::seconds(5), [&] { return ck_due || ck_stop; });
            if (ck_stop) return;
            ck_due = false;
            lk.unlock();
            int log = 0, done = 0;
            int rc = sqlite3_wal_checkpoint_v2(ckdb.get(), nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
            if (rc != SQLITE_OK && rc != SQLITE_BUSY)
                spdlog::debug("audit store checkpoint: {}", sqlite3_errmsg(ckdb.get()));
            lk.lock();
        }
    }

    mutable std::mutex pool_mu;
    mutable std::condition_variable pool_cv;
    mutable std::vector<DbPtr> pool;
    // Reader connections in existence (pooled + leased), at most reader_pool:
    // a burst of queries waits for a connection instead of opening more (each
    // closed SQLite connection can leave its descriptor parked for reuse).
    mutable size_t readers_open = 0;

    explicit Impl(AuditStore& s) : self(s) {}

    void set_refusing(std::string why) {
        std::lock_guard lk(mu);
        if (!refusing.load() || refuse_reason != why)
            spdlog::error("audit store refusing new runs: {}", why);
        refuse_reason = std::move(why);
        refusing.store(true);
        if (self.metrics_) self.metrics_->store_refusing.store(1);
    }
    void clear_refusing() {
        std::lock_guard lk(mu);
        if (refusing.load()) spdlog::warn("audit store accepting runs again");
        refuse_reason.clear();
        refusing.store(false);
        if (self.metrics_) self.metrics_->store_refusing.store(0);
    }

    // Headroom check on the database's filesystem; true if enough space.
    bool headroom_ok(std::string& why) const {
        if (self.opts_.min_free_bytes == 0) return true;
        struct statvfs st{};
        auto dir = self.opts_.path.parent_path();
        if (dir.empty()) dir = ".";
        if (statvfs(dir.c_str(), &st) != 0) {
            why = "statvfs(" + dir.string() + "): " + std::strerror(errno);
            return false;
        }
        uint64_t avail = uint64_t(st.f_bavail) * st.f_frsize;
        if (avail < self.opts_.min_free_bytes) {
            why = "disk full: " + std::to_string(avail) + " bytes free on " + dir.string() +
                  ", below the audit store's headroom of " +
                  std::to_string(self.opts_.min_free_bytes) + " bytes";
            return false;
        }
        return true;
    }

    std::expected<void, DbError> write_batch(const std::vector<AuditRecord>& batch) {
        bool want_full = self.opts_.durability == Durability::Full ||
                         std::any_of(batch.begin(), batch.end(), security_relevant);
        if (want_full != sync_full) {
            if (auto r = exec(wdb.get(), want_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"); !r)
                return r;
            sync_full = want_full;
        }
        if (auto r = exec(wdb.get(), "BEGIN IMMEDIATE"); !r) return r;
        sqlite3_stmt* s = insert.get();
        for (const auto& r : batch) {
            sqlite3_bind_int64(s, 1, int64_t(r.seq));
            sqlite3_bind_int(s, 2, int(r.kind));
            sqlite3_bind_int64(s, 3, r.ts_ns);
            bind_u64_or_null(s, 4, r.task_id);
            bind_u64_or_null(s, 5, r.run_id);
            bind_text_or_null(s, 6, r.tool);
            bind_u64_or_null(s, 7, r.policy_version);
            if (r.kind == RecordKind::Decision && r.rule_id != BW_NO_RULE)
                sqlite3_bind_int64(s, 8, r.rule_id);
            else
                sqlite3_bind_null(s, 8);
            bind_text_or_null(s, 9, r.rule_file);
            if (r.rule_line) sqlite3_bind_int64(s, 10, r.rule_line); else sqlite3_bind_null(s, 10);
            bind_text_or_null(s, 11, r.rule_text);
            sqlite3_bind_int(s, 12, r.layer);
            sqlite3_bind_int(s, 13, r.op);
            bind_text_or_null(s, 14, r.object);
            if (r.kind == RecordKind::Decision) sqlite3_bind_int(s, 15, r.decision); else sqlite3_bind_null(s, 15);
            sqlite3_bind_int(s, 16, r.err);
            if (r.pid) sqlite3_bind_int64(s, 17, r.pid); else sqlite3_bind_null(s, 17);
            bind_text_or_null(s, 18, r.comm);
            bind_text_or_null(s, 19, r.detail);
            int rc = sqlite3_step(s);
            sqlite3_reset(s);
            if (rc != SQLITE_DONE) {
                auto e = sql_error(wdb.get(), "insert seq " + std::to_string(r.seq));
                rollback();
                return std::unexpected(e);
            }
        }
        if (sqlite3_exec(wdb.get(), "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
            auto e = sql_error(wdb.get(), "commit");
            rollback();
            return std::unexpected(e);
        }
        return {};
    }

    void rollback() {
        if (!sqlite3_get_autocommit(wdb.get()))
            sqlite3_exec(wdb.get(), "ROLLBACK", nullptr, nullptr, nullptr);
    }

    // One chunk of retention; returns rows deleted.
    std::expected<uint64_t, DbError> retention_chunk(int64_t cutoff) {
        if (auto r = exec(wdb.get(), "BEGIN IMMEDIATE"); !r) return std::unexpected(r.error());
        auto st = prepare(wdb.get(),
                          "DELETE FROM records WHERE seq IN (SELECT seq FROM records WHERE ts_ns < ?1 "
                          "LIMIT ?2) RETURNING seq");
        if (!st) {
            rollback();
            return std::unexpected(st.error());
        }
        sqlite3_bind_int64(st->get(), 1, cutoff);
        sqlite3_bind_int64(st->get(), 2, int64_t(self.opts_.retention_batch));
        uint64_t n = 0;
        int64_t max_seq = 0;
        int rc;
        while ((rc = sqlite3_step(st->get())) == SQLITE_ROW) {
            ++n;
            max_seq = std::max<int64_t>(max_seq, sqlite3_column_int64(st->get(), 0));
        }
        st->reset();
        if (rc != SQLITE_DONE) {
            auto e = sql_error(wdb.get(), "retention delete");
            rollback();
            return std::unexpected(e);
        }
        // Remember the highest seq ever deleted so a reopened store never
        // hands out a seq again even if retention emptied the table.
        if (max_seq) {
            auto m = prepare(wdb.get(),
                             "INSERT INTO store_meta(key,value) VALUES('deleted_through_seq',?1) "
                             "ON CONFLICT(key) DO UPDATE SET value=max(value,excluded.value)");
            if (!m) {
                rollback();
                return std::unexpected(m.error());
            }
            sqlite3_bind_int64(m->get(), 1, max_seq);
            if (sqlite3_step(m->get()) != SQLITE_DONE) {
                auto e = sql_error(wdb.get(), "retention meta");
                rollback();
                return std::unexpected(e);
            }
        }
        if (sqlite3_exec(wdb.get(), "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
            auto e = sql_error(wdb.get(), "retention commit");
            rollback();
            return std::unexpected(e);
        }
        return n;
    }

    void run_writer() {
        std::vector<AuditRecord> batch;
        batch.reserve(self.opts_.batch_rows + 8);
        bool held = false;  // batch failed to commit; retry it before anything else
        auto next_retention = Clock::now() + self.opts_.retention_interval;
        std::shared_ptr<RetentionReq> auto_retention;
        for (;;) {
            std::shared_ptr<RetentionReq> ret;
            bool stopping;
            {
                std::unique_lock lk(mu);
                if (held) {
                    work_cv.wait_for(lk, self.opts_.retry_interval, [&] { return stop; });
                } else {
                    work_cv.wait_until(lk, next_retention, [&] {
                        return stop || !q.empty() || !pending_gaps.empty() || retention;
                    });
                    if (!q.empty() && q.size() < self.opts_.batch_rows && !stop && urgent_queued == 0 &&
                        self.opts_.batch_linger.count() > 0) {
                        work_cv.wait_for(lk, self.opts_.batch_linger, [&] {
                            return stop || waiters > 0 || urgent_queued > 0 || q.size() >= self.opts_.batch_rows;
                        });
                    }
                    while (!q.empty() && batch.size() < self.opts_.batch_rows) {
                        Item& it = q.front();
                        if (it.urgent) --urgent_queued;
                        if (it.r.kind == RecordKind::Gap && it.gap_count) {
                            auto seq = it.r.seq;
                            auto mono = it.r.enqueued_mono_ns;
                            it.r = gap_record(it.gap_source, it.gap_count, seq);
                            it.r.seq = seq;
                            it.r.enqueued_mono_ns = mono;
                        }
                        batch.push_back(std::move(it.r));
                        q.pop_front();
                    }
                    // Losses with no queue slot of their own: only once the
                    // queue is drained can their seq come after everything.
                    if (q.empty()) {
                        for (auto& [src, n] : pending_gaps) {
                            auto g = gap_record(src, n, next_seq);
                            g.seq = next_seq++;
                            g.enqueued_mono_ns = mono_ns();
                            batch.push_back(std::move(g));
                        }
                        pending_gaps.clear();
                    }
                    if (self.metrics_) self.metrics_->queue_depth.store(q.size(), std::memory_order_relaxed);
                }
                ret = retention;
                stopping = stop;
            }

            if (!batch.empty()) {
                std::string why;
                bool room = headroom_ok(why);
                auto t0 = Clock::now();
                auto res = write_batch(batch);
                if (res) {
                    auto t1 = Clock::now();
                    held = false;
                    full_error = false;
                    if (room) {
                        if (refusing.load()) clear_refusing();
                    } else {
                        set_refusing(why);
                    }
                    committed_batch(batch, t1 - t0);
                    batch.clear();
                } else {
                    if (self.metrics_) self.metrics_->commit_failures.fetch_add(1);
                    held = true;
                    full_error = res.error().code == DbError::Code::Full;
                    set_refusing(full_error || !room ? (room ? "disk full: " + res.error().message : why)
                                                      : "audit store write failed: " + res.error().message);
                    if (stopping) {
                        spdlog::error("audit store: {} records could not be written at shutdown: {}",
                                      batch.size(), res.error().message);
                        break;
                    }
                    continue;
                }
            } else if (refusing.load() && !held) {
                // idle: re-check whether space came back
                std::string why;
                if (headroom_ok(why)) clear_refusing();
            }

            if (self.opts_.retention && Clock::now() >= next_retention) {
                next_retention = Clock::now() + self.opts_.retention_interval;
                if (!ret) {
                    auto_retention = std::make_shared<RetentionReq>();
                    auto_retention->cutoff = realtime_now_ns() -
                        std::chrono::duration_cast<std::chrono::nanoseconds>(*self.opts_.retention).count();
                    std::lock_guard lk(mu);
                    retention = auto_retention;
                    ret = retention;
                }
            } else if (!self.opts_.retention) {
                next_retention = Clock::now() + std::chrono::hours(24);
            }
            if (ret) {
                // one chunk per loop: inserts keep flowing between chunks
                auto n = retention_chunk(ret->cutoff);
                std::lock_guard lk(mu);
                if (!n) {
                    ret->error = n.error();
                    ret->done = true;
                } else {
                    ret->deleted += *n;
                    if (self.metrics_) self.metrics_->retention_deleted.fetch_add(*n);
                    if (*n < self.opts_.retention_batch) ret->done = true;
                }
                if (ret->done) {
                    if (retention == ret) retention.reset();
                    retention_cv.notify_all();
                }
            }

            if (stopping) {
                std::lock_guard lk(mu);
                if (q.empty() && pending_gaps.empty()) break;
            }
        }
        // wake anyone waiting on a retention request that will never run
        std::lock_guard lk(mu);
        if (retention) {
            retention->error = DbError{DbError::Code::Closed, "audit store closed"};
            retention->done = true;
            retention.reset();
        }
        retention_cv.notify_all();
    }

    void committed_batch(std::vector<AuditRecord>& batch, Clock::duration took) {
        uint64_t max_seq = 0;
        int64_t now = mono_ns();
        Metrics* m = self.metrics_;
        for (const auto& r : batch) {
            max_seq = std::max(max_seq, r.seq);
            if (!m) continue;
            if (r.kind == RecordKind::Decision) m->count_decision(r.layer, r.decision);
            if (r.kind == RecordKind::Gap) m->gap_records.fetch_add(1, std::memory_order_relaxed);
            if (r.enqueued_mono_ns) m->event_to_commit_latency.observe(double(now - r.enqueued_mono_ns) / 1e9);
        }
        for (const auto& r : batch)
            if (r.kind == RecordKind::Gap) gaps_total.fetch_add(1);
        if (m) {
            m->rows_committed.fetch_add(batch.size(), std::memory_order_relaxed);
            m->batches_committed.fetch_add(1, std::memory_order_relaxed);
            m->commit_latency.observe(std::chrono::duration<double>(took).count());
        }
        // Subscribers see the batch before anyone is told it is acknowledged,
        // so "acknowledged" implies "published".
        if (self.listener_) self.listener_->on_committed_owned(batch);  // the batch is cleared after
        {
            std::lock_guard lk(mu);
            if (max_seq > committed.load()) committed.store(max_seq, std::memory_order_release);
        }
        commit_cv.notify_all();
    }

    std::expected<DbPtr, DbError> open_reader() const {
        sqlite3* db = nullptr;
        int rc = sqlite3_open_v2(self.opts_.path.c_str(), &db,
                                 SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
        DbPtr p(db);
        if (rc != SQLITE_OK) return std::unexpected(sql_error(db, "open reader " + self.opts_.path.string()));
        sqlite3_busy_timeout(db, 1000);
        if (auto r = exec(db, "PRAGMA query_only=1"); !r) return std::unexpected(r.error());
        return p;
    }

    struct Lease {
        const Impl* impl;
        DbPtr db;
        Lease(const Impl* i, DbPtr d) : impl(i), db(std::move(d)) {}
        Lease(Lease&&) = default;
        ~Lease() {
            if (!db) return;
            sqlite3_progress_handler(db.get(), 0, nullptr, nullptr);
            {
                std::lock_guard lk(impl->pool_mu);
                impl->pool.push_back(std::move(db));
            }
            impl->pool_cv.notify_one();
        }
    };
    std::expected<Lease, DbError> lease() const {
        {
            std::unique_lock lk(pool_mu);
            size_t cap = std::max<size_t>(1, self.opts_.reader_pool);
            if (!pool_cv.wait_for(lk, self.opts_.query_timeout, [&] { return !pool.empty() || readers_open < cap; }))
                return std::unexpected(DbError{DbError::Code::Timeout, "no reader connection became free in time"});
            if (!pool.empty()) {
                DbPtr db = std::move(pool.back());
                pool.pop_back();
                return Lease{this, std::move(db)};
            }
            ++readers_open;
        }
        auto db = open_reader();
        if (!db) {
            std::lock_guard lk(pool_mu);
            --readers_open;
            pool_cv.notify_one();
            return std::unexpected(db.error());
        }
        return Lease{this, std::move(*db)};
    }
};

AuditStore::AuditStore(StoreOptions opts, Metrics* m, CommitListener* l)
    : opts_(std::move(opts)), metrics_(m), listener_(l), impl_(std::make_unique<Impl>(*this)) {}

AuditStore::~AuditStore() {
    if (!impl_) return;
    {
        std::lock_guard lk(impl_->mu);
        impl_->stop = true;
    }
    impl_->work_cv.notify_all();
    if (impl_->checkpointer.joinable()) {
        {
            std::lock_guard lk(impl_->ck_mu);
            impl_->ck_stop = true;
        }
        impl_->ck_cv.notify_all();
        impl_->checkpointer.join();
    }
    if (impl_->writer.joinable()) impl_->writer.join();
    if (impl_->wdb) {
        // fold the WAL back into the database on a clean shutdown
        sqlite3_exec(impl_->wdb.get(), "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr);
    }
}

std::expected<std::unique_ptr<AuditStore>, DbError> AuditStore::open(StoreOptions opts, Metrics* m,
                                                                     CommitListener* l) {
    if (opts.batch_rows == 0 || opts.queue_capacity == 0)
        return std::unexpected(DbError{DbError::Code::Invalid, "batch_rows and queue_capacity must be > 0"});
    std::unique_ptr<AuditStore> s(new AuditStore(std::move(opts), m, l));
    auto& I = *s->impl_;
    sqlite3* db = nullptr;
    int rc = sqlite3_open_v2(s->opts_.path.c_str(), &db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    I.wdb.reset(db);
    if (rc != SQLITE_OK)
        return std::unexpected(DbError{DbError::Code::Open, "open " + s->opts_.path.string() + ": " +
                                                                (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc))});
    sqlite3_busy_timeout(db, 5000);
    for (const char* p : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA cache_size=-8192",
                          "PRAGMA temp_store=MEMORY", "PRAGMA journal_size_limit=67108864"}) {
        if (auto r = exec(db, p); !r) return std::unexpected(DbError{DbError::Code::Open, r.error().message});
    }
    {
        auto st = prepare(db, "PRAGMA journal_mode");
        if (!st || sqlite3_step(st->get()) != SQLITE_ROW || col_text(st->get(), 0) != "wal")
            return std::unexpected(DbError{DbError::Code::Open, "audit store needs WAL mode; the filesystem of " +
                                                                    s->opts_.path.string() + " refused it"});
    }

    // Schema and migrations.
    if (auto r = exec(db, "CREATE TABLE IF NOT EXISTS schema_migrations(version INTEGER PRIMARY KEY, "
                          "description TEXT NOT NULL, applied_at_ns INTEGER NOT NULL)");
        !r)
        return std::unexpected(DbError{DbError::Code::Schema, r.error().message});
    int current = 0;
    {
        auto st = prepare(db, "SELECT coalesce(max(version),0) FROM schema_migrations");
        if (!st || sqlite3_step(st->get()) != SQLITE_ROW)
            return std::unexpected(DbError{DbError::Code::Schema, "read schema_migrations"});
        current = sqlite3_column_int(st->get(), 0);
    }
    if (current > kSchemaVersion)
        return std::unexpected(DbError{DbError::Code::Schema,
                                       s->opts_.path.string() + ": audit schema version " + std::to_string(current) +
                                           " is newer than this agentd understands (" +
                                           std::to_string(kSchemaVersion) + "); refusing to open"});
    for (const auto& mig : kMigrations) {
        if (mig.version <= current) continue;
        if (auto r = exec(db, "BEGIN IMMEDIATE"); !r) return std::unexpected(r.error());
        auto r = exec(db, mig.sql);
        if (r) {
            auto st = prepare(db, "INSERT INTO schema_migrations VALUES(?1,?2,?3)");
            if (!st) {
                r = std::unexpected(st.error());
            } else {
                sqlite3_bind_int(st->get(), 1, mig.version);
                sqlite3_bind_text(st->get(), 2, mig.description, -1, SQLITE_STATIC);
                sqlite3_bind_int64(st->get(), 3, realtime_now_ns());
                if (sqlite3_step(st->get()) != SQLITE_DONE)
                    r = std::unexpected(sql_error(db, "record migration"));
            }
        }
        if (r) r = exec(db, "COMMIT");
        if (!r) {
            exec(db, "ROLLBACK");
            return std::unexpected(DbError{DbError::Code::Schema, "migration " + std::to_string(mig.version) +
                                                                      " (" + mig.description +
                                                                      "): " + r.error().message});
        }
        spdlog::info("audit store {}: applied schema migration {} ({})", s->opts_.path.string(), mig.version,
                     mig.description);
    }
    s->schema_version_ = kSchemaVersion;

    {
        auto st = prepare(db, "SELECT max(coalesce((SELECT max(seq) FROM records),0), coalesce((SELECT value "
                              "FROM store_meta WHERE key='deleted_through_seq'),0))");
        if (!st || sqlite3_step(st->get()) != SQLITE_ROW)
            return std::unexpected(sql_error(db, "read last seq"));
        uint64_t last = uint64_t(sqlite3_column_int64(st->get(), 0));
        I.next_seq = last + 1;
        I.committed.store(last);
    }
    auto ins = prepare(db, std::string("INSERT INTO records(") + kColumns +
                               ") VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19)");
    if (!ins) return std::unexpected(ins.error());
    I.insert = std::move(*ins);

    std::string why;
    if (!I.headroom_ok(why)) I.set_refusing(why);
    {
        sqlite3* ck = nullptr;
        if (sqlite3_open_v2(s->opts_.path.c_str(), &ck, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) !=
            SQLITE_OK) {
            auto e = sql_error(ck, "open checkpoint connection");
            sqlite3_close_v2(ck);
            return std::unexpected(e);
        }
        I.ckdb.reset(ck);
        sqlite3_busy_timeout(ck, 100);
        // replaces SQLite's automatic checkpoint on the writer connection
        sqlite3_wal_hook(db, &Impl::wal_hook, &I);
    }
    I.writer = std::thread([&I] { I.run_writer(); });
    I.checkpointer = std::thread([&I] { I.run_checkpointer(); });
    return s;
}

std::optional<uint64_t> AuditStore::enqueue(AuditRecord r) {
    auto& I = *impl_;
    r.enqueued_mono_ns = mono_ns();
    bool wake;
    uint64_t seq;
    {
        std::lock_guard lk(I.mu);
        size_t hard = opts_.queue_capacity + opts_.control_reserve;
        size_t cap = is_control(r) ? hard : opts_.queue_capacity;
        if (I.q.size() >= cap || I.stop) {
            I.dropped_total.fetch_add(1, std::memory_order_relaxed);
            if (metrics_) metrics_->records_dropped.fetch_add(1, std::memory_order_relaxed);
            if (I.stop) {
                spdlog::error("audit store closed: record of kind {} dropped", kind_name(r.kind));
                return std::nullopt;
            }
            auto& q = I.q;
            if (!q.empty() && q.back().r.kind == RecordKind::Gap && q.back().gap_source == "audit_queue") {
                ++q.back().gap_count;  // the loss continues the gap at the tail
            } else if (q.size() < hard) {
                Impl::Item g;
                g.r.kind = RecordKind::Gap;
                g.r.seq = I.next_seq++;
                g.r.enqueued_mono_ns = r.enqueued_mono_ns;
                g.gap_count = 1;
                g.gap_source = "audit_queue";
                q.push_back(std::move(g));
            } else if (!I.pending_gaps.empty() && I.pending_gaps.back().first == "audit_queue") {
                ++I.pending_gaps.back().second;
            } else {
                I.pending_gaps.emplace_back("audit_queue", 1);
            }
            return std::nullopt;
        }
        seq = I.next_seq++;
        r.seq = seq;
        for (RunWatch* w : I.watches) w->offer(r);
        bool urgent = is_control(r);
        I.q.push_back(Impl::Item{std::move(r), 0, {}, urgent});
        if (urgent) ++I.urgent_queued;
        wake = urgent || I.q.size() == 1 || I.q.size() == opts_.batch_rows;
        if (metrics_) metrics_->queue_depth.store(I.q.size(), std::memory_order_relaxed);
    }
    if (wake) I.work_cv.notify_one();
    return seq;
}

void AuditStore::report_source_drops(std::string source, uint64_t count) {
    if (!count) return;
    auto& I = *impl_;
    {
        std::lock_guard lk(I.mu);
        if (I.q.size() < opts_.queue_capacity + opts_.control_reserve && !I.stop) {
            Impl::Item g;
            g.r.kind = RecordKind::Gap;
            g.r.seq = I.next_seq++;
            g.r.enqueued_mono_ns = mono_ns();
            g.gap_count = count;
            g.gap_source = std::move(source);
            I.q.push_back(std::move(g));
        } else {
            I.pending_gaps.emplace_back(std::move(source), count);
        }
    }
    if (metrics_) metrics_->source_drops.fetch_add(count, std::memory_order_relaxed);
    I.work_cv.notify_one();
}

std::unique_ptr<RunWatch> AuditStore::watch_run(uint64_t task_id, uint64_t run_id, size_t limit,
                                                RunWatch::Observer observer) {
    std::unique_ptr<RunWatch> w(new RunWatch(this, task_id, run_id, limit, std::move(observer)));
    std::lock_guard lk(impl_->mu);
    impl_->watches.push_back(w.get());
    return w;
}

RunWatch::~RunWatch() {
    std::lock_guard lk(store_->impl_->mu);
    std::erase(store_->impl_->watches, this);
}

void RunWatch::offer(const AuditRecord& r) {
    if (r.kind != RecordKind::Decision || r.run_id != run_id_ || r.task_id != task_id_) return;
    if (observer_) observer_(r);
    std::lock_guard lk(mu_);
    if (records_.size() < limit_)
        records_.push_back(r);
    else if (!first_dropped_)
        first_dropped_ = r.seq;
}

RunWatch::Taken RunWatch::decisions_before(uint64_t before) const {
    std::lock_guard lk(mu_);
    Taken t;
    for (const auto& r : records_)
        if (r.seq < before) t.records.push_back(r);
    t.truncated = first_dropped_ && *first_dropped_ < before;
    return t;
}

uint64_t AuditStore::committed_seq() const { return impl_->committed.load(std::memory_order_acquire); }
uint64_t AuditStore::last_seq() const {
    std::lock_guard lk(impl_->mu);
    return impl_->next_seq - 1;
}

bool AuditStore::wait_committed(uint64_t seq, std::chrono::milliseconds timeout) const {
    std::unique_lock lk(impl_->mu);
    if (impl_->committed.load() >= seq) return true;
    // Somebody waits: the writer commits what it has without lingering.
    ++impl_->waiters;
    impl_->work_cv.notify_one();
    bool ok = impl_->commit_cv.wait_for(lk, timeout, [&] { return impl_->committed.load() >= seq; });
    --impl_->waiters;
    return ok;
}

bool AuditStore::flush(std::chrono::milliseconds timeout) const {
    uint64_t target;
    {
        std::lock_guard lk(impl_->mu);
        target = impl_->next_seq - 1;
        // losses not yet queued get the next seq once the queue drains
        if (!impl_->pending_gaps.empty()) target = impl_->next_seq;
    }
    impl_->work_cv.notify_one();
    return wait_committed(target, timeout);
}

StoreStatus AuditStore::status() const {
    StoreStatus st;
    std::lock_guard lk(impl_->mu);
    st.state = impl_->refusing.load() ? StoreState::Refusing : StoreState::Ok;
    st.reason = impl_->refuse_reason;
    st.committed_seq = impl_->committed.load();
    st.last_seq = impl_->next_seq - 1;
    st.queue_depth = impl_->q.size();
    st.dropped = impl_->dropped_total.load();
    st.gap_records = impl_->gaps_total.load();
    return st;
}

bool AuditStore::accepting_runs() const { return !impl_->refusing.load(); }

std::expected<QueryResult, DbError> AuditStore::query(const Query& q) const {
    if (q.limit == 0 || q.limit > Query::kMaxLimit)
        return std::unexpected(DbError{DbError::Code::Invalid,
                                       "limit must be 1.." + std::to_string(Query::kMaxLimit)});
    std::string sql = std::string("SELECT ") + kColumns + " FROM records WHERE seq > ?";
    std::vector<std::function<void(sqlite3_stmt*, int)>> binds;
    binds.push_back([v = int64_t(q.after_seq)](sqlite3_stmt* s, int i) { sqlite3_bind_int64(s, i, v); });
    auto add_int = [&](const char* cond, int64_t v) {
        sql += cond;
        binds.push_back([v](sqlite3_stmt* s, int i) { sqlite3_bind_int64(s, i, v); });
    };
    if (q.since_ns) add_int(" AND ts_ns >= ?", *q.since_ns);
    if (q.until_ns) add_int(" AND ts_ns < ?", *q.until_ns);
    if (q.task_id) add_int(" AND task_id = ?", int64_t(*q.task_id));
    if (q.run_id) add_int(" AND run_id = ?", int64_t(*q.run_id));
    if (q.rule_id) add_int(" AND rule_id = ?", *q.rule_id);
    if (q.decision) add_int(" AND decision = ?", *q.decision);
    if (q.layer) add_int(" AND layer = ?", *q.layer);
    if (q.kind) add_int(" AND kind = ?", int64_t(*q.kind));
    if (q.tool) {
        sql += " AND tool = ?";
        binds.push_back([v = *q.tool](sqlite3_stmt* s, int i) {
            sqlite3_bind_text(s, i, v.data(), int(v.size()), SQLITE_TRANSIENT);
        });
    }
    sql += " ORDER BY seq LIMIT ?";
    add_int("", int64_t(q.limit) + 1);

    auto lease = impl_->lease();
    if (!lease) return std::unexpected(lease.error());
    sqlite3* db = lease->db.get();
    auto st = prepare(db, sql);
    if (!st) return std::unexpected(st.error());
    for (size_t i = 0; i < binds.size(); ++i) binds[i](st->get(), int(i + 1));
    auto timeout = q.timeout.value_or(opts_.query_timeout);
    Deadline dl{Clock::now() + timeout};
    sqlite3_progress_handler(db, 1000, progress_cb, &dl);
    QueryResult res;
    int rc;
    while ((rc = sqlite3_step(st->get())) == SQLITE_ROW) {
        if (res.rows.size() == q.limit) {
            res.next_after_seq = res.rows.back().seq;
            break;
        }
        res.rows.push_back(read_row(st->get()));
    }
    sqlite3_progress_handler(db, 0, nullptr, nullptr);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        if ((rc & 0xff) == SQLITE_INTERRUPT) {
            if (metrics_) metrics_->queries_interrupted.fetch_add(1);
            return std::unexpected(DbError{DbError::Code::Timeout, "audit query exceeded its deadline of " +
                                                                       std::to_string(timeout.count()) + " ms"});
        }
        return std::unexpected(sql_error(db, "audit query"));
    }
    return res;
}

std::expected<nlohmann::json, DbError> AuditStore::read_sql(const std::string& sql,
                                                            std::chrono::milliseconds timeout) const {
    auto lease = impl_->lease();
    if (!lease) return std::unexpected(lease.error());
    sqlite3* db = lease->db.get();
    auto st = prepare(db, sql);
    if (!st) return std::unexpected(st.error());
    Deadline dl{Clock::now() + timeout};
    sqlite3_progress_handler(db, 1000, progress_cb, &dl);
    nlohmann::json rows = nlohmann::json::array();
    int rc;
    while ((rc = sqlite3_step(st->get())) == SQLITE_ROW) {
        nlohmann::json row = nlohmann::json::array();
        for (int i = 0; i < sqlite3_column_count(st->get()); ++i) {
            switch (sqlite3_column_type(st->get(), i)) {
            case SQLITE_INTEGER: row.push_back(sqlite3_column_int64(st->get(), i)); break;
            case SQLITE_FLOAT: row.push_back(sqlite3_column_double(st->get(), i)); break;
            case SQLITE_NULL: row.push_back(nullptr); break;
            default: row.push_back(col_text(st->get(), i));
            }
        }
        rows.push_back(std::move(row));
    }
    sqlite3_progress_handler(db, 0, nullptr, nullptr);
    if (rc != SQLITE_DONE) {
        if ((rc & 0xff) == SQLITE_INTERRUPT) {
            if (metrics_) metrics_->queries_interrupted.fetch_add(1);
            return std::unexpected(DbError{DbError::Code::Timeout, "query exceeded its deadline of " +
                                                                       std::to_string(timeout.count()) + " ms"});
        }
        return std::unexpected(sql_error(db, "read_sql"));
    }
    return rows;
}

std::expected<uint64_t, DbError> AuditStore::apply_retention(int64_t cutoff_ns) {
    auto& I = *impl_;
    auto req = std::make_shared<Impl::RetentionReq>();
    req->cutoff = cutoff_ns;
    std::unique_lock lk(I.mu);
    I.retention_cv.wait(lk, [&] { return !I.retention || I.stop; });
    if (I.stop) return std::unexpected(DbError{DbError::Code::Closed, "audit store closed"});
    I.retention = req;
    I.work_cv.notify_one();
    I.retention_cv.wait(lk, [&] { return req->done; });
    if (req->error) return std::unexpected(*req->error);
    return req->deleted;
}

}  // namespace bulwark::audit
