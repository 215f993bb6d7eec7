// Differential test of the cgroup sock_addr programs against the reference
// evaluator: random rule files through the real compiler and instantiate(),
// the resulting maps loaded for real, and random connect / sendto / bind calls
// made from a sandbox leaf cgroup. For every operation the kernel's verdict
// (EPERM or not) and its ring-buffer record (decision, rule id) must equal
// what evaluate() and evaluate_tables() say.
//
// The tier runs in its own network namespace: lo up, and 10.77.0.0/16 and
// fd00:77::/32 as local routes on lo, so every address the corpus names is
// local and nothing leaves the machine. The namespace goes away with the
// process.
//
//   BULWARK_DIFF_SEED=<n>|random   corpus seed (default fixed; printed)
//   BULWARK_DIFF_POLICIES=<n>      policies (default 300), 32 operations each
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bpf_env.h"
#include "diff_corpus.h"

using namespace bwtest;
namespace dt = bulwark::difftest;
namespace pol = bulwark::policy;
using dt::decision_of;
using dt::rule_text;

namespace {

constexpr uint64_t kNetSeed = 20261203;

void enter_netns() {
    static bool done = false;
    if (done) return;
    REQUIRE(::unshare(CLONE_NEWNET) == 0);
    for (std::string cmd : {std::string("ip link set lo up"), std::string("ip route add local ") + dt::kLocalV4 + " dev lo",
                            std::string("ip -6 route add local ") + dt::kLocalV6 + " dev lo"}) {
        INFO(cmd);
        REQUIRE(std::system((cmd + " >/dev/null 2>&1").c_str()) == 0);
    }
    done = true;
}

uint64_t corpus_seed() {
    const char* v = std::getenv("BULWARK_DIFF_SEED");
    if (v && std::string(v) == "random")
        return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    return dt::seed_from_env("BULWARK_DIFF_SEED", kNetSeed);
}

// The syscall itself, from inside the sandbox: 0 or errno.
int perform(const dt::NetOp& o) {
    int s = ::socket(o.family, o.type | SOCK_CLOEXEC, 0);
    if (s < 0) return 1000 + errno;
    sockaddr_storage ss{};
    socklen_t len;
    if (o.family == AF_INET) {
        auto* a = reinterpret_cast<sockaddr_in*>(&ss);
        a->sin_family = AF_INET;
        a->sin_port = htons(o.op.port);
        inet_pton(AF_INET, o.addr.c_str(), &a->sin_addr);
        len = sizeof *a;
    } else {
        auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(o.op.port);
        inet_pton(AF_INET6, o.addr.c_str(), &a->sin6_addr);
        len = sizeof *a;
    }
    auto* sa = reinterpret_cast<sockaddr*>(&ss);
    int one = 1, rc = 0;
    switch (o.op.kind) {
        case pol::OpKind::Connect: rc = ::connect(s, sa, len); break;
        case pol::OpKind::Send: rc = ::sendto(s, "x", 1, MSG_DONTWAIT, sa, len) < 0 ? -1 : 0; break;
        case pol::OpKind::Bind:
            // bind of an address that is not configured (but routed locally)
            if (o.family == AF_INET) setsockopt(s, IPPROTO_IP, IP_FREEBIND, &one, sizeof one);
            else setsockopt(s, IPPROTO_IPV6, IPV6_FREEBIND, &one, sizeof one);
            rc = ::bind(s, sa, len);
            break;
        default: rc = -1, errno = EINVAL;
    }
    int err = rc < 0 ? errno : 0;
    ::close(s);
    return err;
}



std::string answer(pol::Verdict v, uint32_t rule) {
    return std::string(pol::to_string(v)) + " rule=" + rule_text(rule);
}

std::string kernel_answer(int err, const bw_event* e) {
    std::string out = "errno=" + std::string(err ? strerrorname_np(err) ? strerrorname_np(err) : std::to_string(err) : "0");
    if (!e) return out + " no event";
    static const char* names[] = {"allow", "deny", "audit", "observe"};
    return out + " event " + (e->decision < 4 ? names[e->decision] : "?") + " rule=" + rule_text(e->rule_id);
}

uint16_t event_op(pol::OpKind k) {
    return k == pol::OpKind::Connect ? BW_OP_CONNECT : k == pol::OpKind::Bind ? BW_OP_BIND : BW_OP_SENDMSG;
}

// Loads one compiled policy, runs the operations in a fresh leaf and returns
// one reproduction per disagreement.
std::vector<std::string> run_policy(uint64_t seed, size_t index, const std::string& text,
                                    const std::vector<dt::NetOp>& ops) {
    enter_netns();
    std::vector<std::string> out;
    auto bundle = dt::compile_policy(text, "diff-net-" + std::to_string(index) + ".yaml");
    if (!bundle) {
        out.push_back(dt::reproduction(seed, index, text, "(compile)", "a bundle", bundle.error()));
        return out;
    }
    BpfTables tables = bundle->bpf;
    tables.header.flags |= BW_POL_REPORT_ALLOW;  // a record for every decision, allowed ones too
    auto loaded = Env::get().maps().load(tables);
    if (!loaded) {
        out.push_back(dt::reproduction(seed, index, text, "(load)", "loaded", loaded.error().message()));
        return out;
    }
    {
        Leaf leaf("diff" + std::to_string(index));
        REQUIRE(Env::get().maps().bind(leaf.id, loaded->handle));
        int* errs = shared<int>(ops.size());
        REQUIRE(errs);
        int rc = run_in(leaf.path, [&] {
            for (size_t i = 0; i < ops.size(); ++i) errs[i] = perform(ops[i]);
            return 0;
        });
        REQUIRE(rc == 0);
        std::vector<bw_event> evs;
        for (const auto& e : Env::get().events_of(leaf.id))
            if (e.layer == BW_LAYER_SOCK_ADDR) evs.push_back(e);
        // socket() comes first: where the evaluator denies the family or type
        // (network: none), the kernel must refuse the socket and the address
        // hook never runs.
        std::vector<pol::Decision> sock(ops.size());
        size_t reach = 0;
        for (size_t i = 0; i < ops.size(); ++i) {
            pol::Operation so;
            so.kind = pol::OpKind::Socket;
            so.family = static_cast<uint32_t>(ops[i].family);
            so.type = static_cast<uint32_t>(ops[i].type);
            sock[i] = pol::evaluate(*bundle, so);
            reach += sock[i].verdict != pol::Verdict::Deny;
        }
        bool events_aligned = evs.size() == reach;
        size_t next_event = 0;
        for (size_t i = 0; i < ops.size(); ++i) {
            const auto& o = ops[i];
            std::string what = dt::describe(o.op) + " via " + (o.family == AF_INET ? "AF_INET" : "AF_INET6") + " " +
                               (o.type == SOCK_STREAM ? "SOCK_STREAM" : "SOCK_DGRAM") + " socket to " + o.addr;
            if (sock[i].verdict == pol::Verdict::Deny) {
                if (errs[i] != 1000 + EPERM)
                    out.push_back(dt::reproduction(seed, index, text, "socket() for " + what,
                                                   "deny: " + sock[i].explanation,
                                                   "socket() errno=" + std::to_string(errs[i] - 1000)));
                continue;
            }
            auto want = pol::evaluate(*bundle, o.op);
            auto tab = pol::evaluate_tables(*bundle, o.op);
            const bw_event* e = events_aligned ? &evs[next_event++] : nullptr;
            bool ok = want.verdict == tab.verdict && want.rule_id == tab.rule_id;
            ok = ok && (errs[i] == EPERM) == (want.verdict == pol::Verdict::Deny);
            ok = ok && e && e->op == event_op(o.op.kind) && e->obj.net.port == o.op.port &&
                 e->decision == decision_of(want.verdict) && e->rule_id == want.rule_id;
            if (!ok)
                out.push_back(dt::reproduction(
                    seed, index, text, what,
                    answer(want.verdict, want.rule_id) + " (tables: " + answer(tab.verdict, tab.rule_id) + "): " +
                        want.explanation,
                    kernel_answer(errs[i], e) +
                        (events_aligned ? "" : " (" + std::to_string(evs.size()) + " events for " +
                                                   std::to_string(reach) + " operations)")));
        }
        munmap(errs, sizeof(int) * ops.size());
    }
    (void)Env::get().maps().free(loaded->handle.slot);
    return out;
}

void report(const std::vector<std::string>& failures) {
    for (size_t i = 0; i < failures.size() && i < 20; ++i) std::printf("%s\n", failures[i].c_str());
    if (failures.size() > 20) std::printf("... %zu more disagreements\n", failures.size() - 20);
}

dt::NetOp net_op(pol::OpKind kind, int family, int type, const std::string& addr, uint16_t port) {
    dt::NetOp o;
    o.op.kind = kind;
    o.op.addr = *pol::parse_ip(addr);
    o.op.port = port;
    o.op.proto = type == SOCK_STREAM ? BW_PROTO_TCP : BW_PROTO_UDP;
    o.family = family;
    o.type = type;
    o.addr = addr;
    return o;
}

}  // namespace

