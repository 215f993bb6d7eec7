#include "bpf/bpf_maps.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>

#include "bulwark/abi.h"
#include "common/clock.h"

namespace bulwark::bpf {
namespace {

std::expected<Fd, SysError> obj_get(const std::string& path) {
    int fd = bpf_obj_get(path.c_str());
    if (fd < 0) return std::unexpected(SysError{"bpf_obj_get(" + path + ")", -fd});
    return Fd(fd);
}

// Batched update; falls back to one update per element where the map type
// has no batch operation (older kernels' LPM trie).
template <class K, class V>
std::expected<void, SysError> update_many(int fd, const std::vector<K>& keys, const std::vector<V>& vals,
                                          const char* name, bool* batched) {
    *batched = false;
    if (keys.empty()) return {};
    __u32 count = static_cast<__u32>(keys.size());
    LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_ANY);
    int rc = bpf_map_update_batch(fd, keys.data(), vals.data(), &count, &opts);
    if (rc == 0) {
        *batched = true;
        return {};
    }
    if (rc != -EINVAL && rc != -ENOTSUP && rc != -EOPNOTSUPP && rc != -524 /* ENOTSUPP */)
        return std::unexpected(SysError{std::string("bpf_map_update_batch(") + name + ")", -rc});
    for (size_t i = 0; i < keys.size(); ++i) {
        rc = bpf_map_update_elem(fd, &keys[i], &vals[i], BPF_ANY);
        if (rc) return std::unexpected(SysError{std::string("bpf_map_update_elem(") + name + ")", -rc});
    }
    return {};
}

template <class K>
std::expected<void, SysError> delete_where(int fd, uint32_t slot, const char* name) {
    std::vector<K> doomed;
    K key{}, next{};
    const void* prev = nullptr;
    while (bpf_map_get_next_key(fd, prev, &next) == 0) {
        if (next.policy_id == slot) doomed.push_back(next);
        key = next;
        prev = &key;
    }
    for (const K& k : doomed) {
        int rc = bpf_map_delete_elem(fd, &k);
        if (rc && rc != -ENOENT)
            return std::unexpected(SysError{std::string("bpf_map_delete_elem(") + name + ")", -rc});
    }
    return {};
}

}  // namespace

uint64_t kernel_dev_of(uint64_t st_dev) { return abi::kernel_dev(major(st_dev), minor(st_dev)); }

std::expected<PolicyMaps, SysError> PolicyMaps::open_pinned(const std::string& pin_root) {
    PolicyMaps m;
    Fd* slots[] = {&m.sandboxes_,  &m.policies_,  &m.file_rules_, &m.file_bloom_, &m.net_rules_,
                   &m.unix_rules_, &m.rule_hits_, &m.stats_,      &m.events_,     &m.run_usage_};
    static_assert(std::size(slots) == std::size(kMapNames));
    for (size_t i = 0; i < std::size(kMapNames); ++i) {
        auto fd = obj_get(pin_root + "/" + kMapNames[i]);
        if (!fd) return std::unexpected(fd.error());
        *slots[i] = std::move(*fd);
    }
    m.used_.assign(BW_MAX_POLICIES, false);
    m.keys_.assign(BW_MAX_POLICIES, SlotKeys{});
    if (auto r = m.sync_slots(); !r) return std::unexpected(r.error());
    return m;
}

std::expected<void, SysError> PolicyMaps::start_usage(uint64_t cgroup_id) {
    const bw_run_usage zero{};
    if (bpf_map_update_elem(run_usage_.get(), &cgroup_id, &zero, BPF_ANY) != 0)
        return std::unexpected(SysError{"bpf_map_update_elem(bw_run_usage)", errno});
    return {};
}

std::expected<std::optional<bw_run_usage>, SysError> PolicyMaps::take_usage(uint64_t cgroup_id) {
    bw_run_usage u{};
    if (bpf_map_lookup_elem(run_usage_.get(), &cgroup_id, &u) != 0) {
        if (errno == ENOENT) return std::nullopt;
        return std::unexpected(SysError{"bpf_map_lookup_elem(bw_run_usage)", errno});
    }
    // Its processes are gone: nothing adds to the entry any more.
    if (bpf_map_delete_elem(run_usage_.get(), &cgroup_id) != 0 && errno != ENOENT)
        return std::unexpected(SysError{"bpf_map_delete_elem(bw_run_usage)", errno});
    return u;
}

