// agentd learn --rules DIR --tool NAME [--workdir DIR] [--rounds N] -- CMD ARGS...
//
// Learns the rules a command needs on top of a tool's rule file, and proves
// them by running it under them. Writes DIR/NAME.learned.yaml: the tool
// `NAME.learned`, extending NAME with the narrowest rule for each operation
// the runs were refused (draft_rule: the file, the directory created in, the
// program, the address and port, the system call or its ABI), each entry
// commented with the refusal it comes from. NAME's own denies still hold:
// extends never lifts them, so an operation an explicit deny refuses stays
// refused and is reported.
//
// The rounds run enforcing, not in audit mode: Landlock has no audit mode,
// so on a host without BPF LSM a refused file access ends the command where
// an audit run would have gone on. They run with the host's directories
// shown read-only (RunRequest::host_view): a path the rules do not grant
// exists, and Landlock refuses and records it, where the usual view would
// hide it as missing (and nothing would be learned). Round 1 runs CMD under NAME; each later
// round under NAME.learned with what the earlier rounds were refused; the
// round in which nothing is refused is the confirmation. It stops without
// one when a round learns nothing new (the refusals left are listed) or
// after --rounds. The command should be repeatable: it runs once a round.
//
// Exit status: 0 when the last round was refused nothing; 1 when refusals
// are left; 2 for bad arguments; 125 when NAME's rules (or the learned file)
// do not compile or a rule cannot be held; 126 when the sandbox could not be
// built.
#include "cli/cmd_learn.h"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "bulwark/policy/evaluator.h"
#include "bulwark/policy/match.h"
#include "bulwark/policy/rule_writer.h"
#include "bulwark/policy/values.h"
#include "cli/cmd_run.h"
#include "tasks/learning.h"
#include "tasks/record_operation.h"

