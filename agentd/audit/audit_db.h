#pragma once
// The audit store: every decision, run lifecycle event, policy epoch, loss
// (gap) and host status snapshot, in one SQLite database.
//
// Threads. One writer thread owns the only write connection. Producers call
// enqueue(), which never blocks on I/O: it takes a short mutex, assigns the
// next sequence number and appends to a bounded queue. When the queue is full
// the record is dropped and counted; the writer then writes a gap record
// ("dropped N records from source S, seqs a..b") in the same transaction as
// the next batch, so no loss is silent. Control records (run start/exit,
// policy epochs, host status) have a reserve of their own on top of the bound
// so a flood of decisions cannot push them out. Readers use separate
// read-only connections (query_only) from a pool; with WAL they never block
// the writer, and a progress handler interrupts any query that runs past its
// deadline.
//
// Batching. The writer takes up to batch_rows queued records (waiting at most
// batch_linger for more once the first arrives) and commits them in one
// transaction. No linger while a control record is queued or a caller waits
// in wait_committed(): a run's start must be durable before its tool runs,
// so its commit starts at once and overlaps the sandbox setup.
//
// Acknowledgement. A record is acknowledged once its transaction committed.
// committed_seq() is the watermark: every seq <= it is either a committed row
// or counted by a committed gap record. wait_committed() blocks a caller
// until its seq is acknowledged.
//
// Durability (decision). journal_mode=WAL with synchronous=NORMAL for bulk
// batches, and synchronous=FULL (the WAL is fsync'ed at COMMIT) for every
// batch that holds a security-relevant record: a deny or audit-mode decision,
// a run start/exit, a policy epoch, a gap or a host status snapshot. Why: a
// committed WAL transaction survives a crash of agentd in either mode (the
// kill -9 test checks this); what NORMAL risks is the last transactions on a
// power loss or kernel crash. Losing a burst of "allow"/"observe" rows then is
// acceptable and recorded nowhere else anyway; losing the denial a tool just
// hit, or the fact that a run started, is not, so those batches pay for an
// fsync. Durability::Full forces FULL for every batch.
//
// Disk full. Before each batch the writer checks statvfs() of the database's
// filesystem against min_free_bytes, and it treats SQLITE_FULL / IOERR at
// commit the same way: the store enters the Refusing state (accepting_runs()
// is false, the daemon refuses new runs and says why), the failed batch is
// kept and retried, and records arriving meanwhile are dropped, counted and
// recorded as one gap once space is back.
#include <sqlite3.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <expected>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "audit/audit_record.h"

namespace bulwark {
struct Metrics;
}