std::expected<size_t, SysError> PolicyMaps::drop_unbound_usage() {
    std::vector<uint64_t> stale;
    uint64_t key = 0, next = 0;
    const uint64_t* prev = nullptr;
    while (bpf_map_get_next_key(run_usage_.get(), prev, &next) == 0) {
        bw_binding b{};
        if (bpf_map_lookup_elem(sandboxes_.get(), &next, &b) != 0 && errno == ENOENT) stale.push_back(next);
        key = next;
        prev = &key;
    }
    for (uint64_t cg : stale)
        if (bpf_map_delete_elem(run_usage_.get(), &cg) != 0 && errno != ENOENT)
            return std::unexpected(SysError{"bpf_map_delete_elem(bw_run_usage)", errno});
    return stale.size();
}

uint64_t PolicyMaps::next_version() {
    uint64_t ns = static_cast<uint64_t>(unix_now_ns());
    last_version_ = std::max(last_version_ + 1, ns);
    return last_version_;
}

std::expected<void, SysError> PolicyMaps::sync_slots() {
    // Every slot in one batch lookup (an array map answers in full), or one
    // lookup per slot where the kernel has no batch operations.
    std::vector<uint32_t> slots(BW_MAX_POLICIES);
    std::vector<bw_policy> vals(BW_MAX_POLICIES);
    uint32_t count = BW_MAX_POLICIES, next = 0;
    LIBBPF_OPTS(bpf_map_batch_opts, bo);
    int brc = bpf_map_lookup_batch(policies_.get(), nullptr, &next, slots.data(), vals.data(), &count, &bo);
    if ((brc != 0 && errno != ENOENT) || count != BW_MAX_POLICIES) {
        for (uint32_t slot = 0; slot < BW_MAX_POLICIES; ++slot) {
            slots[slot] = slot;
            if (int rc = bpf_map_lookup_elem(policies_.get(), &slot, &vals[slot]); rc)
                return std::unexpected(SysError{"bpf_map_lookup_elem(bw_policies, " + std::to_string(slot) + ")", -rc});
        }
    }
    for (uint32_t i = 0; i < BW_MAX_POLICIES; ++i) {
        const uint32_t slot = slots[i];
        if (slot >= BW_MAX_POLICIES) continue;
        const bw_policy& p = vals[i];
        bool used = p.version != 0;
        if (used_[slot] && !used) keys_[slot] = SlotKeys{};  // freed by another process
        used_[slot] = used;
        if (used) last_version_ = std::max<uint64_t>(last_version_, p.version);
    }
    return {};
}

std::expected<std::vector<std::pair<uint64_t, bw_binding>>, SysError> PolicyMaps::bindings() const {
    std::vector<std::pair<uint64_t, bw_binding>> out;
    uint64_t key = 0, next = 0;
    const void* prev = nullptr;
    while (bpf_map_get_next_key(sandboxes_.get(), prev, &next) == 0) {
        bw_binding b{};
        if (bpf_map_lookup_elem(sandboxes_.get(), &next, &b) == 0) out.emplace_back(next, b);
        key = next;
        prev = &key;
    }
    return out;
}

size_t PolicyMaps::free_slots() const { return static_cast<size_t>(std::count(used_.begin(), used_.end(), false)); }

