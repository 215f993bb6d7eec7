#include "vm/vmm_bundle.h"

#include <linux/landlock.h>
#include <sys/socket.h>

#include <map>

#include "bulwark/policy/bpf_tables.h"
#include "bulwark/policy/landlock_abi.h"
#include "bulwark/policy/match.h"
#include "bulwark/policy/seccomp.h"

namespace bulwark::vm {

policy::Bundle compose_vmm_bundle(const policy::Bundle& vmm, const policy::Bundle& tool, const std::string& image_dir) {
    policy::Bundle n = vmm;
    auto add_rule = [&](const policy::RuleRef* from, std::string text, const char* section = "files") {
        policy::RuleRef r;
        r.id = static_cast<uint32_t>(n.rules.size());
        if (from) r.loc = from->loc;
        r.text = std::move(text);
        r.section = section;
        n.rules.push_back(std::move(r));
        return n.rules.back().id;
    };
    auto add_file = [&](const std::string& path, uint32_t allow, uint32_t deny, uint32_t rule_id) {
        n.files.push_back({path, allow, deny, rule_id});
        if (uint64_t acc = policy::landlock_fs_access(allow) & n.landlock.handled_fs)
            n.landlock.paths.push_back({path, acc, rule_id});
    };
    constexpr uint32_t kModify = BW_FS_WRITE | BW_FS_CREATE | BW_FS_REMOVE;
    for (const auto& f : tool.files) {
        uint32_t allow = ((f.allow & (BW_FS_READ | BW_FS_EXEC)) ? BW_FS_READ : 0) | (f.allow & kModify);
        if (!allow && !f.deny) continue;
        const policy::RuleRef* src = tool.rule(f.rule_id);
        add_file(f.path, allow, f.deny,
                 add_rule(src, (src ? src->text : "files: " + f.path) + " (served to the VM of " + tool.tool + ")"));
    }
    add_file(image_dir, BW_FS_READ, 0, add_rule(nullptr, "files.read: " + image_dir + " (the guest image)"));
    // 9p opens its export's root, the VMM's "/" (its mount namespace's view:
    // /usr, the /etc subset, the paths above, the work directory) with
    // O_RDONLY, and walks below it with O_PATH: Landlock's READ_DIR on "/"
    // lets the guest list names there; file contents stay as granted above.
    // No files entry: where the BPF LSM judges the VMM, it refuses the
    // export (the VM fails to start) rather than widen to every file.
    if (uint64_t rd = LANDLOCK_ACCESS_FS_READ_DIR & n.landlock.handled_fs)
        n.landlock.paths.push_back({"/", rd, add_rule(nullptr, "files.read: / (directory names, for the 9p export)")});
    // The guest's network leaves through the VMM's user-mode network: its
    // connections and datagrams are the VMM's own on the host, judged there
    // by the cgroup socket programs and Landlock under the tool's network
    // rules (a second check, by another kernel, of what the guest's layers
    // already let through). IP families only: the VMM makes no unix socket.
    if (tool.network.mode == policy::NetMode::Rules) {
        n.network.mode = policy::NetMode::Rules;
        n.network.rules.clear();
        n.network.dns = tool.network.dns;
        std::map<uint32_t, uint32_t> ids;  // the tool's rule id -> the VMM's
        for (auto r : tool.network.rules) {
            auto [it, fresh] = ids.try_emplace(r.rule_id, 0);
            if (fresh) {
                const policy::RuleRef* src = tool.rule(r.rule_id);
                it->second = add_rule(src, (src ? src->text : std::string("network")) + " (the VM of " + tool.tool + ")",
                                      "network");
            }
            r.rule_id = it->second;
            n.network.rules.push_back(r);
        }
        n.network.af_allow = tool.network.af_allow & ((uint64_t(1) << AF_INET) | (uint64_t(1) << AF_INET6));
        // ... in the seccomp filter too (compiled from the VMM's rules with
        // loopback's unix, inet and inet6).
        // A filter that cannot be narrowed (past the kernel's size) is
        // dropped: a VMM never starts without one.
        if (n.network.af_allow != vmm.network.af_allow && !n.seccomp.program.empty()) {
            auto narrowed = policy::narrow_socket_families(n.seccomp.program, n.network.af_allow,
                                                           n.mode == policy::Mode::Audit);
            n.seccomp.program = narrowed ? std::move(*narrowed) : std::vector<sock_filter>{};
        }
        n.network.sock_type_allow = tool.network.sock_type_allow;
        n.landlock.handled_net = tool.landlock.handled_net;
        n.landlock.ports.clear();
        for (auto p : tool.landlock.ports) {
            if (auto it = ids.find(p.rule_id); it != ids.end()) p.rule_id = it->second;
            n.landlock.ports.push_back(p);
        }
    }
    const uint64_t vm_mem = tool.microvm.memory_bytes;
    n.limits.memory_bytes = vm_mem + kVmmOverheadBytes;
    n.limits.timeout_ms = (tool.limits.timeout_ms ? *tool.limits.timeout_ms : 600'000) + kBootAllowanceMs;
    // The guest's output arrives over the channel, not the VMM's stdout: the
    // VMM's own output is its console, bounded on its own.
    n.limits.output_bytes = 1u << 20;
    (void)policy::rebuild_bpf_tables(n);
    return n;
}

policy::Bundle guest_bundle(const policy::Bundle& tool) {
    policy::Bundle g = tool;
    if (g.network.mode != policy::NetMode::Rules) return g;
    const auto forwarder = policy::parse_ip(kGuestDnsForwarder);
    std::vector<uint32_t> renamed;
    for (auto& r : g.network.rules) {
        const policy::RuleRef* src = g.rule(r.rule_id);
        // The resolver rules pass_network makes of network.dns (kept as
        // such by a grant's narrowing): one address, port 53.
        if (!src || !src->text.starts_with("network.dns") || r.host || r.port_lo != 53 || r.port_hi != 53 ||
            r.prefix != 128)
            continue;
        r.addr = *forwarder;
        if (std::find(renamed.begin(), renamed.end(), r.rule_id) == renamed.end()) renamed.push_back(r.rule_id);
    }
    for (uint32_t id : renamed)
        for (auto& ref : g.rules)
            if (ref.id == id) ref.text += std::string(" (in the VM: through qemu's DNS forwarder ") + kGuestDnsForwarder + ")";
    if (!g.network.dns.empty()) g.network.dns = {kGuestDnsForwarder};
    (void)policy::rebuild_bpf_tables(g);
    return g;
}

}  // namespace bulwark::vm
