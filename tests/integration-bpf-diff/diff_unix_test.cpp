// Differential test of the cgroup unix programs (connect_unix, sendmsg_unix)
// against the reference evaluator: random rule files with network.unix
// rules through the real compiler and instantiate(), the maps loaded for
// real, and random stream/seqpacket/datagram connects and datagram sendtos to
// pathname and abstract addresses made from a sandbox leaf cgroup (working
// directory kUnixRoot, so relative names reach the sockets too). For every
// operation the kernel's verdict (EPERM or not) and its ring-buffer record
// (decision, rule id) must equal what evaluate() and evaluate_tables() say.
//
//   BULWARK_DIFF_SEED=<n>       corpus seed (default fixed; printed)
//   BULWARK_DIFF_POLICIES=<n>   policies (default 200), 32 operations each
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "bpf_env.h"
#include "unix_env.h"
#include "diff_corpus.h"

using namespace bwtest;
namespace dt = bulwark::difftest;
namespace pol = bulwark::policy;
using dt::decision_of;
using dt::rule_text;

namespace {

constexpr uint64_t kUnixSeed = 20261204;

// The host side: every socket of the corpus tree, and the abstract names.
struct UnixTree {
    std::vector<int> fds;
    UnixTree() {
        std::filesystem::remove_all(dt::kUnixRoot);
        for (const auto& d : dt::unix_dirs()) {
            std::string dir = std::string(dt::kUnixRoot) + (d.empty() ? "" : "/" + d);
            std::filesystem::create_directories(dir);
            add(dir + "/s1", SOCK_STREAM);
            add(dir + "/s2", SOCK_DGRAM);
            add(dir + "/q", SOCK_SEQPACKET);
        }
        add("@bwdiff-1", SOCK_STREAM);
        add("@bwdiff-2", SOCK_DGRAM);
        add("@bwdiff-12", SOCK_STREAM);
        add(std::string("@bwdiff-1\0x", 11), SOCK_DGRAM);
    }
    ~UnixTree() {
        for (int fd : fds) ::close(fd);
        std::filesystem::remove_all(dt::kUnixRoot);
    }
    void add(const std::string& a, int type) {
        int s = ::socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        REQUIRE(s >= 0);
        sockaddr_un sa;
        socklen_t len = unix_sockaddr(a, sa);
        REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&sa), len) == 0);
        if (type != SOCK_DGRAM) REQUIRE(::listen(s, 256) == 0);
        fds.push_back(s);
    }
};

int perform(const dt::UnixOp& o) {
    int s = ::socket(AF_UNIX, o.type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) return 1000 + errno;
    sockaddr_un sa;
    socklen_t len = unix_sockaddr(o.op.unix_addr, sa);
    auto* p = reinterpret_cast<sockaddr*>(&sa);
    int rc = o.op.kind == pol::OpKind::Send ? (::sendto(s, "x", 1, MSG_DONTWAIT, p, len) < 0 ? -1 : 0)
                                             : ::connect(s, p, len);
    int err = rc < 0 ? errno : 0;
    ::close(s);
    return err;
}

const char* type_name(int t) { return t == SOCK_STREAM ? "stream" : t == SOCK_DGRAM ? "dgram" : "seqpacket"; }



