#pragma once
// The differential corpus: seeded random rule files, compiled and
// instantiated by the real compiler, and random operations against them. The
// BPF programs' verdicts on those operations are compared with the reference
// evaluator (evaluator.h) by the host tier (tests/integration-bpf-diff, cgroup
// sock_addr) and the VM tier (tests/vm, BPF LSM).
//
// Everything is a pure function of the seed: a disagreement prints the seed,
// the policy index, the rule file and the operation, and
// BULWARK_DIFF_SEED=<seed> replays the same corpus.
#include <cstdint>
#include <expected>
#include <string>
#include <vector>

#include "bulwark/policy/bundle.h"
#include "bulwark/policy/evaluator.h"

namespace bulwark::difftest {

// splitmix64: small, fast and identical on every platform.
class Rng {
public:
    explicit Rng(uint64_t seed) : s_(seed) {}
    uint64_t next();
    uint32_t below(uint32_t n) { return n ? static_cast<uint32_t>(next() % n) : 0; }
    bool chance(unsigned percent) { return below(100) < percent; }
    template <class T>
    const T& pick(const std::vector<T>& v) { return v[below(static_cast<uint32_t>(v.size()))]; }

private:
    uint64_t s_;
};

// The seed from environment variable `var` (decimal or 0x-hex), else `fallback`.
uint64_t seed_from_env(const char* var, uint64_t fallback);
// A per-policy generator: independent of how many draws earlier policies took.
Rng policy_rng(uint64_t seed, size_t index);

// One rule file through the real compiler (compile_string, then instantiate
// with fixed task variables), warnings allowed, errors returned as text.
std::expected<policy::Bundle, std::string> compile_policy(const std::string& text, const std::string& name);

// ---------------------------------------------------------------- network

// Address space the network corpus uses. Everything here routes locally in
// the tier's own network namespace: 127.0.0.0/8 and ::1 through lo, and
// kLocalV4 / kLocalV6 as local routes on lo (any address in them is local).
inline constexpr const char* kLocalV4 = "10.77.0.0/16";
inline constexpr const char* kLocalV6 = "fd00:77::/32";
inline constexpr uint16_t kPortLo = 18500, kPortHi = 18599;

struct NetOp {
    policy::Operation op;  // Connect / Bind / Send; addr as the kernel sees it
    std::string addr;      // literal given to the socket call ("0.0.0.0", "::ffff:127.0.0.1")
    int family = 0;        // AF_INET / AF_INET6 of the socket
    int type = 0;          // SOCK_STREAM / SOCK_DGRAM
};

std::string random_net_policy(Rng& rng, size_t index);
std::vector<NetOp> random_net_ops(Rng& rng, size_t n);

// ---------------------------------------------------------------- unix sockets

// The tree the unix corpus works in: kUnixRoot with directories a, a/b and c,
// in each of them sockets s1 (stream), s2 (datagram) and q (seqpacket). Rule
// and operation addresses are drawn from it, from names that do not exist,
// from spellings the kernel resolves to the same socket ("//", "/./", "..",
// relative to kUnixRoot as the working directory) and from abstract names
// (@bwdiff-<n>, some with a NUL inside).
inline constexpr const char* kUnixRoot = "/tmp/bwdiff-unix";
const std::vector<std::string>& unix_dirs();  // "", "a", "a/b", "c"

struct UnixOp {
    policy::Operation op;  // Connect / Send; op.unix_addr as the tool writes it ("@" + name for abstract)
    int type = 0;          // SOCK_STREAM / SOCK_DGRAM / SOCK_SEQPACKET
};

std::string random_unix_policy(Rng& rng, size_t index);
std::vector<UnixOp> random_unix_ops(Rng& rng, size_t n);

// ---------------------------------------------------------------- files

// The directory tree the file corpus works in, below kFileRoot: nested
// subtrees, files x and y in each directory, an executable `prog` in some,
// a separate filesystem mounted at kFileRoot/m and a bind alias kFileRoot/al
// of kFileRoot/m/sub (an alias: judged where the object really lives).
inline constexpr const char* kFileRoot = "/data/diff";
const std::vector<std::string>& tree_dirs();      // relative to kFileRoot, "" = the root
const std::vector<std::string>& tree_exec_dirs(); // directories holding `prog`
inline constexpr const char* kMountDir = "m";     // tmpfs
inline constexpr const char* kAliasDir = "al";    // bind of m/sub
inline constexpr const char* kAliasOf = "m/sub";

enum class FileMethod : uint8_t {
    OpenRead, OpenWrite,  // open(2) O_RDONLY / O_WRONLY of an existing file
    Mknod, Mkdir, Symlink,  // a new name (Create)
    Unlink,                 // a victim file the harness creates first (Remove)
    Exec,                   // execve of `prog`
    Rename, Link,           // a victim file to a new name (evaluate_move)
    Exchange,               // renameat2(RENAME_EXCHANGE) of two victim files: a move each way
};

struct FileOp {
    policy::Operation op;  // what the evaluator judges (op.path: where the object really lives)
    FileMethod method = FileMethod::OpenRead;
    std::string path;      // what the syscall names (may go through the alias)
    std::string to, to_judged;  // Rename / Link / Exchange: the other name, as named and as judged
};

// What the reference evaluator decides for one file operation.
policy::Decision evaluate_file_op(const policy::Bundle& b, const FileOp& op);

std::string random_file_policy(Rng& rng, size_t index);
// `serial` makes new names unique across calls.
std::vector<FileOp> random_file_ops(Rng& rng, size_t n, uint64_t& serial);

std::string_view to_string(FileMethod m);

// ---------------------------------------------------------------- reports

std::string describe(const policy::Operation& op);
// A rule id as reports print it ("none" for BW_NO_RULE).
std::string rule_text(uint32_t id);
// The BW_DECISION_* a BPF program records for the evaluator's verdict.
uint8_t decision_of(policy::Verdict v);
// Seed, index, the rule file, the operation, and both sides' answers.
std::string reproduction(uint64_t seed, size_t index, const std::string& policy_text, const std::string& op,
                         const std::string& expected, const std::string& got);

}  // namespace bulwark::difftest
