#include "audit_test_util.h"

#include <stdexcept>

namespace bulwark::test {

TempDir::TempDir() {
    char tmpl[] = "/tmp/bulwark-audit-XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
}
TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
}

audit::AuditRecord decision(uint64_t task, const std::string& tool, uint16_t layer, uint8_t dec,
                            uint32_t rule_id, std::string object) {
    audit::AuditRecord r;
    r.kind = audit::RecordKind::Decision;
    r.ts_ns = audit::realtime_now_ns();
    r.task_id = task;
    r.run_id = task * 10 + 1;
    r.tool = tool;
    r.policy_version = 7;
    r.rule_id = rule_id;
    if (rule_id != BW_NO_RULE) {
        r.rule_file = "rules/" + tool + ".yaml";
        r.rule_line = rule_id + 3;
        r.rule_text = "files.read: /etc";
    }
    r.layer = layer;
    r.op = BW_OP_FILE_OPEN;
    r.object = std::move(object);
    r.decision = dec;
    r.err = dec == BW_DECISION_DENY ? 13 : 0;
    r.pid = 4242;
    r.comm = "cat";
    return r;
}

std::string sql_value(const std::filesystem::path& db, const std::string& sql) {
    sqlite3* h = nullptr;
    if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
        std::string m = h ? sqlite3_errmsg(h) : "open failed";
        sqlite3_close_v2(h);
        throw std::runtime_error("open " + db.string() + ": " + m);
    }
    sqlite3_stmt* st = nullptr;
    std::string out;
    if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
        std::string m = sqlite3_errmsg(h);
        sqlite3_close_v2(h);
        throw std::runtime_error("prepare " + sql + ": " + m);
    }
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        auto p = sqlite3_column_text(st, 0);
        out = p ? reinterpret_cast<const char*>(p) : "NULL";
    } else if (rc != SQLITE_DONE) {
        std::string m = sqlite3_errmsg(h);
        sqlite3_finalize(st);
        sqlite3_close_v2(h);
        throw std::runtime_error("step " + sql + ": " + m);
    }
    sqlite3_finalize(st);
    sqlite3_close_v2(h);
    return out;
}

}  // namespace bulwark::test
