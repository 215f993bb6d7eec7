// Writes the file/exec differential corpus the VM runner replays against the
// BPF LSM programs: random rule files compiled and instantiated by the real
// compiler, their exact map contents, random operations and, for each, what
// the reference evaluator decides (verdict and rule id). The guest has no
// compiler; it loads the maps, performs the operations for real and compares.
//
//   usage: diff_vm_corpus <out-file> [policies] [operations]
//   BULWARK_DIFF_SEED=<n> picks the corpus (default fixed; written to the file)
//
// Format, one record per line (text blobs length-prefixed):
//   seed <n>
//   dir <rel> | prog <rel> | mount <rel> | alias <rel> <of>      the tree
//   policy <name> <index> <mode> <flags> <af_allow> <sock_types> <files> <ops> <text-bytes>
//   <text>
//   file <allow> <deny> <allow_rule> <deny_rule> <path>
//   op <method> <verdict> <rule> <syscall-path> <judged-path> <new-name or ->
#include <cstdio>
#include <cstdlib>
#include <string>

#include "diff_corpus.h"

namespace dt = bulwark::difftest;
namespace pol = bulwark::policy;

namespace {

struct Regression {
    std::string name, text;
    std::vector<dt::FileOp> ops;
};

dt::FileOp file_op(dt::FileMethod m, const std::string& rel, const std::string& via = {}, const std::string& to = {}) {
    dt::FileOp o;
    o.method = m;
    o.op.path = std::string(dt::kFileRoot) + "/" + rel;
    o.path = via.empty() ? o.op.path : std::string(dt::kFileRoot) + "/" + via;
    switch (m) {
        case dt::FileMethod::OpenRead: o.op.kind = pol::OpKind::Open; break;
        case dt::FileMethod::OpenWrite:
            o.op.kind = pol::OpKind::Open;
            o.op.access = pol::FileAccess::Write;
            break;
        case dt::FileMethod::Exec: o.op.kind = pol::OpKind::Exec; break;
        case dt::FileMethod::Unlink: o.op.kind = pol::OpKind::Remove; break;
        case dt::FileMethod::Rename:
        case dt::FileMethod::Link:
        case dt::FileMethod::Exchange:
            o.op.kind = pol::OpKind::Remove;
            o.to = o.to_judged = std::string(dt::kFileRoot) + "/" + to;
            break;
        default: o.op.kind = pol::OpKind::Create; break;
    }
    return o;
}

// Fixed cases, one per disagreement the random corpus found (seed 20261203),
// kept whatever seed the corpus runs with.
std::vector<Regression> regression_cases(uint64_t& serial) {
    using M = dt::FileMethod;
    auto victim = [&](const std::string& dir) { return dir + "/v" + std::to_string(serial++); };
    std::vector<Regression> out;
    // execve opens the binary with __FMODE_EXEC in f_flags: judged as exec, not read
    out.push_back({"exec_needs_exec_not_read",
                   "tool: r1\nfiles:\n  exec: [/data/diff/a]\n  read: [/data/diff/e]\n",
                   {file_op(M::Exec, "a/prog"), file_op(M::Exec, "e/f/prog"), file_op(M::OpenRead, "a/prog")}});
    // files rules gate exec too, with no exec: section
    out.push_back({"files_rules_gate_exec",
                   "tool: r2\nfiles:\n  read: [/data/diff]\n  exec: [/data/diff/e]\n",
                   {file_op(M::Exec, "prog"), file_op(M::Exec, "a/b/c/prog"), file_op(M::Exec, "e/f/prog")}});
    // a file reached through a bind alias of a subdirectory of another
    // filesystem is covered by the rules above that filesystem's mount point
    out.push_back({"alias_above_mount_point",
                   "tool: r3\nfiles:\n  read: [/data/diff]\n  write: [/data/diff/m/sub]\n  deny:\n"
                   "    - { path: /data/diff, rights: [write] }\n",
                   {file_op(M::OpenRead, "m/sub/x", "al/x"), file_op(M::OpenWrite, "m/sub/x", "al/x"),
                    file_op(M::OpenRead, "m/sub/x"), file_op(M::OpenWrite, "m/sub/y")}});
    // rename and link are attributed to the rule that decides the failing check
    std::string v1 = victim("a/b"), v2 = victim("a"), v3 = victim("a/b");
    out.push_back({"move_attribution",
                   "tool: r4\nfiles:\n  read: [/data/diff]\n  remove: [/data/diff]\n  create: [/data/diff]\n"
                   "  write: [/data/diff/e]\n  deny:\n    - { path: /data/diff/a, rights: [remove] }\n"
                   "    - { path: /data/diff/a/b, rights: [exec] }\n",
                   {file_op(M::Rename, v1, {}, "e/r" + std::to_string(serial++)),
                    file_op(M::Link, v2, {}, "e/r" + std::to_string(serial++)),
                    file_op(M::Link, v3, {}, "a/d/r" + std::to_string(serial++))}});
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: diff_vm_corpus <out-file> [policies] [operations]\n");
        return 2;
    }
    size_t policies = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 40;
    size_t nops = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 30;
    uint64_t seed = dt::seed_from_env("BULWARK_DIFF_SEED", 20261203);
    FILE* f = std::fopen(argv[1], "w");
    if (!f) {
        std::perror(argv[1]);
        return 1;
    }
    std::fprintf(f, "seed %llu\n", (unsigned long long)seed);
    for (const auto& d : dt::tree_dirs()) std::fprintf(f, "dir %s\n", d.empty() ? "." : d.c_str());
    for (const auto& d : dt::tree_exec_dirs()) std::fprintf(f, "prog %s\n", d.empty() ? "." : d.c_str());
    std::fprintf(f, "mount %s\nalias %s %s\n", dt::kMountDir, dt::kAliasDir, dt::kAliasOf);
    uint64_t serial = 0;
    auto regressions = regression_cases(serial);
    for (size_t i = 0; i < policies + regressions.size(); ++i) {
        std::string text, name;
        std::vector<dt::FileOp> ops;
        if (i < policies) {
            dt::Rng rng = dt::policy_rng(seed, i);
            text = dt::random_file_policy(rng, i);
            for (int attempt = 0; attempt < 8 && !dt::compile_policy(text, "probe.yaml"); ++attempt)
                text = dt::random_file_policy(rng, i);
            ops = dt::random_file_ops(rng, nops, serial);
            name = "diff_files_" + std::to_string(i);
        } else {
            const auto& r = regressions[i - policies];
            text = r.text;
            ops = r.ops;
            name = "diff_regress_" + r.name;
        }
        auto bundle = dt::compile_policy(text, name + ".yaml");
        if (!bundle) {
            std::fprintf(stderr, "seed %llu policy %zu does not compile:\n%s\n%s\n", (unsigned long long)seed, i,
                         text.c_str(), bundle.error().c_str());
            return 1;
        }
        const auto& t = bundle->bpf;
        std::fprintf(f, "policy %s %zu %u %u %llu %u %zu %zu %zu\n", name.c_str(), i, t.header.mode, t.header.flags,
                     (unsigned long long)t.header.af_allow, t.header.sock_type_allow, t.files.size(), ops.size(),
                     text.size());
        std::fwrite(text.data(), 1, text.size(), f);
        std::fputc('\n', f);
        for (const auto& e : t.files)
            std::fprintf(f, "file %u %u %u %u %s\n", e.value.allow, e.value.deny, e.value.allow_rule_id,
                         e.value.deny_rule_id, e.path.c_str());
        for (const auto& o : ops) {
            auto d = dt::evaluate_file_op(*bundle, o);
            bool moves = o.method == dt::FileMethod::Rename || o.method == dt::FileMethod::Link ||
                         o.method == dt::FileMethod::Exchange;
            auto tab = moves ? d : pol::evaluate_tables(*bundle, o.op);
            if (d.verdict != tab.verdict || d.rule_id != tab.rule_id) {
                std::fprintf(stderr, "%s",
                             dt::reproduction(seed, i, text, dt::describe(o.op),
                                              std::string(pol::to_string(d.verdict)) + " rule " +
                                                  std::to_string(d.rule_id),
                                              "evaluate_tables: " + std::string(pol::to_string(tab.verdict)) +
                                                  " rule " + std::to_string(tab.rule_id))
                                 .c_str());
                return 1;
            }
            std::fprintf(f, "op %u %u %u %s %s %s\n", static_cast<unsigned>(o.method),
                         static_cast<unsigned>(d.verdict), d.rule_id, o.path.c_str(), o.op.path.c_str(),
                         moves ? o.to.c_str() : "-");
        }
    }
    std::fclose(f);
    std::printf("diff_vm_corpus: seed=%llu policies=%zu operations=%zu -> %s\n", (unsigned long long)seed, policies,
                nops, argv[1]);
    return 0;
}
