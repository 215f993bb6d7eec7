#pragma once
// Learning from what runs did, over the decisions in the audit store:
//   replay   the recorded operations of a time range judged again under a
//            candidate rule file: which verdicts it would change;
//   propose  the narrowest additions to a tool's rules that would have
//            allowed what its recorded runs were refused, written as a rule
//            file that extends the tool's own (policy::RuleFileWriter),
//            compiled, and checked by judging each of those operations
//            again under it.
// Paths are judged with each task's variables: the live task's, or the work
// directory its runs recorded once it is gone.
#include <cstdint>
#include <expected>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tasks/task_error.h"

namespace bulwark {
class ToolCatalog;
class TaskManager;
namespace audit {
class AuditStore;
}

// Which recorded decisions: a tool's, optionally of one task and a time
// range, at most max_records of them.
struct RecordRange {
    std::string tool;
    std::optional<int64_t> since_ns, until_ns;
    std::optional<uint64_t> task_id;
    uint64_t max_records = 100000;
};

struct LearningSources {
    const ToolCatalog& catalog;
    const TaskManager* tasks = nullptr;  // live tasks' variables (none: only recorded ones)
    audit::AuditStore& store;
};

// UnknownTool, CandidateInvalid (every diagnostic in extra.diagnostics),
// QueryFailed.
std::expected<nlohmann::json, TaskError> replay(const LearningSources& src, const RecordRange& range,
                                                const std::string& candidate_rules);
std::expected<nlohmann::json, TaskError> propose(const LearningSources& src, const RecordRange& range);

}  // namespace bulwark