namespace {
// The nearest existing ancestor of a missing path, resolved ("" if none).
std::string existing_ancestor(const std::string& path) {
    std::string p = path;
    while (p.size() > 1) {
        p = p.substr(0, p.rfind('/'));
        if (p.empty()) p = "/";
        struct stat st{};
        if (::stat(p.c_str(), &st) != 0) continue;
        char real[PATH_MAX];
        return ::realpath(p.c_str(), real) ? std::string(real) : std::string();
    }
    return {};
}

// The policy's file rules as the LSM reads them: by object (device as the
// kernel numbers it, inode), aliases merged.
using FileRules = std::map<std::tuple<uint64_t, uint64_t>, bw_file_rule>;

// Whether a missing denied path can come into existence by the sandbox's
// hand while this policy is in force. It cannot when its nearest existing
// ancestor is on a read-only mount (a microVM guest's read-only view of the
// host, where the host's /etc/shadow is not shared), or when the policy
// itself refuses every new name there: in enforce mode with file rules in
// force, no rule on that directory or an ancestor grants create, or one
// denies it (the LSM judges create, mkdir, mknod, symlink, link and rename
// at the new name's directory, by the same ancestor walk over `files`). Such
// a deny has nothing to hold and is skipped; any other missing denied path
// fails the load. Returns "" (it can appear) or why it cannot.
std::string cannot_appear(const bw_policy& header, const FileRules& files, const std::string& path) {
    const std::string dir = existing_ancestor(path);
    if (dir.empty()) return {};
    struct statvfs vfs{};
    if (::statvfs(dir.c_str(), &vfs) == 0 && (vfs.f_flag & ST_RDONLY)) return dir + " is on a read-only mount";
    if (header.mode != BW_MODE_ENFORCE || !(header.flags & BW_POL_FILES_ENFORCED)) return {};
    uint32_t allow = 0, deny = 0;
    for (std::string p = dir;; p = p.substr(0, std::max<size_t>(p.rfind('/'), 1))) {
        struct stat st{};
        if (::stat(p.c_str(), &st) != 0) return {};
        if (auto it = files.find({kernel_dev_of(st.st_dev), st.st_ino}); it != files.end()) {
            allow |= it->second.allow;
            deny |= it->second.deny;
        }
        if (p == "/") break;
    }
    if ((allow & ~deny) & BW_FS_CREATE) return {};
    return "the policy refuses the creation of any name in " + dir;
}
}  // namespace

