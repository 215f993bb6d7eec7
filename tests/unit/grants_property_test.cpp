// Attenuation, as a property: over random tool bundles, random grants and
// random operations, a narrowed bundle allows only what the tool allows, and
// exactly the intersection for what the grant confines.
#include <catch2/catch.hpp>

#include "bulwark/policy/grants.h"
#include "policy_fixtures.h"

using namespace bulwark::test;

namespace {

const Clock::time_point kClock = Clock::time_point{} + std::chrono::hours(1000);

Grant random_grant(RandomPolicy& rp, const Bundle& parent) {
    Grant g;
    g.name = "prop";
    if (rp.coin(70)) {
        std::vector<FileGrant> files;
        size_t n = rp.pick(3) + 1;
        for (size_t i = 0; i < n; ++i) {
            std::string p = rp.path();
            uint32_t eff = effective_file_rights(parent, p);
            uint32_t rights = rp.coin(80) ? eff & rp.rights() : rp.rights();
            if (!rights) rights = rp.rights();
            files.push_back({p, rights});
        }
        g.files = files;
    }
    if (rp.coin(8)) {
        g.network_none = true;
    } else if (rp.coin(60)) {
        std::vector<NetGrant> net;
        size_t n = rp.pick(2) + 1;
        for (size_t i = 0; i < n; ++i) {
            NetGrant e;
            auto c = parse_cidr(RandomPolicy::kNets[rp.pick(10)]);
            if (rp.coin(50)) {
                e.addr = *parse_ip(RandomPolicy::kAddrs[rp.pick(10)]);
                e.prefix = 128;
            } else {
                e.addr = c->addr;
                e.prefix = c->prefix;
            }
            auto [lo, hi] = rp.port_range();
            e.port_lo = lo;
            e.port_hi = hi;
            e.op_mask = static_cast<uint8_t>(rp.pick(7) + 1);
            e.proto_mask = static_cast<uint8_t>(rp.pick(3) + 1);
            net.push_back(e);
        }
        g.network = net;
    }
    if (rp.coin(20)) g.families = parent.network.af_allow & (rp.coin(50) ? ~0ull : (1ull << AF_INET));
    return g;
}

bool allowed(const Decision& d) { return d.verdict == Verdict::Allow; }

// What the grant itself permits for the right / operation it confines.
bool grant_permits_file(const Grant& g, const Operation& op) {
    uint32_t right = required_right(op);
    auto path = resolve_operation_path(op.path);
    for (const auto& f : *g.files)
        if ((f.rights & right) && path && path_covers(*normalise_path(f.path), *path)) return true;
    return false;
}
uint32_t file_scope(const Grant& g) {
    uint32_t s = 0;
    if (g.files)
        for (const auto& f : *g.files) s |= f.rights;
    return s;
}
uint8_t net_bit(OpKind k) {
    return k == OpKind::Connect ? BW_NET_CONNECT : k == OpKind::Bind ? BW_NET_BIND : BW_NET_SEND;
}
bool grant_permits_net(const Grant& g, const Operation& op) {
    for (const auto& e : *g.network)
        if ((e.op_mask & net_bit(op.kind)) && (e.proto_mask & op.proto) && op.port >= e.port_lo &&
            op.port <= e.port_hi && prefix_contains(e.addr, e.prefix, op.addr))
            return true;
    return false;
}
uint8_t net_scope(const Grant& g) {
    uint8_t s = 0;
    if (g.network)
        for (const auto& e : *g.network) s |= e.op_mask;
    return s;
}

}  // namespace