namespace bulwark::audit {

inline constexpr int kSchemaVersion = 2;

struct DbError {
    enum class Code { Open, Schema, Sql, Timeout, Full, Invalid, Closed } code = Code::Sql;
    std::string message;
};

enum class Durability { NormalWithSyncPoints, Full };

struct StoreOptions {
    std::filesystem::path path;
    size_t queue_capacity = 65536;    // decision records waiting for the writer
    size_t control_reserve = 4096;    // extra room for control records
    size_t batch_rows = 8192;
    std::chrono::microseconds batch_linger{1000};
    Durability durability = Durability::NormalWithSyncPoints;
    uint64_t min_free_bytes = 64ull << 20;  // below this: Refusing
    std::chrono::milliseconds query_timeout{2000};
    std::optional<std::chrono::seconds> retention;  // delete rows older than this
    size_t retention_batch = 5000;                  // rows per delete transaction
    std::chrono::milliseconds retention_interval{60000};
    std::chrono::milliseconds retry_interval{500};  // after a failed commit
    size_t reader_pool = 4;
};

enum class StoreState { Ok, Refusing };

struct StoreStatus {
    StoreState state = StoreState::Ok;
    std::string reason;        // why refusing
    uint64_t committed_seq = 0;
    uint64_t last_seq = 0;     // last seq handed out
    size_t queue_depth = 0;
    uint64_t dropped = 0;      // records dropped at enqueue since start
    uint64_t gap_records = 0;
    nlohmann::json to_json() const;
};

struct Query {
    std::optional<int64_t> since_ns;  // ts_ns >= since
    std::optional<int64_t> until_ns;  // ts_ns < until
    std::optional<uint64_t> task_id;
    std::optional<uint64_t> run_id;
    std::optional<std::string> tool;
    std::optional<uint32_t> rule_id;
    std::optional<uint8_t> decision;
    std::optional<uint16_t> layer;
    std::optional<RecordKind> kind;
    uint64_t after_seq = 0;       // keyset paging: rows with seq > after_seq
    uint32_t limit = 100;         // 1..kMaxLimit
    std::optional<std::chrono::milliseconds> timeout;  // default: StoreOptions::query_timeout
    static constexpr uint32_t kMaxLimit = 1000;
};

struct QueryResult {
    std::vector<AuditRecord> rows;
    std::optional<uint64_t> next_after_seq;  // set when more rows may follow
};

class AuditStore;

// Copies of one run's decision records as the store accepts them (each with
// its seq), from AuditStore::watch_run() until the watch is destroyed: the
// exec API answers with a run's decisions without reading them back from the
// database once the run's exit record is committed. It keeps the first
// `limit` of them; a flooding tool costs the watch nothing beyond that.
class RunWatch {
public:
    ~RunWatch();
    RunWatch(const RunWatch&) = delete;
    RunWatch& operator=(const RunWatch&) = delete;
    struct Taken {
        std::vector<AuditRecord> records;  // seq below `before`, in seq order
        bool truncated = false;            // more than `limit` of them were accepted
    };
    Taken decisions_before(uint64_t before) const;
    // Told about every decision record of the run as the store takes it,
    // past the limit too (a profile counts everything a run did). Called on
    // the producer's thread with the store's queue lock held: it must not
    // block and must not call the store.
    using Observer = std::function<void(const AuditRecord&)>;

private:
    friend class AuditStore;
    RunWatch(const AuditStore* store, uint64_t task_id, uint64_t run_id, size_t limit, Observer observer)
        : store_(store), task_id_(task_id), run_id_(run_id), limit_(limit), observer_(std::move(observer)) {}
    void offer(const AuditRecord& r);
    const AuditStore* store_;
    uint64_t task_id_, run_id_;
    size_t limit_;
    Observer observer_;
    mutable std::mutex mu_;
    std::vector<AuditRecord> records_;
    std::optional<uint64_t> first_dropped_;  // seq of the first record past the limit
};

class AuditStore {
public:
    static std::expected<std::unique_ptr<AuditStore>, DbError> open(
        StoreOptions opts, Metrics* metrics = nullptr, CommitListener* listener = nullptr);
    ~AuditStore();  // commits everything queued, then stops the writer
    AuditStore(const AuditStore&) = delete;
    AuditStore& operator=(const AuditStore&) = delete;

    // Never blocks on I/O. Returns the record's seq, or nullopt if it was
    // dropped (counted; a gap record follows).
    std::optional<uint64_t> enqueue(AuditRecord r);
    // A source (e.g. the ring buffer reader's per-CPU reserve failures)
    // reports records it lost before they reached the store; a gap record is
    // written with the next batch.
    void report_source_drops(std::string source, uint64_t count);

    // Watches the decision records of (task_id, run_id) accepted from now on.
    std::unique_ptr<RunWatch> watch_run(uint64_t task_id, uint64_t run_id, size_t limit,
                                        RunWatch::Observer observer = {});

    uint64_t committed_seq() const;
    uint64_t last_seq() const;
    // true once seq is acknowledged (committed or counted by a gap)
    bool wait_committed(uint64_t seq, std::chrono::milliseconds timeout) const;
    // waits for everything enqueued so far
    bool flush(std::chrono::milliseconds timeout) const;

    StoreStatus status() const;
    bool accepting_runs() const;

    std::expected<QueryResult, DbError> query(const Query& q) const;
    // Read-only SQL on a reader connection (diagnostics and tests); rows as
    // arrays. query_only forbids writes; the deadline applies.
    std::expected<nlohmann::json, DbError> read_sql(const std::string& sql,
                                                    std::chrono::milliseconds timeout) const;
    // Deletes rows with ts_ns < cutoff, retention_batch rows per transaction,
    // on the writer thread. Returns the number deleted.
    std::expected<uint64_t, DbError> apply_retention(int64_t cutoff_ns);
    int schema_version() const { return schema_version_; }
    const std::filesystem::path& path() const { return opts_.path; }

private:
    friend class RunWatch;
    struct Impl;
    explicit AuditStore(StoreOptions opts, Metrics* m, CommitListener* l);
    StoreOptions opts_;
    Metrics* metrics_;
    CommitListener* listener_;
    int schema_version_ = 0;
    std::unique_ptr<Impl> impl_;
};

}  // namespace bulwark::audit