std::expected<LoadReport, SysError> PolicyMaps::load(const policy::BpfTables& tables) {
    auto it = std::find(used_.begin(), used_.end(), false);
    if (it == used_.end()) return std::unexpected(SysError{"policy slot allocation (all in use)", ENOSPC});
    const uint32_t slot = static_cast<uint32_t>(it - used_.begin());
    LoadReport report;

    auto ns_now = [] { return static_cast<uint64_t>(steady_now_ns()); };
    const uint64_t t0 = ns_now();
    // Merge aliases: several rule paths may name one inode.
    FileRules files;
    std::vector<const std::string*> absent_denies;  // judged once every path is resolved
    for (const auto& f : tables.files) {
        struct stat st{};
        if (::stat(f.path.c_str(), &st) != 0) {
            int err = errno;
            if (err != ENOENT) return std::unexpected(SysError{"stat(" + f.path + ")", err});
            if (f.value.deny != 0) absent_denies.push_back(&f.path);
            else report.skipped_paths.push_back(f.path);
            continue;
        }
        auto [pos, inserted] = files.try_emplace({kernel_dev_of(st.st_dev), st.st_ino}, f.value);
        if (!inserted) {
            bw_file_rule& r = pos->second;
            if (r.allow == 0) r.allow_rule_id = f.value.allow_rule_id;
            if (r.deny == 0) r.deny_rule_id = f.value.deny_rule_id;
            r.allow |= f.value.allow;
            r.deny |= f.value.deny;
        }
    }
    for (const std::string* path : absent_denies) {
        std::string why = cannot_appear(tables.header, files, *path);
        if (why.empty()) return std::unexpected(SysError{"stat(" + *path + ")", ENOENT});
        report.absent_denies.push_back(*path + " (" + why + ")");
    }
    if (files.size() > BW_MAX_FILE_RULES || tables.net.size() > BW_MAX_NET_RULES ||
        tables.unix_sockets.size() > BW_MAX_UNIX_RULES)
        return std::unexpected(SysError{"policy load (more rules than the maps hold)", E2BIG});

    const uint64_t t1 = ns_now();
    used_[slot] = true;  // reserved while filling; version 0 keeps it unusable
    auto fail = [&](SysError e) -> std::expected<LoadReport, SysError> {
        (void)purge_slot(slot);
        used_[slot] = false;
        return std::unexpected(std::move(e));
    };

    std::vector<bw_inode_key> fkeys;
    std::vector<bw_file_rule> fvals;
    fkeys.reserve(files.size());
    fvals.reserve(files.size());
    for (const auto& [k, v] : files) {
        fkeys.push_back(bw_inode_key{slot, 0, std::get<0>(k), std::get<1>(k)});
        fvals.push_back(v);
    }
    if (auto r = update_many(file_rules_.get(), fkeys, fvals, "bw_file_rules", &report.files_batched); !r) return fail(r.error());
    // every key's two bits: a walk skips the lookup of an inode whose bits are not both set
    auto bloom = std::make_unique<bw_file_bloom>();
    for (const auto& k : fkeys) {
        const uint64_t h = bw_bloom_hash(k.dev, k.ino);
        for (uint32_t bit : {bw_bloom_bit1(h), bw_bloom_bit2(h)}) bloom->words[bit / 64] |= 1ull << (bit % 64);
    }
    if (int rc = bpf_map_update_elem(file_bloom_.get(), &slot, bloom.get(), BPF_ANY); rc)
        return fail(SysError{"bpf_map_update_elem(bw_file_bloom)", -rc});

    std::vector<bw_net_key> nkeys;
    std::vector<bw_net_rule> nvals;
    nkeys.reserve(tables.net.size());
    nvals.reserve(tables.net.size());
    for (const auto& n : tables.net) {
        bw_net_key k = n.key;
        k.policy_id = slot;
        nkeys.push_back(k);
        nvals.push_back(n.value);
    }
    if (auto r = update_many(net_rules_.get(), nkeys, nvals, "bw_net_rules", &report.net_batched); !r) return fail(r.error());

    std::vector<bw_unix_key> ukeys;
    std::vector<bw_unix_rule> uvals;
    for (const auto& u : tables.unix_sockets) {
        bw_unix_key k = u.key;
        k.policy_id = slot;
        ukeys.push_back(k);
        uvals.push_back(u.value);
    }
    bool unix_batched = false;
    if (auto r = update_many(unix_rules_.get(), ukeys, uvals, "bw_unix_rules", &unix_batched); !r) return fail(r.error());

    bw_policy header = tables.header;
    header.version = next_version();
    if (int rc = bpf_map_update_elem(policies_.get(), &slot, &header, BPF_ANY); rc)
        return fail(SysError{"bpf_map_update_elem(bw_policies)", -rc});

    keys_[slot] = SlotKeys{true, std::move(fkeys), std::move(nkeys), std::move(ukeys)};
    report.handle = PolicyHandle{slot, header.version};
    report.resolve_ns = t1 - t0;
    report.write_ns = ns_now() - t1;
    report.file_entries = keys_[slot].files.size();
    report.net_entries = keys_[slot].net.size();
    report.unix_entries = keys_[slot].unix_keys.size();
    return report;
}

std::expected<void, SysError> PolicyMaps::bind(uint64_t cgroup_id, PolicyHandle h, uint64_t task_id,
                                               uint64_t run_id, uint32_t flags) {
    bw_binding b{h.slot, flags, h.version, task_id, run_id};
    if (int rc = bpf_map_update_elem(sandboxes_.get(), &cgroup_id, &b, BPF_ANY); rc)
        return std::unexpected(SysError{"bpf_map_update_elem(bw_sandboxes, " + std::to_string(cgroup_id) + ")", -rc});
    return {};
}

std::expected<void, SysError> PolicyMaps::unbind(uint64_t cgroup_id) {
    int rc = bpf_map_delete_elem(sandboxes_.get(), &cgroup_id);
    if (rc && rc != -ENOENT)
        return std::unexpected(SysError{"bpf_map_delete_elem(bw_sandboxes, " + std::to_string(cgroup_id) + ")", -rc});
    return {};
}

