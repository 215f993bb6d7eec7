#include "tasks/learning.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <vector>

#include "audit/audit_db.h"
#include "audit/audit_record.h"
#include "bulwark/policy/compiler.h"
#include "bulwark/policy/cbpf.h"
#include "bulwark/policy/evaluator.h"
#include "bulwark/policy/explain.h"
#include "bulwark/policy/match.h"
#include "bulwark/policy/rule_file_text.h"
#include "bulwark/policy/rule_writer.h"
#include "bulwark/policy/seccomp.h"
#include "profiles/profile_rules.h"
#include "tasks/record_operation.h"
#include "tasks/tasks.h"
#include "tasks/tool_catalog.h"

namespace bulwark {
namespace {

using nlohmann::json;

// Compiles a rule file's text for `tool` against the served rules directory.
std::expected<policy::CompileResult, TaskError> compile_for_tool(const ToolCatalog& catalog, const std::string& text,
                                                                 const std::string& name, const std::string& tool) {
    policy::CompileOptions opts;
    opts.rules_dirs = {catalog.rules_dir().string()};
    auto cand = policy::compile_string(text, name, opts);
    if (!cand.ok()) {
        json diags = json::array();
        for (const auto& d : cand.diagnostics)
            diags.push_back({{"file", d.loc.file}, {"line", d.loc.line}, {"col", d.loc.col}, {"message", d.message}});
        return task_error(TaskErrc::CandidateInvalid, policy::render_diagnostics(cand), {{"diagnostics", diags}});
    }
    if (cand.bundle->tool != tool)
        return task_error(TaskErrc::CandidateInvalid,
                   "the candidate declares tool '" + cand.bundle->tool + "', not '" + tool + "'");
    return cand;
}

// A task's variables: its own while it is live, else the work directory its
// runs recorded.
std::optional<policy::TaskVars> recorded_task_vars(const LearningSources& src, uint64_t task_id) {
    std::optional<policy::TaskVars> vars = src.tasks ? src.tasks->task_vars(task_id) : std::nullopt;
    if (vars || !task_id) return vars;
    audit::Query rq;
    rq.task_id = task_id;
    rq.kind = audit::RecordKind::RunStart;
    rq.limit = 1;
    if (auto r = src.store.query(rq); r && !r->rows.empty()) vars = audit::run_start_vars(r->rows[0]);
    return vars;
}

// Each task's variables, read once (recorded_task_vars).
struct TaskVarsCache {
    const LearningSources& src;
    std::map<uint64_t, std::optional<policy::TaskVars>> known;
    const std::optional<policy::TaskVars>& of(uint64_t task_id) {
        auto it = known.find(task_id);
        if (it == known.end()) it = known.emplace(task_id, recorded_task_vars(src, task_id)).first;
        return it->second;
    }
};

// The tool's rules and a candidate's, instantiated per task (cached).
struct TaskBundles {
    TaskVarsCache& vars;
    const policy::Bundle& current;
    const policy::Bundle& candidate;
    struct Pair {
        std::optional<policy::Bundle> current, candidate;
        std::string why_not;
    };
    std::map<uint64_t, Pair> per_task;
    Pair& of(uint64_t task_id) {
        auto it = per_task.find(task_id);
        if (it != per_task.end()) return it->second;
        Pair& p = per_task[task_id];
        const auto& v = vars.of(task_id);
        if (!v) {
            p.why_not = "no task context (work directory) is known for task " + std::to_string(task_id);
            return p;
        }
        auto c = instantiate_tool(current, *v);
        auto n = instantiate_tool(candidate, *v);
        if (!c || !n) {
            p.why_not = !c ? c.error() : n.error();
            return p;
        }
        p.current = std::move(*c);
        p.candidate = std::move(*n);
        return p;
    }
};

// Calls fn for each decision record of the range, page by page, until it
// returns false or max_records were read.
std::optional<TaskError> each_record(const LearningSources& src, const RecordRange& range,
                                     const std::function<bool(const audit::AuditRecord&)>& fn) {
    audit::Query q;
    q.tool = range.tool;
    q.kind = audit::RecordKind::Decision;
    q.limit = audit::Query::kMaxLimit;
    q.since_ns = range.since_ns;
    q.until_ns = range.until_ns;
    q.task_id = range.task_id;
    uint64_t seen = 0;
    bool more = true;
    while (more && seen < range.max_records) {
        auto res = src.store.query(q);
        if (!res) return TaskError{TaskErrc::QueryFailed, res.error().message};
        for (const auto& rec : res->rows) {
            if (++seen > range.max_records || !fn(rec)) return std::nullopt;
        }
        more = res->next_after_seq.has_value();
        if (more) q.after_seq = *res->next_after_seq;
    }
    return std::nullopt;
}

std::string skip_reason(const audit::AuditRecord& rec) {
    return "operation not re-judgeable (" + std::string(audit::op_name(rec.op)) + ")";
}

json reasons_json(const std::map<std::string, uint64_t>& skip_reasons) {
    json reasons = json::object();
    for (const auto& [k, v] : skip_reasons) reasons[k] = v;
    return reasons;
}

}  // namespace

std::expected<json, TaskError> replay(const LearningSources& src, const RecordRange& range,
                                      const std::string& candidate_rules) {
    const std::string& tool = range.tool;
    const ToolEntry* current = src.catalog.find(tool);
    if (!current) return task_error(TaskErrc::UnknownTool, "tool: no tool named '" + tool + "'");
    auto cand = compile_for_tool(src.catalog, candidate_rules, "candidate:" + tool + ".yaml", tool);
    if (!cand) return std::unexpected(std::move(cand.error()));
    TaskVarsCache vars{src, {}};
    TaskBundles bundles{vars, current->bundle, *cand->bundle, {}};

    uint64_t evaluated = 0, unchanged = 0, skipped = 0;
    json changed = json::array();
    std::map<std::string, uint64_t> skip_reasons;
    auto failed = each_record(src, range, [&](const audit::AuditRecord& rec) {
        auto op = operation_of(rec);
        if (!op) {
            ++skipped;
            ++skip_reasons[skip_reason(rec)];
            return true;
        }
        auto& p = bundles.of(rec.task_id);
        if (!p.candidate) {
            ++skipped;
            ++skip_reasons[p.why_not];
            return true;
        }
        ++evaluated;
        auto now = policy::evaluate(*p.candidate, *op);
        // What was decided: the kernel's verdict for enforcing layers; for
        // observed operations (monitor) the rules in force today.
        std::string recorded(audit::decision_name(rec.decision));
        std::string before = recorded;
        if (rec.decision == BW_DECISION_OBSERVE)
            before = std::string(policy::to_string(policy::evaluate(*p.current, *op).verdict));
        std::string after(policy::to_string(now.verdict));
        if (before == after) {
            ++unchanged;
            return true;
        }
        changed.push_back({{"seq", rec.seq},
                           {"ts_ns", rec.ts_ns},
                           {"task_id", rec.task_id},
                           {"run_id", rec.run_id},
                           {"op", audit::op_name(rec.op)},
                           {"object", rec.object},
                           {"recorded", recorded},
                           {"before", before},
                           {"candidate", after},
                           {"candidate_rule", now.rule_id == BW_NO_RULE
                                                  ? json(nullptr)
                                                  : json(policy::describe_rule(*p.candidate, now.rule_id))},
                           {"explanation", explanation_of(*op, now)}});
        return changed.size() < 1000;
    });
    if (failed) return std::unexpected(std::move(*failed));
    return json{{"tool", tool},
                {"evaluated", evaluated},
                {"unchanged", unchanged},
                {"skipped", skipped},
                {"skip_reasons", reasons_json(skip_reasons)},
                {"changed", changed},
                {"changed_truncated", changed.size() >= 1000},
                {"candidate_hash", cand->bundle->hash}};
}

policy::Operation creation_site(const audit::AuditRecord& rec, policy::Operation op) {
    std::error_code ec;
    if (op.kind == policy::OpKind::Create && rec.layer == BW_LAYER_LANDLOCK && std::filesystem::is_directory(op.path, ec))
        op.path += "/(new entry)";
    return op;
}

std::string undraftable(const policy::Operation& op, const policy::Bundle& current) {
    if (op.kind != policy::OpKind::Syscall || (op.syscall != "socket" && op.syscall != "socketpair")) return "";
    if (!policy::arch_name(op.arch).empty() && policy::arch_name(op.arch) != "native") return "";
    const uint64_t through = policy::socket_families_through(current.seccomp.program, op.syscall.c_str());
    if (through == 0) return "";  // the call itself is refused: syscalls.allow lifts that
    return op.syscall + "(2) was refused a socket family outside network.families (it lets through " +
           policy::family_names(through) +
           "); seccomp's audit record carries no arguments, so which family is not known here: add it to "
           "network.families (strace -f -e trace=" +
           op.syscall + " shows it)";
}

void draft_rule(policy::RuleFileWriter& draft, const policy::Operation& op, const policy::Bundle& current,
                const std::optional<policy::TaskVars>& vars, const std::string& comment) {
    using S = policy::DraftSection;
    if (!undraftable(op, current).empty()) return;
    // Paths below the task's work directory are proposed as ${workdir}/...
    auto path = [&](std::string p) {
        if (vars)
            if (auto w = vars->find("workdir"); w != vars->end() && (p == w->second || p.starts_with(w->second + "/")))
                p = "${workdir}" + p.substr(w->second.size());
        return p;
    };
    auto net = [&](S section) {
        std::string a = policy::format_addr(op.addr);  // IPv4 as a.b.c.d
        draft.add_net(section,
                      {a + (a.find(':') == std::string::npos ? "/32" : "/128"), op.port,
                       op.proto == BW_PROTO_TCP ? "tcp" : "udp"},
                      comment);
    };
    auto parent = [](const std::string& p) {
        auto slash = p.find_last_of('/');
        return slash == 0 ? std::string("/") : p.substr(0, slash);
    };
    switch (op.kind) {
    case policy::OpKind::Open:
        // A file the tool itself creates (the draft grants creating in its
        // directory) is written through a rule on that directory: a rule
        // names the objects that exist when the sandbox is built.
        if (op.access == policy::FileAccess::Write && draft.has(S::FilesCreate, path(parent(op.path))))
            draft.add_path(S::FilesWrite, path(parent(op.path)), comment);
        else
            draft.add_path(op.access == policy::FileAccess::Write ? S::FilesWrite : S::FilesRead, path(op.path),
                           comment);
        break;
    case policy::OpKind::Create: draft.add_path(S::FilesCreate, path(parent(op.path)), comment); break;
    case policy::OpKind::Remove: draft.add_path(S::FilesRemove, path(op.path), comment); break;
    case policy::OpKind::Exec: draft.add_path(S::ExecAllow, path(op.path), comment); break;
    case policy::OpKind::Connect:
    case policy::OpKind::Bind:
    case policy::OpKind::Send: {
        // a unix socket's address (network.unix.*), or an IP rule
        const bool bind = op.kind == policy::OpKind::Bind, send = op.kind == policy::OpKind::Send;
        if (!op.unix_addr.empty())
            draft.add_path(bind ? S::NetworkUnixBind : send ? S::NetworkUnixSend : S::NetworkUnixConnect,
                           path(op.unix_addr), comment);
        else
            net(bind ? S::NetworkBind : send ? S::NetworkSend : S::NetworkConnect);
        break;
    }
    case policy::OpKind::Syscall:
        // A call refused because its ABI is not accepted (i386 through
        // int $0x80) needs the ABI, not the name.
        if (auto abi = policy::arch_name(op.arch); !abi.empty() && abi != "native" &&
            std::ranges::find(current.seccomp.arches, op.arch) == current.seccomp.arches.end()) {
            draft.add_name(S::SyscallsArchitectures, "native", comment);
            draft.add_name(S::SyscallsArchitectures, std::string(abi), comment);
        } else {
            draft.add_name(S::SyscallsAllow, op.syscall, comment);
        }
        break;
    case policy::OpKind::Socket: break;
    }
}

std::expected<json, TaskError> propose(const LearningSources& src, const RecordRange& range) {
    const std::string& tool = range.tool;
    const ToolEntry* current = src.catalog.find(tool);
    if (!current) return task_error(TaskErrc::UnknownTool, "tool: no tool named '" + tool + "'");

    struct Seen {
        audit::AuditRecord rec;
        policy::Operation op;
    };
    std::vector<Seen> ops;
    std::map<std::string, uint64_t> skip_reasons;
    TaskVarsCache task_vars{src, {}};
    uint64_t refused = 0;
    auto failed = each_record(src, range, [&](const audit::AuditRecord& rec) {
        if (rec.decision != BW_DECISION_DENY && rec.decision != BW_DECISION_AUDIT) return true;
        ++refused;
        auto op = operation_of(rec);
        if (!op) {
            ++skip_reasons[skip_reason(rec)];
            return true;
        }
        if (op->kind == policy::OpKind::Socket) return true;  // not produced by operation_of
        ops.push_back({rec, *op});
        return true;
    });
    if (failed) return std::unexpected(std::move(*failed));

    policy::RuleFileWriter draft(tool, tool,
                                 "Proposed by agentd: rules for " + std::to_string(ops.size()) +
                                     " recorded operation(s) of " + tool + " that its rules refused.");
    for (const auto& [rec, op] : ops) draft_rule(draft, creation_site(rec, op), current->bundle, task_vars.of(rec.task_id));
    std::string text = draft.text();
    json out{{"tool", tool},
             {"refused", refused},
             {"operations", ops.size()},
             {"skip_reasons", reasons_json(skip_reasons)},
             {"rules", text}};
    if (ops.empty()) {
        out["allowed_by_proposal"] = 0;
        out["still_refused"] = json::array();
        return out;
    }
    auto cand = compile_for_tool(src.catalog, text, "proposal:" + tool + ".yaml", tool);
    if (!cand) return std::unexpected(std::move(cand.error()));
    json warnings = json::array();
    for (const auto& d : cand->diagnostics)
        warnings.push_back(d.loc.file + ":" + std::to_string(d.loc.line) + ": " + d.message);
    TaskBundles bundles{task_vars, current->bundle, *cand->bundle, {}};
    uint64_t allowed = 0;
    json still = json::array();
    for (const auto& s : ops) {
        auto refused_because = [&](const std::string& why) {
            still.push_back({{"seq", s.rec.seq}, {"op", audit::op_name(s.rec.op)}, {"object", s.rec.object},
                             {"explanation", why}});
        };
        auto& p = bundles.of(s.rec.task_id);
        if (!p.candidate) {
            refused_because(p.why_not);
            continue;
        }
        if (std::string why = undraftable(s.op, current->bundle); !why.empty()) {
            refused_because(why);
            continue;
        }
        auto d = policy::evaluate(*p.candidate, s.op);
        if (d.verdict == policy::Verdict::Allow)
            ++allowed;
        else
            refused_because(explanation_of(s.op, d));
    }
    out["allowed_by_proposal"] = allowed;
    out["still_refused"] = still;
    out["warnings"] = warnings;
    out["proposal_hash"] = cand->bundle->hash;
    return out;
}

std::expected<ProfileExport, TaskError> export_profile(const ToolCatalog& catalog, const std::string& tool,
                                                       const profiles::Profile& profile) {
    const ToolEntry* entry = catalog.find(tool);
    if (!entry) return task_error(TaskErrc::UnknownTool, "tool: no tool named '" + tool + "'");
    // The file flattened, and the text it was read from compiled: the
    // tree's rule ids are the bundle's.
    const std::string path = entry->source.string();
    policy::CompileOptions opts;
    opts.rules_dirs = {catalog.rules_dir().string()};
    auto flat = policy::flatten_rule_file(path, opts);
    auto compiled = policy::compile_string(flat ? flat->sources.at(path) : std::string(), path, opts);
    if (!flat || !compiled.ok())
        return task_error(TaskErrc::CandidateInvalid,
                          path + " does not compile now: " + policy::render_diagnostics(compiled));
    auto exported = profiles::profile_rules(profile, std::move(*flat), *compiled.bundle);
    auto check = compile_for_tool(catalog, exported.text, "profile:" + tool + ".yaml", tool);
    if (!check) return std::unexpected(std::move(check.error()));
    return ProfileExport{std::move(exported), std::make_shared<const policy::Bundle>(std::move(*check->bundle)),
                         compiled.bundle->hash != entry->bundle.hash};
}

std::expected<json, TaskError> profile_rule_file(const ToolCatalog& catalog, const std::string& tool,
                                                 const profiles::Profile& profile, uint64_t version) {
    auto exported = export_profile(catalog, tool, profile);
    if (!exported) return std::unexpected(std::move(exported.error()));
    json j = exported->rules.counts();
    j.update({{"tool", tool},
              {"version", version},
              {"runs", profile.runs()},
              {"learning", profile.learning()},
              {"rules", exported->rules.text},
              {"entries", exported->rules.entries},
              {"hash", exported->bundle->hash},
              {"source_changed", exported->source_changed}});
    return j;
}

}  // namespace bulwark
