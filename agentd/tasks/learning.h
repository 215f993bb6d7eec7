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

#include "audit/audit_record.h"
#include "bulwark/policy/bundle.h"
#include "bulwark/policy/evaluator.h"
#include "bulwark/policy/instantiate.h"
#include "bulwark/policy/rule_writer.h"
#include "profiles/profile_rules.h"
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

// A tool's behaviour profile exported as a rule file: the narrowest rules
// within the tool's own that cover it (profiles::profile_rules), and that
// file compiled. The tool's file is read from disk now; `source_changed`
// says when it differs from the rules served. UnknownTool,
// CandidateInvalid (the export does not compile).
struct ProfileExport {
    profiles::ProfileRules rules;
    std::shared_ptr<const policy::Bundle> bundle;  // compiled, not instantiated
    bool source_changed = false;
};
std::expected<ProfileExport, TaskError> export_profile(const ToolCatalog& catalog, const std::string& tool,
                                                       const profiles::Profile& profile);
// The export as GET /v1/profiles/{tool}/rules answers it (`version`: the
// book's): the rules, what became of each entry, the hash.
std::expected<nlohmann::json, TaskError> profile_rule_file(const ToolCatalog& catalog, const std::string& tool,
                                                           const profiles::Profile& profile, uint64_t version);

// The narrowest rule that allows one refused operation, added to `draft`
// with `comment` beside it: the file path, the directory created in, the
// executable, the unix address or IP/port/protocol, the system call (or its
// ABI when the ABI was refused). Paths under ${workdir} (from `vars`) are
// written with the variable. `current`: the tool's rules the operation was
// refused under.
void draft_rule(policy::RuleFileWriter& draft, const policy::Operation& op, const policy::Bundle& current,
                const std::optional<policy::TaskVars>& vars, const std::string& comment = {});

// The operation a rule is drafted for, from the record it was read from:
// Landlock judges a new entry by the right on its directory, and its record
// names either the entry or that directory; a directory that exists is where
// the entry was to be made, so the create becomes "<dir>/(new entry)" and the
// drafted files.create goes on the directory, not one level up. Any other
// operation is returned as it is.
policy::Operation creation_site(const audit::AuditRecord& rec, policy::Operation op);

// Why no rule can be drafted for `op` from its record, or "" when one can: a
// socket(2) or socketpair(2) refused where `current`'s filter lets the call
// through for other families was refused its family (network.families), and
// seccomp's audit record carries no arguments to say which. draft_rule adds
// nothing for such an operation; the caller says this instead.
std::string undraftable(const policy::Operation& op, const policy::Bundle& current);

}  // namespace bulwark