TEST_CASE("narrowed bundles never allow what the tool denies (random, seeded)", "[grants][property]") {
    RandomPolicy rp(20261202);
    size_t accepted = 0, refused = 0, ops = 0, narrowed_denies_parent_allows = 0;
    for (int i = 0; i < 1500; ++i) {
        Bundle parent;
        try {
            parent = rp.bundle();
        } catch (const std::runtime_error&) {
            continue;
        }
        Grant g = random_grant(rp, parent);
        auto r = apply_grant(parent, g, kClock);
        if (!r) {
            ++refused;
            REQUIRE_FALSE(r.error().reasons.empty());
            continue;
        }
        ++accepted;
        const Bundle& n = r->bundle;
        for (int k = 0; k < 40; ++k) {
            Operation op = rp.op();
            Decision dn = evaluate(n, op), dp = evaluate(parent, op);
            INFO("bundle " << i << " op " << to_string(op.kind) << " " << op.path << " "
                           << format_addr(op.addr) << ":" << op.port << "\nnarrowed: " << dn.explanation
                           << "\nparent:   " << dp.explanation);
            // attenuation
            if (allowed(dn)) REQUIRE(allowed(dp));
            // the table path of the narrowed bundle agrees with its rules
            REQUIRE(evaluate_tables(n, op).verdict == dn.verdict);
            // exactness where the grant confines
            uint32_t right = required_right(op);
            if (right && (file_scope(g) & right)) {
                REQUIRE(allowed(dn) == (allowed(dp) && grant_permits_file(g, op)));
            } else if (op.kind == OpKind::Connect || op.kind == OpKind::Bind || op.kind == OpKind::Send) {
                if (g.network_none) REQUIRE_FALSE(allowed(dn));
                else if (net_scope(g) & net_bit(op.kind))
                    REQUIRE(allowed(dn) == (allowed(dp) && grant_permits_net(g, op)));
                else
                    REQUIRE(allowed(dn) == allowed(dp));
            } else if (right) {
                REQUIRE(allowed(dn) == allowed(dp));  // rights the grant does not name are kept
            }
            narrowed_denies_parent_allows += allowed(dp) && !allowed(dn);
            ++ops;
        }
    }
    CHECK(accepted > 300);
    CHECK(refused > 100);
    CHECK(ops > 10000);
    CHECK(narrowed_denies_parent_allows > 500);  // grants really narrow
}

// A profile's narrowing (intersection_grant) over random pairs of narrowings
// of one tool: applied to the one in force it is never refused, allows
// nothing either does not, and exactly what both allow of files; of the
// network, only a range that meets a deny of the one in force is left out.
TEST_CASE("the intersection of two narrowings of one tool allows what both allow (random, seeded)",
          "[grants][property]") {
    RandomPolicy rp(20261207);
    size_t pairs = 0, ops = 0, file_ops = 0, both_net = 0, net_left_out = 0, cut = 0;
    for (int i = 0; i < 4000; ++i) {
        Bundle parent;
        try {
            parent = rp.bundle();
        } catch (const std::runtime_error&) {
            continue;
        }
        auto current = apply_grant(parent, random_grant(rp, parent), kClock);
        auto narrower = apply_grant(parent, random_grant(rp, parent), kClock);
        if (!current || !narrower) continue;
        const Bundle& c = current->bundle;
        const Bundle& x = narrower->bundle;
        auto r = apply_grant(c, intersection_grant(c, x, "profile"), kClock);
        INFO("pair " << i);
        REQUIRE(r);
        ++pairs;
        const Bundle& n = r->bundle;
        for (int k = 0; k < 40; ++k) {
            Operation op = rp.op();
            Decision dn = evaluate(n, op), dc = evaluate(c, op), dx = evaluate(x, op);
            INFO("op " << to_string(op.kind) << " " << op.path << " " << format_addr(op.addr) << ":" << op.port
                       << "\nnarrowed: " << dn.explanation << "\ncurrent:  " << dc.explanation
                       << "\nnarrower: " << dx.explanation);
            if (allowed(dn)) REQUIRE((allowed(dc) && allowed(dx)));
            REQUIRE(evaluate_tables(n, op).verdict == dn.verdict);
            const bool net = op.kind == OpKind::Connect || op.kind == OpKind::Bind || op.kind == OpKind::Send;
            if (required_right(op) && !net) {
                REQUIRE(allowed(dn) == (allowed(dc) && allowed(dx)));
                ++file_ops;
            } else if (net && allowed(dc) && allowed(dx)) {
                ++both_net;
                net_left_out += !allowed(dn);
            }
            cut += allowed(dc) && !allowed(dn);
            ++ops;
        }
    }
    INFO(pairs << " pairs, " << file_ops << " file operations, " << cut << " cut, " << net_left_out << " of "
                << both_net << " network operations both allow left out");
    CHECK(pairs > 250);
    CHECK(file_ops > 6000);
    CHECK(cut > 1000);  // the narrowing narrows
    CHECK(both_net > 300);
    CHECK(net_left_out * 20 < both_net);  // under 5% of what both allow, all of it beside a deny
}