TEST_CASE("sock_addr programs and the reference evaluator agree on a random corpus") {
    uint64_t seed = corpus_seed();
    size_t policies = static_cast<size_t>(dt::seed_from_env("BULWARK_DIFF_POLICIES", 300));
    std::printf("integration_bpf_diff: seed=%llu policies=%zu operations=32 (replay: BULWARK_DIFF_SEED=%llu)\n",
                (unsigned long long)seed, policies, (unsigned long long)seed);
    std::vector<std::string> failures;
    size_t ops_run = 0, denied = 0, audited = 0, skipped = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < policies; ++i) {
        dt::Rng rng = dt::policy_rng(seed, i);
        std::string text = dt::random_net_policy(rng, i);
        // A generated policy the compiler refuses (too many port ranges for one
        // prefix) is replaced by the next draw of the same generator.
        for (int attempt = 0; attempt < 8 && !dt::compile_policy(text, "probe.yaml"); ++attempt) {
            text = dt::random_net_policy(rng, i);
            ++skipped;
        }
        auto ops = dt::random_net_ops(rng, 32);
        auto bundle = dt::compile_policy(text, "count.yaml");
        if (bundle)
            for (const auto& o : ops) {
                auto d = pol::evaluate(*bundle, o.op);
                denied += d.verdict == pol::Verdict::Deny;
                audited += d.verdict == pol::Verdict::Audit;
            }
        auto f = run_policy(seed, i, text, ops);
        ops_run += ops.size();
        failures.insert(failures.end(), f.begin(), f.end());
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("integration_bpf_diff: %zu operations (%zu denied, %zu audited, %zu allowed), %zu redrawn "
                "policies, %zu disagreements, %.1f s\n",
                ops_run, denied, audited, ops_run - denied - audited, skipped, failures.size(), secs);
    report(failures);
    CHECK(failures.empty());
    // The corpus must exercise both outcomes, or it proves nothing.
    CHECK(denied > ops_run / 10);
    CHECK(ops_run - denied - audited > ops_run / 20);
}

