// agentd/vm/vmm_bundle: the VMM's own policy for one tool's VM.
#include <catch2/catch.hpp>

#include <linux/landlock.h>
#include <sys/socket.h>

#include "bulwark/policy/compiler.h"
#include "bulwark/policy/evaluator.h"
#include "bulwark/policy/instantiate.h"
#include "vm/vmm.h"
#include "vm/vmm_bundle.h"

using namespace bulwark;

namespace {
policy::Bundle instantiated(const std::string& text) {
    auto r = policy::compile_string(text, "t.yaml", {});
    INFO(policy::render_diagnostics(r));
    REQUIRE(r.ok());
    auto i = policy::instantiate(*r.bundle, policy::task_vars("/work/t1", "task-1"), {});
    REQUIRE(i);
    return *i;
}
const policy::FileRule* file(const policy::Bundle& b, const std::string& path) {
    for (const auto& f : b.files)
        if (f.path == path) return &f;
    return nullptr;
}
}  // namespace

TEST_CASE("the VMM may read what the tool may read or run, write where it writes, never what it denies",
          "[vm][vmm_bundle]") {
    auto vmm = instantiated("tool: vmm\nbinaries: [/usr/bin/qemu-system-x86_64]\nfiles:\n  read: [/usr/share/qemu]\n");
    auto tool = instantiated(
        "tool: t\nbinaries: [/usr/bin/dash]\nfiles:\n  read: [\"${workdir}\", /srv/data]\n  write: [\"${workdir}\"]\n"
        "  exec: [/usr/lib/libx.so]\n  deny: [/srv/data/keys]\nmicrovm: { mode: required, memory: 512MiB }\n"
        "limits: { timeout: 30s }\n");
    auto n = vm::compose_vmm_bundle(vmm, tool, "/opt/bulwark/guest");
    REQUIRE(file(n, "/usr/lib/libx.so"));
    CHECK(file(n, "/usr/lib/libx.so")->allow == BW_FS_READ);  // exec served as read: the guest executes
    uint32_t workdir = 0;
    for (const auto& f : n.files)
        if (f.path == "/work/t1") workdir |= f.allow;
    CHECK(workdir == (BW_FS_READ | BW_FS_WRITE));
    REQUIRE(file(n, "/srv/data/keys"));
    CHECK(file(n, "/srv/data/keys")->deny != 0);
    REQUIRE(file(n, "/opt/bulwark/guest"));
    CHECK(file(n, "/opt/bulwark/guest")->allow == BW_FS_READ);
    // Traced to the tool's rule: its file and line, its text.
    const auto* r = n.rule(file(n, "/srv/data/keys")->rule_id);
    REQUIRE(r);
    CHECK(r->loc.file == "t.yaml");
    CHECK(r->loc.line == 7);
    CHECK(r->text.starts_with("files.deny"));
    CHECK(r->text.find("served to the VM of t") != std::string::npos);
    // The VMM's memory is the VM's plus its own; its timeout the tool's plus the boot.
    CHECK(*n.limits.memory_bytes == (512ull << 20) + vm::kVmmOverheadBytes);
    CHECK(*n.limits.timeout_ms == 30'000 + vm::kBootAllowanceMs);
    // The 9p export's root: directory names only, on the sandbox's own root.
    bool root_dir = false;
    for (const auto& p : n.landlock.paths)
        if (p.path == "/") root_dir = p.access == LANDLOCK_ACCESS_FS_READ_DIR;
    CHECK(root_dir == ((n.landlock.handled_fs & LANDLOCK_ACCESS_FS_READ_DIR) != 0));
}

TEST_CASE("qemu's command line: microvm, no network device, the channel on the given fd, two 9p shares",
          "[vm][vmm]") {
    vm::Vmm v{"/usr/bin/qemu-system-x86_64", "/usr/share/qemu/qboot.rom", "tcg", "test", 2600000};
    vm::GuestImage img{"/img", "/img/vmlinux", "/img/initramfs.cpio", "sha256:x", "console=ttyS0", "6.12", "pkg"};
    auto argv = vm::qemu_argv(v, img, {512ull << 20, 2, "/work/t1", 9});
    std::string all;
    for (const auto& a : argv) all += a + " ";
    CHECK(all.find("-M microvm") != std::string::npos);
    CHECK(all.find("-accel tcg") != std::string::npos);
    CHECK(all.find("tsc_early_khz=2600000") != std::string::npos);
    CHECK(all.find("-nic none") != std::string::npos);
    CHECK(all.find("socket,id=ctl,fd=9") != std::string::npos);
    CHECK(all.find("path=/,readonly=on") != std::string::npos);
    CHECK(all.find("path=/work/t1,security_model=none") != std::string::npos);
    CHECK(all.find("-m 512M") != std::string::npos);
    CHECK(all.find("-smp 2") != std::string::npos);
    CHECK(all.find("-sandbox on") != std::string::npos);
    v.accel = "kvm";
    auto k = vm::qemu_argv(v, img, {256ull << 20, 1, "/w", 3});
    std::string kall;
    for (const auto& a : k) kall += a + " ";
    CHECK(kall.find("mitigations=off") == std::string::npos);  // a KVM guest keeps its mitigations
}

TEST_CASE("a tool's network rules become the VMM's: the guest's traffic is judged again on the host",
          "[vm][vmm_bundle]") {
    auto vmm = instantiated("tool: vmm\nbinaries: [/usr/bin/qemu-system-x86_64]\nfiles:\n  read: [/usr/share/qemu]\n"
                        "network: loopback\n");  // as rules/vmm/qemu.yaml
    auto tool = instantiated("tool: t\nbinaries: [/usr/bin/curl]\nfiles:\n  read: [\"${workdir}\"]\n"
                         "network:\n  connect: [{ cidr: 192.0.2.2/32, ports: [443], proto: tcp }]\n"
                         "  deny: [{ cidr: 169.254.0.0/16 }]\n  unix: { connect: [\"@bus\"] }\n"
                         "microvm: { mode: required }\n");
    auto n = vm::compose_vmm_bundle(vmm, tool, "/opt/bulwark/guest");
    CHECK(n.network.mode == policy::NetMode::Rules);  // the VMM in the host's network namespace
    REQUIRE(n.network.rules.size() == tool.network.rules.size());
    for (const auto& r : n.network.rules) {
        const auto* ref = n.rule(r.rule_id);
        REQUIRE(ref);  // the VMM's own rule, traced to the tool's file, line and text
        CHECK(ref->loc.file == "t.yaml");
        CHECK(ref->text.find("(the VM of t)") != std::string::npos);
    }
    CHECK_FALSE(n.bpf.net.empty());
    CHECK(n.network.unix_rules.empty());  // the VMM makes no unix socket
    CHECK_FALSE((n.network.af_allow & (1ull << AF_UNIX)));
    CHECK((n.network.af_allow & (1ull << AF_INET)));
    // ... and so does its seccomp filter: the VMM's user-mode network makes
    // inet sockets, never unix ones (the control: the VMM's rules alone allow both)
    auto socket_of = [](const policy::Bundle& b, int family) {
        policy::Operation op;
        op.kind = policy::OpKind::Syscall;
        op.syscall = "socket";
        op.args = {static_cast<uint64_t>(family), SOCK_STREAM, 0, 0, 0, 0};
        return policy::evaluate(b, op).verdict;
    };
    CHECK(socket_of(n, AF_INET) == policy::Verdict::Allow);
    CHECK(socket_of(n, AF_UNIX) == policy::Verdict::Deny);
    CHECK(socket_of(vmm, AF_UNIX) == policy::Verdict::Allow);
    CHECK(n.landlock.handled_net == tool.landlock.handled_net);
    REQUIRE(n.landlock.ports.size() == 1);
    CHECK(n.landlock.ports[0].port == 443);
    CHECK(n.rule(n.landlock.ports[0].rule_id)->text.find("(the VM of t)") != std::string::npos);

    // A tool without network rules: the VMM keeps its own (loopback: a network namespace of its own).
    auto offline = instantiated("tool: t\nbinaries: [/usr/bin/dash]\nfiles:\n  read: [\"${workdir}\"]\n"
                            "microvm: { mode: required }\n");
    CHECK(vm::compose_vmm_bundle(vmm, offline, "/opt/bulwark/guest").network.mode == policy::NetMode::Loopback);
}

TEST_CASE("in the VM the tool's resolvers are reached through qemu's forwarder; the VMM keeps the resolvers",
          "[vm][vmm_bundle]") {
    auto tool = instantiated("tool: t\nbinaries: [/usr/bin/curl]\nfiles:\n  read: [\"${workdir}\"]\n"
                             "network:\n  connect: [{ cidr: 192.0.2.2/32, ports: [443], proto: tcp }]\n"
                             "  dns: [127.0.0.53, 10.255.255.53]\nmicrovm: { mode: required }\n");
    auto dns_query = [](const policy::Bundle& b, const char* to, policy::OpKind kind, uint8_t proto) {
        policy::Operation op;
        op.kind = kind;
        op.addr = *policy::parse_ip(to);
        op.port = 53;
        op.proto = proto;
        return policy::evaluate_tables(b, op).verdict;
    };
    using policy::OpKind;
    using policy::Verdict;
    // Control: as written, the resolvers and not the forwarder.
    CHECK(dns_query(tool, "127.0.0.53", OpKind::Send, BW_PROTO_UDP) == Verdict::Allow);
    CHECK(dns_query(tool, "10.0.2.3", OpKind::Send, BW_PROTO_UDP) == Verdict::Deny);

    auto g = vm::guest_bundle(tool);
    for (auto kind : {OpKind::Send, OpKind::Connect})
        for (uint8_t proto : {uint8_t(BW_PROTO_UDP), uint8_t(BW_PROTO_TCP)}) {
            CHECK(dns_query(g, "10.0.2.3", kind, proto) == Verdict::Allow);
            CHECK(dns_query(g, "127.0.0.53", kind, proto) == Verdict::Deny);
            CHECK(dns_query(g, "10.255.255.53", kind, proto) == Verdict::Deny);
        }
    CHECK(g.network.dns == std::vector<std::string>{"10.0.2.3"});
    policy::Operation https;
    https.kind = OpKind::Connect;
    https.addr = *policy::parse_ip("192.0.2.2");
    https.port = 443;
    CHECK(policy::evaluate_tables(g, https).verdict == Verdict::Allow);  // every other rule as it was
    size_t renamed = 0;
    for (const auto& r : g.network.rules) {
        const auto* ref = g.rule(r.rule_id);
        REQUIRE(ref);
        if (ref->text.starts_with("network.dns")) {
            ++renamed;
            CHECK(ref->text.ends_with("(in the VM: through qemu's DNS forwarder 10.0.2.3)"));
            CHECK(ref->loc.file == "t.yaml");  // still traced to the line the user wrote
        }
    }
    CHECK(renamed == 2);

    // The VMM's own policy, composed from the tool as written, allows the
    // resolvers the forwarder sends the queries on to, and not the forwarder.
    auto vmm = instantiated("tool: vmm\nbinaries: [/usr/bin/qemu-system-x86_64]\nnetwork: loopback\n");
    auto n = vm::compose_vmm_bundle(vmm, tool, "/opt/bulwark/guest");
    CHECK(dns_query(n, "10.255.255.53", OpKind::Send, BW_PROTO_UDP) == Verdict::Allow);
    CHECK(dns_query(n, "10.0.2.3", OpKind::Send, BW_PROTO_UDP) == Verdict::Deny);

    // A tool without network rules goes as it is.
    auto offline = instantiated("tool: t\nbinaries: [/usr/bin/dash]\nmicrovm: { mode: required }\n");
    CHECK(vm::guest_bundle(offline).hash == offline.hash);
    CHECK(vm::guest_bundle(offline).network.rules.empty());
}