namespace bulwark {
namespace {

struct LearnOptions {
    std::string rules, tool, workdir;
    unsigned rounds = 10;
    BpfCliOptions bpf;
    std::vector<std::string> cmd;
};

bool refused(const audit::AuditRecord& r) { return r.decision == BW_DECISION_DENY || r.decision == BW_DECISION_AUDIT; }

std::string command_line(const std::vector<std::string>& argv) {
    std::string s;
    for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
    return s;
}

// The deny rule of the file that refuses `op` (files.deny, syscalls.deny),
// if one does: what the file says, never learned around. Other refusals are
// the default deny, which a rule can lift.
const policy::RuleRef* denied_by(const policy::Bundle& b, const policy::Operation& op) {
    uint32_t right = 0;
    switch (op.kind) {
    case policy::OpKind::Open: right = op.access == policy::FileAccess::Write ? BW_FS_WRITE : BW_FS_READ; break;
    case policy::OpKind::Create: right = BW_FS_CREATE; break;
    case policy::OpKind::Remove: right = BW_FS_REMOVE; break;
    case policy::OpKind::Exec: right = BW_FS_EXEC; break;
    case policy::OpKind::Syscall:
        for (const auto& [name, rule_id] : b.syscalls.deny)
            if (name == op.syscall) return b.rule(rule_id);
        return nullptr;
    default: return nullptr;
    }
    for (const auto& f : b.files)
        if ((f.deny & right) && policy::path_covers(f.path, op.path)) return b.rule(f.rule_id);
    return nullptr;
}

int learn(const LearnOptions& o) {
    const std::string learned = o.tool + ".learned";
    if (!policy::valid_tool_name(learned)) {
        std::cerr << "agentd learn: tool name \"" << o.tool << "\": \"" << learned << "\" must be a tool name too\n";
        return 2;
    }
    std::error_code ec;
    const std::string workdir = o.workdir.empty() ? std::filesystem::current_path(ec).string()
                                                  : std::filesystem::canonical(o.workdir, ec).string();
    if (ec) {
        std::cerr << "agentd learn: workdir " << o.workdir << ": " << ec.message() << "\n";
        return 2;
    }
    const std::string out = (std::filesystem::path(o.rules) / (learned + ".yaml")).string();
    const policy::TaskVars vars = one_shot_vars(workdir);
    policy::RuleFileWriter draft(learned, o.tool,
                                 "Learned by `agentd learn --tool " + o.tool + " -- " + command_line(o.cmd) +
                                     "`:\nthe rules of " + o.tool + " and what its runs were refused under them, each "
                                     "entry beside\nthe refusal it allows (" + o.tool +
                                     "'s denies still hold). Review it, then run\n`agentd run --tool " + learned +
                                     "` (or fold the entries into " + o.tool + ".yaml).");

    std::string running = o.tool;
    auto bundle = load_tool_bundle(o.rules, running, workdir);
    std::vector<audit::AuditRecord> left;  // refusals of the last round
    int last_exit = 0;
    unsigned round = 1;
    for (;; ++round) {
        auto run = run_one_shot(OneShot{o.rules, running, workdir, o.cmd, o.bpf,
                                        static_cast<uint64_t>(::getpid()) * 1000 + round, true},
                                bundle);
        const RunReport& rep = run.report;
        if (rep.outcome == RunOutcome::Refused || rep.outcome == RunOutcome::SetupFailed) {
            std::cerr << rep.stderr_data << summary(rep) << "agentd learn: round " << round << " under " << running
                      << " did not start: " << rep.error << "\n";
            return rep.exit_status();
        }
        last_exit = rep.exit_status();
        left.clear();
        for (auto& d : run.decisions)
            if (refused(d)) left.push_back(std::move(d));
        std::cerr << "agentd learn: round " << round << " under " << running << ": exit " << rep.exit_status() << ", "
                  << left.size() << " refused\n";
        for (const auto& d : left) std::cerr << "  refused: " << decision_line(d) << "\n";
        if (left.empty()) {
            std::cout << rep.stdout_data << std::flush;
            break;
        }
        const size_t before = draft.size();
        for (const auto& d : left) {
            auto op = operation_of(d);
            if (!op) continue;
            *op = creation_site(d, std::move(*op));
            if (auto deny = denied_by(*bundle, *op)) {
                std::cerr << "  kept: " << deny->text << " (" << deny->loc.file << ":" << deny->loc.line
                          << ") denies it\n";
                continue;
            }
            if (std::string why = undraftable(*op, *bundle); !why.empty()) {
                std::cerr << "  not learned: " << why << "\n";
                continue;
            }
            draft_rule(draft, *op, *bundle, vars, decision_line(d));
        }
        if (draft.size() == before) {
            std::cerr << "agentd learn: round " << round << " learned nothing new: what is left is refused by a "
                      << "deny of " << o.tool << " or is not an operation a rule can allow\n";
            break;
        }
        if (std::ofstream f(out); !(f << draft.text())) {
            std::cerr << "agentd learn: cannot write " << out << "\n";
            return 2;
        }
        if (round == o.rounds) {
            std::cerr << "agentd learn: stopped after " << o.rounds << " rounds (--rounds): the last round's rules "
                      << "are written, not yet run\n";
            break;
        }
        running = learned;
        bundle = load_tool_bundle(o.rules, running, workdir);
        if (!bundle) {
            std::cerr << "agentd learn: " << bundle.error() << "\n";
            return 125;
        }
    }
    const std::string outcome =
        left.empty() ? "confirmed: round " + std::to_string(round) + " under it was refused nothing (the command exited " +
                           std::to_string(last_exit) + ")"
                     : std::to_string(left.size()) + " refusal(s) left";
    if (draft.empty())
        std::cerr << "agentd learn: nothing learned, no file written; " << o.tool << ": " << outcome << "\n";
    else
        std::cerr << "agentd learn: " << out << ": " << draft.size() << " rule(s) on top of " << o.tool << "; "
                  << outcome << "\n";
    return left.empty() ? 0 : 1;
}

}  // namespace

void register_learn(CLI::App& app) {
    auto o = std::make_shared<LearnOptions>();
    auto* cmd = app.add_subcommand("learn", "learn the rules a command needs on top of a tool's, and confirm them");
    cmd->add_option("--rules", o->rules, "directory of rule files (DIR/<tool>.learned.yaml is written there)")
        ->required();
    cmd->add_option("--tool", o->tool, "the tool whose rules the command starts from (DIR/<tool>.yaml)")->required();
    cmd->add_option("--workdir", o->workdir, "directory bound read-write as the tool's cwd");
    cmd->add_option("--rounds", o->rounds, "runs at most (default 10)")->check(CLI::Range(1u, 100u));
    o->bpf.reuse_proof = true;
    o->bpf.add_to(*cmd, "run without the BPF layer (tools with network rules are refused)");
    cmd->add_option("cmd", o->cmd, "command and arguments (after --)")->required();
    cmd->callback([o] {
        start_one_shot_process("agentd learn");
        throw CLI::RuntimeError(learn(*o));
    });
}

}  // namespace bulwark