std::expected<void, SysError> PolicyMaps::purge_slot(uint32_t slot) {
    SlotKeys& k = keys_[slot];
    if (k.known) {
        auto del = [](int fd, auto& keys, const char* name) -> std::expected<void, SysError> {
            if (keys.empty()) return {};
            __u32 count = static_cast<__u32>(keys.size());
            LIBBPF_OPTS(bpf_map_batch_opts, opts);
            if (bpf_map_delete_batch(fd, keys.data(), &count, &opts) == 0) return {};
            for (const auto& key : keys) {  // no batch delete here, or a key already gone
                int rc = bpf_map_delete_elem(fd, &key);
                if (rc && rc != -ENOENT)
                    return std::unexpected(SysError{std::string("bpf_map_delete_elem(") + name + ")", -rc});
            }
            return {};
        };
        if (auto r = del(file_rules_.get(), k.files, "bw_file_rules"); !r) return r;
        if (auto r = del(net_rules_.get(), k.net, "bw_net_rules"); !r) return r;
        if (auto r = del(unix_rules_.get(), k.unix_keys, "bw_unix_rules"); !r) return r;
        k = SlotKeys{};
        return delete_where<bw_rule_key>(rule_hits_.get(), slot, "bw_rule_hits");
    }
    if (auto r = delete_where<bw_inode_key>(file_rules_.get(), slot, "bw_file_rules"); !r) return r;
    if (auto r = delete_where<bw_net_key>(net_rules_.get(), slot, "bw_net_rules"); !r) return r;
    if (auto r = delete_where<bw_unix_key>(unix_rules_.get(), slot, "bw_unix_rules"); !r) return r;
    return delete_where<bw_rule_key>(rule_hits_.get(), slot, "bw_rule_hits");
}

std::expected<void, SysError> PolicyMaps::free(uint32_t slot) {
    if (slot >= BW_MAX_POLICIES) return std::unexpected(SysError{"free policy slot " + std::to_string(slot), EINVAL});
    bw_policy empty{};
    if (int rc = bpf_map_update_elem(policies_.get(), &slot, &empty, BPF_ANY); rc)
        return std::unexpected(SysError{"bpf_map_update_elem(bw_policies)", -rc});
    if (auto r = purge_slot(slot); !r) return r;
    used_[slot] = false;
    return {};
}

std::expected<bw_counters, SysError> PolicyMaps::stats() const {
    int ncpu = libbpf_num_possible_cpus();
    if (ncpu <= 0) return std::unexpected(SysError{"libbpf_num_possible_cpus", -ncpu});
    std::vector<bw_counters> per(static_cast<size_t>(ncpu));
    uint32_t zero = 0;
    if (int rc = bpf_map_lookup_elem(stats_.get(), &zero, per.data()); rc)
        return std::unexpected(SysError{"bpf_map_lookup_elem(bw_stats)", -rc});
    bw_counters sum{};
    for (const auto& c : per) {
        sum.ringbuf_reserve_failures += c.ringbuf_reserve_failures;
        sum.events_emitted += c.events_emitted;
        for (int i = 0; i < 4; ++i) sum.decisions[i] += c.decisions[i];
        sum.walk_too_deep += c.walk_too_deep;
        sum.unbound_policy += c.unbound_policy;
    }
    return sum;
}

std::expected<uint64_t, SysError> PolicyMaps::rule_hits(uint32_t slot, uint32_t rule_id) const {
    int ncpu = libbpf_num_possible_cpus();
    std::vector<uint64_t> per(static_cast<size_t>(ncpu > 0 ? ncpu : 1));
    bw_rule_key k{slot, rule_id};
    int rc = bpf_map_lookup_elem(rule_hits_.get(), &k, per.data());
    if (rc == -ENOENT) return 0;
    if (rc) return std::unexpected(SysError{"bpf_map_lookup_elem(bw_rule_hits)", -rc});
    uint64_t sum = 0;
    for (uint64_t v : per) sum += v;
    return sum;
}

std::expected<bw_binding, SysError> PolicyMaps::binding(uint64_t cgroup_id) const {
    bw_binding b{};
    if (int rc = bpf_map_lookup_elem(sandboxes_.get(), &cgroup_id, &b); rc)
        return std::unexpected(SysError{"bpf_map_lookup_elem(bw_sandboxes, " + std::to_string(cgroup_id) + ")", -rc});
    return b;
}

}  // namespace bulwark::bpf
