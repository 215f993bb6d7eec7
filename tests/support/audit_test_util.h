#pragma once
// Helpers shared by the audit store tiers: temp dirs and record builders.
#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "audit/audit_record.h"

namespace bulwark::test {

struct TempDir {
    std::filesystem::path path;
    TempDir();
    ~TempDir();
};

audit::AuditRecord decision(uint64_t task, const std::string& tool, uint16_t layer, uint8_t dec,
                            uint32_t rule_id = BW_NO_RULE, std::string object = "/etc/passwd");

// Opens the file with plain SQLite (read-write, so a crashed WAL is recovered)
// and returns the single value of a one-row, one-column query as text.
std::string sql_value(const std::filesystem::path& db, const std::string& sql);

}  // namespace bulwark::test
