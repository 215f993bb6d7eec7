// compile_seccomp(): a `syscalls:` spec -> one classic-BPF program, built
// with libseccomp.
//
// libseccomp resolves overlapping rules of one syscall silently in favour of
// the less specific rule (a conditional deny added next to an unconditional
// allow is dropped), and it cannot compare one argument twice in a rule. So
// precedence is settled here, before libseccomp sees a rule: every entry is
// narrowed by the negation of each higher-precedence entry with a different
// action (deny > clone3 ENOSYS, setuid/setgid modes > allow > baseline), and the resulting rules of
// different actions never overlap. What cannot be expressed that way is a
// compile error naming both rules, never a silently wider filter. Every
// exported program is run through a cBPF interpreter against the entries; a
// syscall libseccomp got wrong is built again with its rules cut apart
// (Form::Disjoint), and wrong again is a compile error.
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <functional>
#include "seccomp_format.h"
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <variant>

#include "bulwark/policy/cbpf.h"
#include "bulwark/policy/seccomp.h"
#include "seccomp_internal.h"

namespace bulwark::policy {
namespace {

using Cond = SyscallArgCond;
using Op = SyscallArgCond::Op;
using Term = std::vector<Cond>;  // a conjunction, at most one condition per argument
constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
// libseccomp's rule database grows exponentially on some overlapping
// 64-bit conditions (seen beyond ~32 rules of one syscall), so a spec that
// would need more is refused. Rules are also handed over in libseccomp_order,
// which keeps libseccomp 2.5 out of a loop it never leaves on some mixes of
// a few rules; of 4,800 seeded random socket mixes (seccomp_mix_bench) 2 still
// reach one, against 57 before the order (and 364 built wrongly, against 21).
constexpr size_t kMaxRulesPerSyscall = 32;
// Precedence: tier * kTierRank + severity * 10000 + errno.
constexpr int64_t kTierRank = 1'000'000;
constexpr int kDenyTier = 4;
// Below the baseline: a socket family network.families leaves out, for the
// socket calls some rule allows (SeccompSpec::socket_families).
constexpr int kFamilyTier = 0;
constexpr const char* kFamilyCalls[] = {"socket", "socketpair"};

struct True {};
struct Unsat {};
struct Inexpressible {};  // needs more than one condition
using Norm = std::variant<Cond, True, Unsat>;

Norm normalize(Cond c) {
    switch (c.op) {
        case Op::Lt: if (c.value == 0) return Unsat{}; break;
        case Op::Gt: if (c.value == kMax) return Unsat{}; break;
        case Op::Ge: if (c.value == 0) return True{}; break;
        case Op::Le: if (c.value == kMax) return True{}; break;
        case Op::MaskedEq:
            if (c.value & ~c.mask) return Unsat{};
            if (c.mask == 0) return True{};
            if (c.mask == kMax) return Cond{c.index, Op::Eq, c.value, 0};
            break;
        default: break;
    }
    return c;
}

bool holds(const Cond& c, uint64_t v) {
    switch (c.op) {
        case Op::Eq: return v == c.value;
        case Op::Ne: return v != c.value;
        case Op::Lt: return v < c.value;
        case Op::Le: return v <= c.value;
        case Op::Gt: return v > c.value;
        case Op::Ge: return v >= c.value;
        case Op::MaskedEq: return (v & c.mask) == c.value;
    }
    return false;
}

struct Interval { uint64_t lo, hi; };

std::optional<Interval> interval(const Cond& c) {
    switch (c.op) {
        case Op::Lt: return Interval{0, c.value - 1};
        case Op::Le: return Interval{0, c.value};
        case Op::Gt: return Interval{c.value + 1, kMax};
        case Op::Ge: return Interval{c.value, kMax};
        default: return std::nullopt;
    }
}

using Merged = std::variant<Cond, True, Unsat, Inexpressible>;

Merged from_interval(uint8_t index, uint64_t lo, uint64_t hi) {
    if (lo > hi) return Unsat{};
    if (lo == hi) return Cond{index, Op::Eq, lo, 0};
    if (lo == 0 && hi == kMax) return True{};
    if (lo == 0) return Cond{index, Op::Le, hi, 0};
    if (hi == kMax) return Cond{index, Op::Ge, lo, 0};
    return Inexpressible{};
}

// One condition equivalent to a && b (same argument), if there is one.
Merged merge(const Cond& a, const Cond& b) {
    if (a.op == Op::Eq) return holds(b, a.value) ? Merged{a} : Merged{Unsat{}};
    if (b.op == Op::Eq) return holds(a, b.value) ? Merged{b} : Merged{Unsat{}};
    if (a.op == Op::MaskedEq && b.op == Op::MaskedEq) {
        if ((a.value ^ b.value) & a.mask & b.mask) return Unsat{};
        return Cond{a.index, Op::MaskedEq, a.value | b.value, a.mask | b.mask};
    }
    if (a.op == Op::MaskedEq || b.op == Op::MaskedEq) {
        // The masked set {x : (x & m) == w} spans [w, w | ~m].
        const Cond& me = a.op == Op::MaskedEq ? a : b;
        const Cond& other = a.op == Op::MaskedEq ? b : a;
        const uint64_t min = me.value, max = me.value | ~me.mask;
        if (other.op == Op::Ne) {
            if ((other.value & me.mask) != me.value) return me;  // excluded already
            if (min == max) return Unsat{};
            return Inexpressible{};
        }
        if (auto r = interval(other)) {
            if (r->lo <= min && max <= r->hi) return me;
            if (min > r->hi || max < r->lo) return Unsat{};
        }
        return Inexpressible{};
    }
    auto ia = interval(a), ib = interval(b);
    if (ia && ib)
        return from_interval(a.index, std::max(ia->lo, ib->lo), std::min(ia->hi, ib->hi));
    if (!ia && !ib)  // Ne, Ne
        return a.value == b.value ? Merged{a} : Merged{Inexpressible{}};
    const Cond& ne = ia ? b : a;
    Interval r = ia ? *ia : *ib;
    if (ne.value < r.lo || ne.value > r.hi) return ia ? Merged{a} : Merged{b};
    if (ne.value == r.lo) return from_interval(a.index, r.lo + 1, r.hi);  // lo < kMax here
    if (ne.value == r.hi) return from_interval(a.index, r.lo, r.hi - 1);
    return Inexpressible{};
}

// The values an interval holds, as aligned power-of-two blocks
// ((v & mask) == prefix), like a CIDR range split into prefixes.
void interval_blocks(uint8_t index, uint64_t lo, uint64_t hi, std::vector<Cond>& out) {
    while (lo <= hi) {
        // Largest block starting at lo that is aligned and stays within hi.
        int k = lo == 0 ? 64 : std::countr_zero(lo);
        while (k > 0) {
            const uint64_t size_m1 = k == 64 ? kMax : (uint64_t{1} << k) - 1;
            if (size_m1 <= hi - lo) break;
            --k;
        }
        const uint64_t size_m1 = k == 64 ? kMax : (uint64_t{1} << k) - 1;
        out.push_back(Cond{index, Op::MaskedEq, lo, ~size_m1});
        if (hi - lo == size_m1) break;  // reached hi (also avoids overflow)
        lo += size_m1 + 1;
    }
}

// A condition as disjoint blocks.
std::vector<Cond> blocks(const Cond& c) {
    std::vector<Cond> out;
    switch (c.op) {
        case Op::Eq: out.push_back(Cond{c.index, Op::MaskedEq, c.value, kMax}); break;
        case Op::MaskedEq: out.push_back(c); break;
        case Op::Ne:
            if (c.value > 0) interval_blocks(c.index, 0, c.value - 1, out);
            if (c.value < kMax) interval_blocks(c.index, c.value + 1, kMax, out);
            break;
        default: {
            auto r = interval(c);
            if (r && r->lo <= r->hi) interval_blocks(c.index, r->lo, r->hi, out);
            break;
        }
    }
    return out;
}

// a && b (same argument) as a disjunction of single conditions; empty: never.
// nullopt: always.
std::optional<std::vector<Cond>> merge_any(const Cond& a, const Cond& b) {
    Merged m = merge(a, b);
    if (std::holds_alternative<True>(m)) return std::nullopt;
    if (std::holds_alternative<Unsat>(m)) return std::vector<Cond>{};
    if (std::holds_alternative<Cond>(m)) return std::vector<Cond>{std::get<Cond>(m)};
    std::vector<Cond> out;
    if (a.op != Op::MaskedEq && b.op != Op::MaskedEq) {
        // Both are unions of intervals: intersect them, and express each
        // piece with one comparison where it touches 0 or the maximum.
        auto pieces = [](const Cond& c) {
            std::vector<Interval> v;
            if (c.op == Op::Eq) v.push_back({c.value, c.value});
            else if (c.op == Op::Ne) {
                if (c.value > 0) v.push_back({0, c.value - 1});
                if (c.value < kMax) v.push_back({c.value + 1, kMax});
            } else if (auto r = interval(c)) v.push_back(*r);
            return v;
        };
        for (const Interval& x : pieces(a))
            for (const Interval& y : pieces(b)) {
                const uint64_t lo = std::max(x.lo, y.lo), hi = std::min(x.hi, y.hi);
                if (lo > hi) continue;
                Merged one = from_interval(a.index, lo, hi);
                if (std::holds_alternative<True>(one)) return std::nullopt;
                if (std::holds_alternative<Cond>(one)) out.push_back(std::get<Cond>(one));
                else if (std::holds_alternative<Inexpressible>(one)) interval_blocks(a.index, lo, hi, out);
            }
        return out;
    }
    for (const Cond& x : blocks(a))
        for (const Cond& y : blocks(b)) {
            Merged xy = merge(x, y);
            if (std::holds_alternative<Cond>(xy)) {
                Norm n = normalize(std::get<Cond>(xy));
                if (std::holds_alternative<Cond>(n)) out.push_back(std::get<Cond>(n));
            }
        }
    return out;
}

// t && c as a disjunction of terms (empty: unsatisfiable).
std::vector<Term> conjoin(const Term& t, const Cond& c) {
    Norm n = normalize(c);
    if (std::holds_alternative<Unsat>(n)) return {};
    if (std::holds_alternative<True>(n)) return {t};
    const Cond& nc = std::get<Cond>(n);
    auto same = std::ranges::find_if(t, [&](const Cond& x) { return x.index == nc.index; });
    if (same == t.end()) {
        Term out = t;
        out.push_back(nc);
        std::ranges::sort(out, {}, &Cond::index);
        return {out};
    }
    auto alts = merge_any(*same, nc);
    Term rest = t;
    std::erase_if(rest, [&](const Cond& x) { return x.index == nc.index; });
    if (!alts) return {rest};
    std::vector<Term> out;
    for (const Cond& alt : *alts) {
        Term x = rest;
        x.push_back(alt);
        std::ranges::sort(x, {}, &Cond::index);
        out.push_back(std::move(x));
    }
    return out;
}

// !c as a disjunction of conditions; nullopt means !c always holds.
std::optional<std::vector<Cond>> negate(const Cond& c) {
    Norm n = normalize(c);
    if (std::holds_alternative<Unsat>(n)) return std::nullopt;
    if (std::holds_alternative<True>(n)) return std::vector<Cond>{};
    const Cond& x = std::get<Cond>(n);
    auto one = [&](Op op) { return std::vector<Cond>{Cond{x.index, op, x.value, 0}}; };
    switch (x.op) {
        case Op::Eq: return one(Op::Ne);
        case Op::Ne: return one(Op::Eq);
        case Op::Lt: return one(Op::Ge);
        case Op::Le: return one(Op::Gt);
        case Op::Gt: return one(Op::Le);
        case Op::Ge: return one(Op::Lt);
        case Op::MaskedEq: {
            // (v & m) != want  <=>  some bit of m differs from want.
            std::vector<Cond> alts;
            for (int b = 0; b < 64; ++b) {
                const uint64_t bit = uint64_t{1} << b;
                if (x.mask & bit) alts.push_back(Cond{x.index, Op::MaskedEq, ~x.value & bit, bit});
            }
            return alts;
        }
    }
    return std::vector<Cond>{};
}

struct Entry {
    std::string name;
    std::vector<Term> terms;  // a disjunction; one empty term: unconditional
    SeccompAction action = SeccompAction::Allow;
    uint16_t errno_value = 0;
    int64_t rank = 0;  // higher wins
    uint32_t rule_id = 0;
    std::string what;  // "deny rule 7", for messages
};

bool same_action(const Entry& a, const Entry& b) {
    return a.action == b.action &&
           (a.action != SeccompAction::Errno || a.errno_value == b.errno_value);
}

std::unexpected<SeccompError> error(uint32_t rule_id, std::string msg) {
    return std::unexpected(SeccompError{rule_id, std::move(msg)});
}


bool same_term(const Term& a, const Term& b) {
    return std::ranges::equal(a, b, [](const Cond& p, const Cond& q) {
        return p.index == q.index && p.op == q.op && p.value == q.value && p.mask == q.mask;
    });
}

void add_unique(std::vector<Term>& terms, Term t) {
    if (std::ranges::none_of(terms, [&](const Term& x) { return same_term(x, t); }))
        terms.push_back(std::move(t));
}

// terms && !ft, as a disjunction of terms (nullopt: ft can never match, so
// it takes nothing away).
std::optional<std::vector<Term>> subtract(const std::vector<Term>& terms, const Term& ft) {
    // !(c1 && c2 ...) == !c1 || !c2 ...
    std::vector<Cond> alts;
    for (const Cond& c : ft) {
        auto neg = negate(c);
        if (!neg) return std::nullopt;
        alts.insert(alts.end(), neg->begin(), neg->end());
    }
    std::vector<Term> next;
    for (const Term& t : terms) {
        // A term ft cannot meet keeps as it is (t && !ft == t): splitting it
        // would only add terms it already covers.
        if (std::ranges::any_of(ft, [&](const Cond& c) { return conjoin(t, c).empty(); })) {
            add_unique(next, t);
            continue;
        }
        for (const Cond& alt : alts)
            for (Term& nt : conjoin(t, alt)) add_unique(next, std::move(nt));
    }
    return next;
}

std::unexpected<SeccompError> too_many_rules(uint32_t rule_id, const Entry& e, std::string_view by) {
    return error(rule_id, detail::format("{}: {} splits {} into more than {} libseccomp rules; simplify the "
                                           "argument conditions",
                                           e.name, by, e.what, kMaxRulesPerSyscall));
}

// x <= v as x < v + 1, x > v as x >= v + 1: libseccomp tests both of a
// pair of complementary ranges with one node then (its own LT is GE with the
// branches swapped), where `a0 <= 10` beside `a0 >= 11` becomes two nodes
// whose fall-through it wires wrong.
Cond as_ge_or_lt(Cond c) {
    if (c.op == Op::Le && c.value < kMax) return Cond{c.index, Op::Lt, c.value + 1, 0};
    if (c.op == Op::Gt && c.value < kMax) return Cond{c.index, Op::Ge, c.value + 1, 0};
    return c;
}

// Every arguments a matches, b matches too: nothing of a is left outside b.
bool covers(const Term& b, const Term& a) {
    auto rest = subtract({a}, b);
    return rest && rest->empty();
}

// A rule another rule of its action covers is left out: it decides nothing
// of its own, and libseccomp 2.5 loses the rule-tree nodes of rules that a
// wider one added after them replaces (a leak in every long-lived process
// compiling such rules, seen by LeakSanitizer on the random mixes).
void drop_covered(std::vector<std::pair<Term, const Entry*>>& rules) {
    std::vector<bool> drop(rules.size(), false);
    for (size_t i = 0; i < rules.size(); ++i)
        for (size_t j = 0; j < rules.size() && !drop[i]; ++j) {
            if (i == j || drop[j] || !same_action(*rules[i].second, *rules[j].second)) continue;
            // of two equal rules the first stays
            if (covers(rules[j].first, rules[i].first) && (j < i || !covers(rules[i].first, rules[j].first)))
                drop[i] = true;
        }
    std::vector<std::pair<Term, const Entry*>> kept;
    for (size_t i = 0; i < rules.size(); ++i)
        if (!drop[i]) kept.push_back(std::move(rules[i]));
    rules = std::move(kept);
}

// The order libseccomp is handed one syscall's rules in (a stable sort, by
// each rule's conditions in turn; conjoin keeps them by argument):
// - the first by its argument, lowest first: libseccomp 2.5 drops rules that
//   start at a0 added after one that starts at a2 (`a0 == 0 && a2 != 0` after
//   `a2 == 0`);
// - each further one by its argument, highest first, and on one argument
//   ==, != or a mask before a range: of two rules that share a first
//   comparison that is a range or != (a 64-bit compare split into nodes),
//   libseccomp never returns from adding the second when its next comparison
//   is on a higher argument than the first's, or on the same argument with
//   ==, != or a mask where the first's is a range (`a0 >= 1000 && a1 == 9`
//   after `a0 >= 1000 && a1 <= 40`); in this order the same rules build.
std::vector<std::pair<int, bool>> libseccomp_order(const Term& t) {
    std::vector<std::pair<int, bool>> key;
    for (const Cond& c : t) key.emplace_back(key.empty() ? c.index : -int{c.index}, interval(c).has_value());
    return key;
}

// How resolve() writes one syscall's rules for libseccomp.
enum class Form : uint8_t {
    // Each entry minus every higher-ranked entry with a different action:
    // rules of different actions never overlap; rules of one action may.
    Precedence,
    // Besides, each rule minus the rules of its action that rank above it or
    // come before it, so no two rules can match the same arguments; ranges
    // written as_ge_or_lt. libseccomp drops a rule whose range on an argument
    // overlaps a range another rule of the same action tests there (socket
    // `a0 >= 11 && a1 == 2` vanishes beside `a0 >= 41`). The verifier catches
    // it; the syscall is then built again in this form. Not the
    // first choice: cutting the rules of one action apart needs more of them,
    // and a mix near the per-syscall bound passes only in the other form.
    Disjoint,
};

// Final rules of one syscall, in libseccomp_order.
std::expected<std::vector<std::pair<Term, const Entry*>>, SeccompError> resolve(const std::vector<Entry>& entries,
                                                                                 Form form) {
    std::vector<const Entry*> by_rank;
    for (const Entry& e : entries) by_rank.push_back(&e);
    std::ranges::stable_sort(by_rank, std::greater{}, &Entry::rank);
    std::map<const Entry*, std::vector<Term>> final_terms;
    std::vector<std::pair<const Term*, const Entry*>> kept;  // in by_rank order
    for (const Entry* e : by_rank) {
        std::vector<Term> terms = e->terms;
        for (const Entry& f : entries) {
            if (f.rank <= e->rank || same_action(*e, f)) continue;
            for (const Term& ft : f.terms) {
                auto rest = subtract(terms, ft);
                if (!rest) continue;
                terms = std::move(*rest);
                if (terms.size() > kMaxRulesPerSyscall) return too_many_rules(f.rule_id, *e, f.what);
                if (terms.empty()) break;
            }
            if (terms.empty()) break;
        }
        std::vector<Term>& own = final_terms[e];
        if (form == Form::Precedence) {
            own = std::move(terms);
            continue;
        }
        for (const auto& [term, by] : kept) {
            if (terms.empty()) break;
            if (!same_action(*e, *by)) continue;  // disjoint already: one outranks the other
            auto rest = subtract(terms, *term);
            if (!rest) continue;
            terms = std::move(*rest);
            if (terms.size() > kMaxRulesPerSyscall) return too_many_rules(by->rule_id, *e, by->what);
        }
        // The entry's own terms may overlap each other: each is cut by those
        // before it too.
        for (const Term& t : terms) {
            std::vector<Term> piece{t};
            for (const Term& before : own) {
                auto rest = subtract(piece, before);
                if (rest) piece = std::move(*rest);
                if (piece.empty()) break;
            }
            for (Term& p : piece) own.push_back(std::move(p));
            if (own.size() > kMaxRulesPerSyscall) return too_many_rules(e->rule_id, *e, "its own overlap");
        }
        for (const Term& t : own) kept.emplace_back(&t, e);
    }
    std::vector<std::pair<Term, const Entry*>> out;
    for (const Entry& e : entries)
        for (Term& t : final_terms[&e]) out.emplace_back(std::move(t), &e);
    if (form == Form::Disjoint)
        for (auto& [term, _] : out)
            for (Cond& c : term) c = as_ge_or_lt(c);
    drop_covered(out);
    std::ranges::stable_sort(out, {}, [](const auto& r) { return libseccomp_order(r.first); });
    return out;
}

struct CtxDeleter {
    void operator()(void* ctx) const { seccomp_release(ctx); }
};
using Ctx = std::unique_ptr<void, CtxDeleter>;

scmp_compare to_scmp(Op op) {
    switch (op) {
        case Op::Eq: return SCMP_CMP_EQ;
        case Op::Ne: return SCMP_CMP_NE;
        case Op::Lt: return SCMP_CMP_LT;
        case Op::Le: return SCMP_CMP_LE;
        case Op::Gt: return SCMP_CMP_GT;
        case Op::Ge: return SCMP_CMP_GE;
        case Op::MaskedEq: return SCMP_CMP_MASKED_EQ;
    }
    return SCMP_CMP_EQ;
}

// libseccomp checks each action against the API level it probes from the
// running kernel (seccomp(SECCOMP_GET_ACTION_AVAIL), ...). The programs this
// compiler emits need level 3 (KILL_PROCESS, LOG) and are installed and
// canary-checked by agentd on the target host, so the compile itself must
// not depend on the machine it runs on: where the probe sees no seccomp()
// (qemu-user answers ENOSYS, as does a sandbox that refuses it) the level is
// pinned to 3 rather than every filter failing with EINVAL. A kernel that
// answers keeps its own level.
constexpr unsigned kSeccompApiLevel = 3;

std::expected<Ctx, SeccompError> new_ctx(uint32_t default_action, uint32_t arch) {
    if (seccomp_api_get() < kSeccompApiLevel)
        if (int rc = seccomp_api_set(kSeccompApiLevel); rc != 0)
            return error(0, detail::format("seccomp_api_set({}): {}", kSeccompApiLevel, std::strerror(-rc)));
    Ctx ctx{seccomp_init(default_action)};
    if (!ctx) return error(0, "seccomp_init failed");
    if (arch != seccomp_arch_native()) {
        if (int rc = seccomp_arch_add(ctx.get(), arch); rc != 0)
            return error(0, detail::format("seccomp_arch_add({:#x}): {}", arch, std::strerror(-rc)));
        if (int rc = seccomp_arch_remove(ctx.get(), SCMP_ARCH_NATIVE); rc != 0)
            return error(0, detail::format("seccomp_arch_remove(native): {}", std::strerror(-rc)));
    }
    struct { scmp_filter_attr attr; uint32_t value; const char* name; } attrs[] = {
        {SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS, "ACT_BADARCH"},
        {SCMP_FLTATR_CTL_NNP, 0, "CTL_NNP"},  // the installer sets no_new_privs itself
        {SCMP_FLTATR_CTL_OPTIMIZE, 2, "CTL_OPTIMIZE"},
    };
    for (const auto& a : attrs)
        if (int rc = seccomp_attr_set(ctx.get(), a.attr, a.value); rc != 0)
            return error(0, detail::format("seccomp_attr_set({}): {}", a.name, std::strerror(-rc)));
    return ctx;
}

std::expected<std::vector<sock_filter>, SeccompError> export_program(void* ctx) {
    int fd = memfd_create("bulwark-seccomp", MFD_CLOEXEC);
    if (fd < 0) return error(0, detail::format("memfd_create: {}", std::strerror(errno)));
    struct Closer { int fd; ~Closer() { ::close(fd); } } closer{fd};
    if (int rc = seccomp_export_bpf(ctx, fd); rc != 0)
        return error(0, detail::format("seccomp_export_bpf: {}", std::strerror(-rc)));
    off_t size = lseek(fd, 0, SEEK_END);
    if (size < 0) return error(0, detail::format("lseek(memfd): {}", std::strerror(errno)));
    if (size == 0 || size % sizeof(sock_filter) != 0)
        return error(0, detail::format("libseccomp exported {} bytes, not whole instructions", size));
    std::vector<sock_filter> prog(static_cast<size_t>(size) / sizeof(sock_filter));
    size_t done = 0;
    auto* bytes = reinterpret_cast<char*>(prog.data());
    while (done < static_cast<size_t>(size)) {
        ssize_t n = pread(fd, bytes + done, static_cast<size_t>(size) - done,
                          static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return error(0, detail::format("pread(memfd): {}", std::strerror(errno)));
        done += static_cast<size_t>(n);
    }
    return prog;
}

std::expected<void, SeccompError> check_rule(const SyscallRule& r, bool deny) {
    if (!is_known_syscall(r.name))
        return error(r.rule_id, detail::format("unknown syscall '{}'", r.name));
    if (r.args.size() > 6)
        return error(r.rule_id, detail::format("{}: {} argument conditions (at most 6)", r.name,
                                            r.args.size()));
    for (const auto& a : r.args) {
        if (a.index > 5)
            return error(r.rule_id, detail::format("{}: argument index {} (must be 0..5)", r.name,
                                                a.index));
    }
    if (deny && r.action == SeccompAction::Allow)
        return error(r.rule_id, detail::format("deny rule for {} has action allow", r.name));
    if (r.action == SeccompAction::Errno && r.errno_value > 4095)
        return error(r.rule_id, detail::format("{}: errno {} out of range (1..4095)", r.name,
                                            r.errno_value));
    return {};
}

// clone3's flags sit behind a pointer the filter cannot read, so it is
// answered ENOSYS (libc falls back to clone, whose flags it can see) unless
// clone is allowed with no condition and denied under none: then no check
// on clone's flags exists for clone3 to get around (a daemon that makes
// sandboxes with clone3(CLONE_INTO_CGROUP) needs that).
std::expected<void, SeccompError> check_clone3_allow(const SyscallRule& r, const SeccompSpec& spec) {
    const bool clone_free = std::any_of(spec.allow.begin(), spec.allow.end(),
                                        [](const SyscallRule& a) { return a.name == "clone" && a.args.empty(); });
    const auto cond_deny = std::find_if(spec.deny.begin(), spec.deny.end(),
                                        [](const SyscallRule& d) { return d.name == "clone" && !d.args.empty(); });
    if (!clone_free)
        return error(r.rule_id, "clone3 cannot be allowed: seccomp cannot read the flags in its "
                                "struct, so it is answered ENOSYS and libc falls back to clone "
                                "(allowed only beside an allow of clone with no argument condition)");
    if (cond_deny != spec.deny.end())
        return error(r.rule_id, detail::format("clone3 cannot be allowed: rule {} denies clone under an "
                                               "argument condition, which clone3 would get around",
                                               cond_deny->rule_id));
    return {};
}

bool clone3_allowed(const SeccompSpec& spec) {
    return std::any_of(spec.allow.begin(), spec.allow.end(), [](const SyscallRule& a) { return a.name == "clone3"; });
}

// What libseccomp was asked for one syscall on one arch, kept so the
// exported program can be checked against it.
struct Check {
    uint32_t audit_arch;
    int nr;
    bool wide;  // 64-bit arch: full argument compares
    std::string name;
    std::vector<Entry> entries;
};

bool cond_holds(const Cond& c, uint64_t v, bool wide) {
    Cond x = c;
    if (!wide) {
        v &= 0xffffffffu;
        x.value &= 0xffffffffu;
        x.mask &= 0xffffffffu;
    }
    return holds(x, v);
}

// Boundary values of every condition of the entries, per argument, and
// their cartesian product (bounded).
std::vector<std::array<uint64_t, 6>> samples(const std::vector<Entry>& entries) {
    std::array<std::set<uint64_t>, 6> per_arg;
    for (auto& s : per_arg) s.insert(0);
    for (const Entry& e : entries)
        for (const Term& t : e.terms)
            for (const Cond& c : t) {
                auto& s = per_arg[c.index];
                for (uint64_t v : {c.value, c.value - 1, c.value + 1, ~uint64_t{0}}) s.insert(v);
                if (c.op == Op::MaskedEq) {
                    s.insert(c.value | ~c.mask);
                    s.insert(c.value + (~c.mask & (0 - ~c.mask)));  // next value outside the block
                    for (int b = 0; b < 64; ++b)
                        if (c.mask & (uint64_t{1} << b)) s.insert(c.value ^ (uint64_t{1} << b));
                }
            }
    std::vector<std::array<uint64_t, 6>> out{{}};
    for (size_t i = 0; i < 6; ++i) {
        if (per_arg[i].size() == 1) continue;
        std::vector<std::array<uint64_t, 6>> next;
        for (const auto& base : out)
            for (uint64_t v : per_arg[i]) {
                if (next.size() >= 20000) break;
                auto x = base;
                x[i] = v;
                next.push_back(x);
            }
        out = std::move(next);
    }
    return out;
}

// A syscall whose rules libseccomp compiled into other decisions than asked.
struct Miscompiled {
    std::string syscall;
    SeccompError error;
};

// libseccomp builds its rule tree heuristically; a rule combination it gets
// wrong must not become a filter. Every syscall the spec names is run through
// the exported program at the boundaries of its conditions and compared with
// what was asked.
std::expected<void, Miscompiled> verify(std::span<const sock_filter> prog,
                                         const std::vector<Check>& checks, uint32_t default_ret) {
    for (const Check& c : checks) {
        for (const auto& args : samples(c.entries)) {
            int64_t best = -1;
            std::vector<uint32_t> want;
            uint32_t rule_id = 0;
            for (const Entry& e : c.entries) {
                const bool match = std::ranges::any_of(e.terms, [&](const Term& t) {
                    return std::ranges::all_of(
                        t, [&](const Cond& x) { return cond_holds(x, args[x.index], c.wide); });
                });
                if (!match || e.rank < best) continue;
                if (e.rank > best) want.clear();
                best = e.rank;
                rule_id = e.rule_id;
                const uint32_t a = detail::scmp_action(e.action, e.errno_value);
                want.push_back(a == SCMP_ACT_KILL_PROCESS ? SECCOMP_RET_KILL_PROCESS : a);
            }
            if (want.empty()) want.push_back(default_ret);
            seccomp_data d{};
            d.nr = c.nr;
            d.arch = c.audit_arch;
            std::copy(args.begin(), args.end(), d.args);
            const uint32_t got = run_seccomp_filter(prog, d);
            if (std::ranges::find(want, got) == want.end())
                return std::unexpected(Miscompiled{
                    c.name, SeccompError{rule_id,
                             detail::format("libseccomp compiled the rules for {} into a filter that "
                                            "decides {:#x} instead of {:#x} for arguments ({:#x}, "
                                            "{:#x}, {:#x}, ...); simplify the argument conditions "
                                            "of this syscall",
                                            c.name, got, want.front(), args[0], args[1], args[2])}});
        }
    }
    return {};
}

using Built = std::expected<void, SeccompError>;
using EntriesByName = std::map<std::string, std::vector<Entry>>;

// One spec compiled, step by step (compile_seccomp orders them): the entries
// of each precedence tier by syscall, then one libseccomp context per
// architecture merged into one, exported, checked as the kernel would, and
// verified against the entries.
struct SeccompBuild {
    explicit SeccompBuild(const SeccompSpec& spec)
        : spec(spec),
          fallback_errno(spec.violation == SeccompAction::Errno ? spec.violation_errno : uint16_t{EPERM}),
          default_action(detail::scmp_action(spec.violation, spec.violation_errno)) {
        plan.default_action = spec.violation;
        plan.default_errno = spec.violation == SeccompAction::Errno ? spec.violation_errno : 0;
    }

    Built add_baseline();
    Built add_allows();
    Built add_clone3_enosys();
    Built add_setid_mode_refusal();
    Built add_denies();
    Built restrict_families();
    Built check_compat_arches();
    Built build_verified();

    const SeccompSpec& spec;
    const uint16_t fallback_errno;
    const uint32_t default_action;
    SeccompPlan plan;
    EntriesByName by_name;                       // entries by syscall, in precedence tiers
    std::map<std::string, uint32_t> decided_by;  // syscall -> rule id, for explanations
    Ctx merged;
    std::vector<Check> checks;
    std::set<std::string> disjoint;  // syscalls built in Form::Disjoint

    Form form_of(const std::string& syscall) const {
        return disjoint.contains(syscall) ? Form::Disjoint : Form::Precedence;
    }

private:
    Built build_arches();
    Built export_and_verify();
    std::string miscompiled;  // export_and_verify's verdict: the syscall libseccomp got wrong
    // How a socket family the list leaves out is answered.
    SyscallRule family_refusal(const char* call) const {
        const bool log = spec.violation == SeccompAction::Log;
        return {call, {}, log ? SeccompAction::Log : SeccompAction::Errno,
                log ? uint16_t{0} : spec.socket_families_errno, spec.socket_families_rule_id};
    }
    Entry entry(const SyscallRule& r, int tier, std::string what) const;
    Built add(const SyscallRule& r, int tier, std::string what);
    Built refuse_netlink_protocols(const std::vector<Term>& allowed, std::vector<Entry>& entries);
    Built add_arch(const detail::FilterArch& arch, Ctx& ctx, bool accepted);
    Built add_syscall(const detail::FilterArch& arch, Ctx& ctx, const std::string& name,
                      const std::vector<Entry>& entries);
};

// The violation action is a refusal, never allow; an errno one is in range.
Built check_violation(const SeccompSpec& spec) {
    if (spec.violation == SeccompAction::Allow)
        return error(spec.violation_rule_id,
                     "on_violation: allow would make the filter allow-all; use log to observe");
    if (spec.violation == SeccompAction::Errno &&
        (spec.violation_errno == 0 || spec.violation_errno > 4095))
        return error(spec.violation_rule_id,
                     detail::format("on_violation errno {} out of range (1..4095)",
                                 spec.violation_errno));
    return {};
}

// An entry for rule r in a tier: the violation errno where r names none,
// ranked by tier, then severity, then errno; unconditional until add()
// conjoins r's argument conditions.
Entry SeccompBuild::entry(const SyscallRule& r, int tier, std::string what) const {
    Entry e{r.name, {Term{}}, r.action, r.errno_value, 0, r.rule_id, std::move(what)};
    if (e.action == SeccompAction::Errno && e.errno_value == 0) e.errno_value = fallback_errno;
    if (e.action != SeccompAction::Errno) e.errno_value = 0;
    e.rank = int64_t{tier} * kTierRank + detail::action_severity(e.action) * 10'000 + e.errno_value;
    return e;
}

Built SeccompBuild::add(const SyscallRule& r, int tier, std::string what) {
    Entry e = entry(r, tier, std::move(what));
    for (const Cond& c : r.args) {
        std::vector<Term> next;
        for (const Term& t : e.terms)
            for (Term& nt : conjoin(t, c)) add_unique(next, std::move(nt));
        e.terms = std::move(next);
    }
    if (e.terms.empty()) return {};  // the conditions can never hold together
    if (e.terms.size() > kMaxRulesPerSyscall)
        return error(r.rule_id, detail::format("{}: the argument conditions need more than {} "
                                               "libseccomp rules",
                                               r.name, kMaxRulesPerSyscall));
    by_name[e.name].push_back(std::move(e));
    return {};
}

// Tier 1: the baseline (Docker's default, an imported profile, or none).
Built SeccompBuild::add_baseline() {
    std::vector<SyscallRule> baseline;
    switch (spec.baseline) {
        case SeccompSpec::Baseline::Default:
            plan.baseline = "default";
            baseline = docker_default_rules();
            break;
        case SeccompSpec::Baseline::None:
            plan.baseline = "none";
            break;
        case SeccompSpec::Baseline::Imported:
            plan.baseline = spec.import_name.empty() ? "imported" : spec.import_name;
            baseline = spec.imported;
            break;
    }
    for (const auto& r : baseline) {
        if (r.name == "openat2" && r.action == SeccompAction::Allow) continue;  // ENOSYS below (tier 3)
        if (auto ok = check_rule(r, r.action != SeccompAction::Allow); !ok) return std::unexpected(ok.error());
        if (r.name == "clone3" && r.action == SeccompAction::Allow) continue;  // ENOSYS below
        if (auto ok = add(r, 1, detail::format("baseline rule for {}", r.name)); !ok)
            return std::unexpected(ok.error());
        decided_by.try_emplace(r.name, r.rule_id);
    }
    return {};
}

// Tier 2: the rule file's allows.
Built SeccompBuild::add_allows() {
    for (const auto& r : spec.allow) {
        if (auto ok = check_rule(r, false); !ok) return std::unexpected(ok.error());
        if (r.name == "clone3")
            if (auto ok = check_clone3_allow(r, spec); !ok) return std::unexpected(ok.error());
        SyscallRule a = r;
        a.action = SeccompAction::Allow;
        if (auto ok = add(a, 2, detail::format("allow rule {}", r.rule_id)); !ok)
            return std::unexpected(ok.error());
        decided_by[r.name] = r.rule_id;
    }
    return {};
}

// Tier 3: clone3 answers ENOSYS (its flags sit behind a pointer; callers
// fall back to clone, whose flags the filter can see), unless the rules
// allow it beside an unconditional clone (check_clone3_allow).
Built SeccompBuild::add_clone3_enosys() {
    if (clone3_allowed(spec)) return {};  // check_clone3_allow: nothing for it to get around
    SyscallRule clone3{"clone3", {}, SeccompAction::Errno, ENOSYS, 0};
    return add(clone3, 3, "clone3 ENOSYS");
}

// Tier 3: no call sets the setuid or setgid bit on a file (SECURITY.md,
// "chmod u+s on outputs"): the workdir is a host directory, and a set-id file
// left there runs as the tool's ids for whoever executes it later, outside
// the sandbox (nosuid holds only inside). The baseline allows the chmod
// family and the creating calls with any mode; each answers the violation
// action when its mode argument has S_ISUID or S_ISGID, above every allow (no
// rule file can grant it). openat2 carries its mode in a struct seccomp
// cannot read: it answers ENOSYS like clone3 (libc does not use it; callers
// that do fall back to openat, whose mode the filter sees), unless the rule
// file itself allows openat2 by name: then it gives up the mode check for
// that call, knowingly (agentd's own filter, whose path walks need
// RESOLVE_NO_SYMLINKS; a baseline's allow never does).
Built SeccompBuild::add_setid_mode_refusal() {
    struct Call {
        const char* name;
        uint8_t mode_arg;
    };
    for (Call c : {Call{"chmod", 1}, Call{"fchmod", 1}, Call{"fchmodat", 2}, Call{"fchmodat2", 2},
                   Call{"open", 2}, Call{"openat", 3}, Call{"creat", 1}, Call{"mknod", 1}, Call{"mknodat", 2}}) {
        if (!is_known_syscall(c.name)) continue;  // a libseccomp older than the call: no number to judge
        for (uint64_t bit : {uint64_t{S_ISUID}, uint64_t{S_ISGID}}) {
            SyscallRule r{c.name, {Cond{c.mode_arg, Op::MaskedEq, bit, bit}}, spec.violation, spec.violation_errno, 0};
            if (auto ok = add(r, 3, detail::format("{} with a set-id mode bit", c.name)); !ok)
                return std::unexpected(ok.error());
        }
    }
    if (std::any_of(spec.allow.begin(), spec.allow.end(), [](const SyscallRule& a) { return a.name == "openat2"; }))
        return {};
    SyscallRule openat2{"openat2", {}, SeccompAction::Errno, ENOSYS, 0};
    return add(openat2, 3, "openat2 ENOSYS");
}

// Tier 4: the rule file's denies, over everything else.
Built SeccompBuild::add_denies() {
    for (const auto& r : spec.deny) {
        if (auto ok = check_rule(r, true); !ok) return std::unexpected(ok.error());
        if (auto ok = add(r, kDenyTier, detail::format("deny rule {}", r.rule_id)); !ok)
            return std::unexpected(ok.error());
        decided_by[r.name] = r.rule_id;
    }
    return {};
}

// network.families: each allow of socket(2) and socketpair(2), whichever tier
// it comes from, narrowed to the listed families (argument 0); what those
// allows covered in any other family answers family_refusal(), in a tier below
// the baseline so that only the narrowed allows and what outranks them (the
// denies) come before it. i386 is settled per arch (add_arch).
Built SeccompBuild::restrict_families() {
    if (!spec.socket_families) return {};
    const auto& families = *spec.socket_families;
    if (families.size() > kMaxRulesPerSyscall)
        return error(spec.socket_families_rule_id,
                     detail::format("network.families lists {} families; the seccomp filter narrows "
                                    "socket(2) to at most {}",
                                    families.size(), kMaxRulesPerSyscall));
    for (const char* call : kFamilyCalls) {
        auto it = by_name.find(call);
        if (it == by_name.end()) continue;
        std::vector<Term> allowed;  // what the allows covered, in any family
        for (Entry& e : it->second) {
            if (e.action != SeccompAction::Allow) continue;
            std::vector<Term> narrowed;
            for (const Term& t : e.terms) {
                add_unique(allowed, t);
                for (int f : families)
                    for (Term& nt : conjoin(t, Cond{0, Op::Eq, static_cast<uint64_t>(f), 0}))
                        add_unique(narrowed, std::move(nt));
            }
            if (narrowed.size() > kMaxRulesPerSyscall)
                return error(e.rule_id, detail::format("{}: {} narrowed to network.families needs more than {} "
                                                       "libseccomp rules",
                                                       call, e.what, kMaxRulesPerSyscall));
            e.terms = std::move(narrowed);
        }
        if (allowed.empty()) continue;
        if (std::string_view(call) == "socket" && spec.netlink_protocols &&
            std::ranges::find(families, AF_NETLINK) != families.end())
            if (auto r = refuse_netlink_protocols(allowed, it->second); !r) return r;
        Entry refusal = entry(family_refusal(call), kFamilyTier, "network.families");
        refusal.terms = std::move(allowed);
        it->second.push_back(std::move(refusal));
    }
    return {};
}

// network.netlink: socket(2) in the netlink family only with a listed
// protocol (argument 2). The protocols left out are refused above the allows
// (tier 3, where a `syscalls.allow` of socket cannot reopen them), as the
// family refusal answers, traced to network.netlink: for each term the allows
// covered, the netlink family and argument 2 outside the list, written as
// "below the first", "above the last" and each protocol number between
// (equalities: cutting the allows by them adds one condition each, where a
// masked compare's negation would add one per bit).
Built SeccompBuild::refuse_netlink_protocols(const std::vector<Term>& allowed, std::vector<Entry>& entries) {
    std::vector<uint64_t> listed(spec.netlink_protocols->begin(), spec.netlink_protocols->end());
    std::ranges::sort(listed);
    std::vector<Cond> outside;  // argument 2 is none of the listed protocols
    if (listed.empty()) {
        outside.push_back(Cond{2, Op::Ge, 0, 0});
    } else {
        if (listed.front() > 0) outside.push_back(Cond{2, Op::Le, listed.front() - 1, 0});
        for (size_t i = 0; i + 1 < listed.size(); ++i)
            for (uint64_t p = listed[i] + 1; p < listed[i + 1]; ++p) outside.push_back(Cond{2, Op::Eq, p, 0});
        outside.push_back(Cond{2, Op::Gt, listed.back(), 0});
    }
    SyscallRule r = family_refusal("socket");
    r.rule_id = spec.netlink_rule_id;
    Entry refusal = entry(r, 3, "network.netlink");
    refusal.terms.clear();
    for (const Term& t : allowed)
        for (Term& nl : conjoin(t, Cond{0, Op::Eq, static_cast<uint64_t>(AF_NETLINK), 0}))
            for (const Cond& c : outside)
                for (Term& nt : conjoin(nl, c)) add_unique(refusal.terms, std::move(nt));
    if (refusal.terms.size() > kMaxRulesPerSyscall)
        return error(spec.netlink_rule_id,
                     detail::format("network.netlink: refusing the protocols the list leaves out needs more than {} "
                                    "libseccomp rules",
                                    kMaxRulesPerSyscall));
    if (!refusal.terms.empty()) entries.push_back(std::move(refusal));
    return {};
}

Built SeccompBuild::check_compat_arches() {
    for (const auto& name : spec.compat_arches) {
        const auto host = detail::filter_arches();
        if (std::ranges::none_of(host, [&](const detail::FilterArch& a) {
                return a.role == detail::ArchRole::Compat && a.name == name;
            }))
            return error(0, detail::format("architecture '{}' is not a compat ABI of this host", name));
    }
    return {};
}

// One context per arch (rules added only where the syscall exists), merged.
Built SeccompBuild::build_arches() {
    for (const auto& arch : detail::filter_arches()) {
        auto ctx = new_ctx(default_action, arch.token);
        if (!ctx) return std::unexpected(ctx.error());
        const bool accepted =
            arch.role == detail::ArchRole::Native ||
            (arch.role == detail::ArchRole::Compat &&
             std::ranges::find(spec.compat_arches, arch.name) != spec.compat_arches.end());
        if (accepted) plan.arches.push_back(arch.audit_arch);
        // x32 takes no rule at all: every call answers the violation action.
        if (arch.role != detail::ArchRole::Refused)
            if (auto ok = add_arch(arch, *ctx, accepted); !ok) return ok;
        if (!merged) {
            merged = std::move(*ctx);
        } else {
            if (int rc = seccomp_merge(merged.get(), ctx->get()); rc != 0)
                return error(0, detail::format("seccomp_merge({}): {}", arch.name, std::strerror(-rc)));
            (void)ctx->release();  // seccomp_merge took ownership
        }
    }
    return {};
}

// Only explicit denies (and their i386 multiplexed forms) hold on a refused
// ABI: the violation action answers everything else there.
EntriesByName deny_only(const EntriesByName& entries) {
    EntriesByName out;
    for (const auto& [name, list] : entries)
        for (const Entry& e : list)
            if (e.rank >= int64_t{kDenyTier} * kTierRank) out[name].push_back(e);
    return out;
}

Built SeccompBuild::add_arch(const detail::FilterArch& arch, Ctx& ctx, bool accepted) {
    auto arch_entries = accepted ? by_name : deny_only(by_name);
    if (arch.token == SCMP_ARCH_X86) {
        // A 32-bit socket call's family sits behind socketcall's pointer: with
        // network.families, i386's socket and socketpair are refused outright.
        std::vector<std::pair<SyscallRule, std::string>> denies;
        for (const auto& r : spec.deny) denies.emplace_back(r, detail::format("deny rule {}", r.rule_id));
        if (accepted && spec.socket_families)
            for (const char* call : kFamilyCalls) {
                denies.emplace_back(family_refusal(call), "network.families on i386");
                arch_entries[call].push_back(entry(denies.back().first, kDenyTier, denies.back().second));
            }
        // On i386 a deny of a socket or IPC call also denies that call through
        // its multiplexer (whatever its other arguments: they sit behind a
        // pointer seccomp cannot follow).
        for (const auto& [r, what] : denies) {
            auto mux = detail::i386_multiplexed(r.name);
            if (!mux) continue;
            SyscallRule d = r;
            d.name = std::string(mux->multiplexer);
            Entry e = entry(d, kDenyTier, detail::format("{} (via {})", what, mux->multiplexer));
            e.terms = {{mux->multiplexer == "ipc" ? Cond{0, Op::MaskedEq, mux->call, 0xffff}
                                                  : Cond{0, Op::Eq, mux->call, 0}}};
            arch_entries[d.name].push_back(std::move(e));
        }
    }
    for (const auto& [name, entries] : arch_entries)
        if (auto ok = add_syscall(arch, ctx, name, entries); !ok) return ok;
    return {};
}

Built SeccompBuild::add_syscall(const detail::FilterArch& arch, Ctx& ctx, const std::string& name,
                                const std::vector<Entry>& entries) {
    // libseccomp names i386's socket and IPC calls by pseudo numbers (it
    // emits both the direct call and the multiplexed form), so those always
    // go through; other names only where they exist.
    const bool multiplexed =
        arch.token == SCMP_ARCH_X86 && detail::i386_multiplexed(name).has_value();
    if (!multiplexed && seccomp_syscall_resolve_name_arch(arch.token, name.c_str()) < 0)
        return {};
    const int nr = seccomp_syscall_resolve_name(name.c_str());
    // libseccomp adds the multiplexed form of such a call itself, without its
    // argument conditions, so rules with different actions on one call would
    // collide there. On i386 a deny of such a call therefore applies whatever
    // the arguments (the strongest deny wins): narrower never, wider never
    // silently.
    std::vector<Entry> collapsed;
    if (multiplexed) {
        const Entry* strongest = nullptr;
        for (const Entry& e : entries)
            if (e.rank >= kDenyTier * kTierRank && (!strongest || e.rank > strongest->rank))
                strongest = &e;
        if (strongest) {
            collapsed.push_back(*strongest);
            collapsed.back().terms = {Term{}};
        }
    }
    auto rules = resolve(collapsed.empty() ? entries : collapsed, form_of(name));
    if (!rules) return std::unexpected(rules.error());
    const int arch_nr = seccomp_syscall_resolve_name_arch(arch.token, name.c_str());
    if (arch_nr >= 0 && !(arch.token == SCMP_ARCH_X86 &&
                          (name == "socketcall" || name == "ipc")))
        checks.push_back(Check{arch.audit_arch, arch_nr, arch.token != SCMP_ARCH_X86 &&
                                                             arch.token != SCMP_ARCH_ARM,
                               name, collapsed.empty() ? entries : collapsed});
    for (const auto& [term, entry] : *rules) {
        std::vector<scmp_arg_cmp> cmps;
        for (const Cond& c : term) {
            scmp_arg_cmp cmp{};
            cmp.arg = c.index;
            cmp.op = to_scmp(c.op);
            cmp.datum_a = c.op == Op::MaskedEq ? c.mask : c.value;
            cmp.datum_b = c.op == Op::MaskedEq ? c.value : 0;
            cmps.push_back(cmp);
        }
        const uint32_t act = detail::scmp_action(entry->action, entry->errno_value);
        if (act == default_action) continue;  // the default already says so
        int rc = seccomp_rule_add_array(ctx.get(), act, nr,
                                        static_cast<unsigned>(cmps.size()),
                                        cmps.empty() ? nullptr : cmps.data());
        if (rc != 0)
            return error(entry->rule_id,
                         detail::format("libseccomp refused the rule for {} on {}: {}",
                                     name, arch.name, std::strerror(-rc)));
    }
    return {};
}

// The program, built and verified; a syscall libseccomp got wrong in the
// precedence form is built again in the disjoint one (one more round per
// such syscall), and wrong in that form too fails the compile.
Built SeccompBuild::build_verified() {
    for (;;) {
        merged.reset();
        checks.clear();
        plan.arches.clear();
        miscompiled.clear();
        if (auto ok = build_arches(); !ok) return ok;
        auto ok = export_and_verify();
        if (ok || miscompiled.empty() || disjoint.contains(miscompiled)) return ok;
        disjoint.insert(miscompiled);
    }
}

// The merged program: within the kernel's size, accepted by its checker,
// and deciding every entry as the entries say.
Built SeccompBuild::export_and_verify() {
    auto prog = export_program(merged.get());
    if (!prog) return std::unexpected(prog.error());
    if (prog->size() > BPF_MAXINSNS)
        return error(0, detail::format("the seccomp program has {} instructions; the kernel accepts "
                                    "at most {}",
                                    prog->size(), BPF_MAXINSNS));
    if (auto ok = check_seccomp_filter(*prog); !ok)
        return error(0, detail::format("libseccomp emitted a program the kernel would refuse: "
                                    "instruction {}: {}",
                                    ok.error().pc, ok.error().message));
    const uint32_t default_ret =
        default_action == SCMP_ACT_KILL_PROCESS ? SECCOMP_RET_KILL_PROCESS : default_action;
    if (auto ok = verify(*prog, checks, default_ret); !ok) {
        miscompiled = ok.error().syscall;
        return std::unexpected(ok.error().error);
    }
    plan.program = std::move(*prog);
    for (auto& [name, id] : decided_by) plan.syscall_rules.emplace_back(name, id);
    return {};
}

// The compile's steps, in order; `b` holds what they made.
Built compile_steps(SeccompBuild& b) {
    if (auto ok = check_violation(b.spec); !ok) return ok;
    static constexpr Built (SeccompBuild::*kSteps[])() = {
        &SeccompBuild::add_baseline,         // tier 1
        &SeccompBuild::add_allows,           // tier 2
        &SeccompBuild::add_clone3_enosys,    // tier 3
        &SeccompBuild::add_setid_mode_refusal,  // tier 3: chmod family without S_ISUID/S_ISGID
        &SeccompBuild::add_denies,           // tier 4
        &SeccompBuild::restrict_families,    // socket(2) in network.families only (tier 0: the rest)
        &SeccompBuild::check_compat_arches,  // the compat ABIs the rules accept exist here
        &SeccompBuild::build_verified,       // one context per arch, merged; size, the kernel's checker,
                                             // every entry decided as said
    };
    for (auto step : kSteps)
        if (auto ok = (b.*step)(); !ok) return ok;
    return {};
}

}  // namespace

std::expected<SeccompPlan, SeccompError> compile_seccomp(const SeccompSpec& spec) {
    SeccompBuild b(spec);
    if (auto ok = compile_steps(b); !ok) return std::unexpected(ok.error());
    return std::move(b.plan);
}

// The rules of the program compile_seccomp verified, in the form it verified
// them in (a runtime's libseccomp builds its own filter from them).
std::expected<std::vector<ResolvedSyscallRule>, SeccompError> resolve_seccomp_rules(const SeccompSpec& spec) {
    SeccompBuild b(spec);
    if (auto ok = compile_steps(b); !ok) return std::unexpected(ok.error());
    std::vector<ResolvedSyscallRule> out;
    for (const auto& [name, entries] : b.by_name) {
        auto rules = resolve(entries, b.form_of(name));
        if (!rules) return std::unexpected(rules.error());
        for (const auto& [term, entry] : *rules) {
            if (detail::scmp_action(entry->action, entry->errno_value) == b.default_action) continue;
            out.push_back(ResolvedSyscallRule{name, term, entry->action, entry->errno_value, entry->rule_id});
        }
    }
    return out;
}

}  // namespace bulwark::policy