// Regression: connecting or sending to the wildcard address reaches the local
// host; the programs judge it as 127.0.0.1 / ::1 and so must the evaluator
// (the corpus's 0.0.0.0, :: and ::ffff:0.0.0.0 targets keep checking it).
TEST_CASE("regression: connect and send to 0.0.0.0 and :: are judged as loopback") {
    const std::string text =
        "tool: wildcard\nmode: enforce\nnetwork:\n  families: [inet, inet6]\n"
        "  connect:\n    - { cidr: \"127.0.0.1/32\", ports: [18501] }\n    - { cidr: \"::1/128\", ports: [18501] }\n"
        "  send:\n    - { cidr: \"0.0.0.0/32\", ports: [18502] }\n"
        "  bind:\n    - { cidr: \"0.0.0.0/32\", ports: [18503] }\n";
    std::vector<dt::NetOp> ops = {
        net_op(pol::OpKind::Connect, AF_INET, SOCK_STREAM, "0.0.0.0", 18501),        // allowed as 127.0.0.1
        net_op(pol::OpKind::Connect, AF_INET6, SOCK_STREAM, "::", 18501),            // allowed as ::1
        net_op(pol::OpKind::Connect, AF_INET6, SOCK_DGRAM, "::ffff:0.0.0.0", 18501), // allowed as 127.0.0.1
        net_op(pol::OpKind::Send, AF_INET, SOCK_DGRAM, "0.0.0.0", 18502),            // a 0.0.0.0 rule does not
        net_op(pol::OpKind::Bind, AF_INET, SOCK_DGRAM, "0.0.0.0", 18503),            // bind keeps the wildcard
        net_op(pol::OpKind::Connect, AF_INET, SOCK_STREAM, "0.0.0.0", 18502),
    };
    auto bundle = dt::compile_policy(text, "wildcard.yaml");
    REQUIRE(bundle);
    CHECK(pol::evaluate(*bundle, ops[0].op).verdict == pol::Verdict::Allow);
    CHECK(pol::evaluate(*bundle, ops[1].op).verdict == pol::Verdict::Allow);
    CHECK(pol::evaluate(*bundle, ops[3].op).verdict == pol::Verdict::Deny);
    CHECK(pol::evaluate(*bundle, ops[4].op).verdict == pol::Verdict::Allow);
    auto failures = run_policy(0, 0, text, ops);
    report(failures);
    CHECK(failures.empty());
}