std::vector<std::string> run_policy(uint64_t seed, size_t index, const std::string& text,
                                    const std::vector<dt::UnixOp>& ops) {
    std::vector<std::string> out;
    auto bundle = dt::compile_policy(text, "diff-unix-" + std::to_string(index) + ".yaml");
    if (!bundle) {
        out.push_back(dt::reproduction(seed, index, text, "(compile)", "a bundle", bundle.error()));
        return out;
    }
    BpfTables tables = bundle->bpf;
    tables.header.flags |= BW_POL_REPORT_ALLOW;
    auto loaded = Env::get().maps().load(tables);
    if (!loaded) {
        out.push_back(dt::reproduction(seed, index, text, "(load)", "loaded", loaded.error().message()));
        return out;
    }
    {
        Leaf leaf("diffu" + std::to_string(index));
        REQUIRE(Env::get().maps().bind(leaf.id, loaded->handle));
        int* errs = shared<int>(ops.size());
        REQUIRE(errs);
        REQUIRE(run_in(leaf.path, [&] {
                    if (::chdir(dt::kUnixRoot) != 0) return 3;
                    for (size_t i = 0; i < ops.size(); ++i) errs[i] = perform(ops[i]);
                    return 0;
                }) == 0);
        std::vector<bw_event> evs;
        for (const auto& e : Env::get().events_of(leaf.id))
            if (e.layer == BW_LAYER_SOCK_UNIX) evs.push_back(e);
        const bool aligned = evs.size() == ops.size();
        for (size_t i = 0; i < ops.size(); ++i) {
            const auto& o = ops[i];
            std::string what = dt::describe(o.op) + " via a " + type_name(o.type) + " socket";
            auto want = pol::evaluate(*bundle, o.op);
            auto tab = pol::evaluate_tables(*bundle, o.op);
            const bw_event* e = aligned ? &evs[i] : nullptr;
            bool ok = want.verdict == tab.verdict && want.rule_id == tab.rule_id;
            ok = ok && (errs[i] == EPERM) == (want.verdict == pol::Verdict::Deny);
            ok = ok && e && e->op == (o.op.kind == pol::OpKind::Send ? BW_OP_SENDMSG : BW_OP_CONNECT) &&
                 e->decision == decision_of(want.verdict) && e->rule_id == want.rule_id;
            if (ok) continue;
            std::string got = "errno=" + std::string(errs[i] ? strerrorname_np(errs[i]) ? strerrorname_np(errs[i]) : "?" : "0");
            got += e ? " event decision=" + std::to_string(e->decision) + " rule=" + rule_text(e->rule_id)
                     : " (" + std::to_string(evs.size()) + " events for " + std::to_string(ops.size()) + " operations)";
            out.push_back(dt::reproduction(seed, index, text, what,
                                           std::string(pol::to_string(want.verdict)) + " rule=" + rule_text(want.rule_id) +
                                               " (tables: " + std::string(pol::to_string(tab.verdict)) + " rule=" +
                                               rule_text(tab.rule_id) + "): " + want.explanation,
                                           got));
        }
        munmap(errs, sizeof(int) * ops.size());
    }
    (void)Env::get().maps().free(loaded->handle.slot);
    return out;
}

}  // namespace

TEST_CASE("cgroup unix programs and the reference evaluator agree on a random corpus") {
    if (!unix_programs_enforcing()) return;
    UnixTree tree;
    uint64_t seed = dt::seed_from_env("BULWARK_DIFF_SEED", kUnixSeed);
    size_t policies = static_cast<size_t>(dt::seed_from_env("BULWARK_DIFF_POLICIES", 200));
    std::printf("integration_bpf_diff unix: seed=%llu policies=%zu operations=32 (replay: BULWARK_DIFF_SEED=%llu)\n",
                (unsigned long long)seed, policies, (unsigned long long)seed);
    std::vector<std::string> failures;
    size_t ops_run = 0, denied = 0, allowed = 0;
    for (size_t i = 0; i < policies; ++i) {
        dt::Rng rng = dt::policy_rng(seed ^ 0x756e6978ull, i);
        std::string text = dt::random_unix_policy(rng, i);
        auto ops = dt::random_unix_ops(rng, 32);
        if (auto b = dt::compile_policy(text, "count.yaml"))
            for (const auto& o : ops) {
                auto d = pol::evaluate(*b, o.op);
                denied += d.verdict == pol::Verdict::Deny;
                allowed += d.verdict == pol::Verdict::Allow;
            }
        auto f = run_policy(seed, i, text, ops);
        ops_run += ops.size();
        failures.insert(failures.end(), f.begin(), f.end());
    }
    std::printf("integration_bpf_diff unix: %zu operations (%zu denied, %zu allowed, the rest audited), "
                "%zu disagreements\n",
                ops_run, denied, allowed, failures.size());
    for (size_t i = 0; i < failures.size() && i < 20; ++i) std::printf("%s\n", failures[i].c_str());
    CHECK(failures.empty());
    // both outcomes, or the corpus proves nothing
    CHECK(denied > ops_run / 10);
    CHECK(allowed > ops_run / 20);
}
