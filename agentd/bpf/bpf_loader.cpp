#include "bpf/bpf_loader.h"

#include <bpf_objects_digest.h>

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include "lsm.skel.h"
#include "monitor.skel.h"
#include "bpf/ringbuf_reader.h"
#include "sock_addr.skel.h"
#include "sock_unix.skel.h"

namespace bulwark::bpf {
namespace fs = std::filesystem;

std::vector<MapHolder> flock_holders(const std::string& path) {
    std::vector<MapHolder> out;
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0) return out;
    char want[64];
    std::snprintf(want, sizeof want, "%02x:%02x:%llu", major(st.st_dev), minor(st.st_dev),
                  static_cast<unsigned long long>(st.st_ino));
    std::ifstream locks("/proc/locks");
    std::string line;
    while (std::getline(locks, line)) {
        // "1: FLOCK  ADVISORY  WRITE 1234 00:1f:5678 0 EOF"; waiters show "1: -> FLOCK ..."
        std::istringstream in(line);
        std::string id, kind, advisory, mode, pid, dev;
        in >> id >> kind >> advisory >> mode >> pid >> dev;
        if (kind != "FLOCK" || dev != want) continue;
        MapHolder h{static_cast<pid_t>(std::strtol(pid.c_str(), nullptr, 10)), {}};
        std::ifstream(std::string("/proc/") + pid + "/comm") >> h.comm;
        out.push_back(std::move(h));
    }
    return out;
}

std::string describe_holders(const std::vector<MapHolder>& holders) {
    if (holders.empty()) return "a process this host's /proc/locks does not name";
    std::string s;
    for (const auto& h : holders)
        s += (s.empty() ? "" : ", ") + ("pid " + std::to_string(h.pid) + " (" + (h.comm.empty() ? "?" : h.comm) + ")");
    return s;
}

namespace {

constexpr unsigned long kBpffsMagic = 0xcafe4a11UL;

struct LinkDeleter {
    void operator()(bpf_link* l) const { bpf_link__destroy(l); }
};
using LinkPtr = std::unique_ptr<bpf_link, LinkDeleter>;

struct LoadCtx {
    const LoaderOptions& opts;
    uint64_t root_id;
    uint32_t root_level;
    int parent_fd;
    std::string links_dir;
};

std::expected<void, SysError> mkdir_p(const std::string& path) {
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) return std::unexpected(SysError{"mkdir -p " + path, ec.value()});
    return {};
}

// Programs at hooks the build's libbpf (1.1) and UAPI headers predate: their
// sections are the kernel's names, unknown to that libbpf, so the program type
// and expected attach type are set here between open and load. Attaching
// (bpf_program__attach_cgroup) uses the expected attach type.
struct LateHook {
    const char* section;
    bpf_prog_type type;
    int attach_type;
    const char* enumerator;  // the kernel's name of attach_type in enum bpf_attach_type
};
constexpr LateHook kLateHooks[] = {
    {"cgroup/connect_unix", BPF_PROG_TYPE_CGROUP_SOCK_ADDR, BW_ATTACH_CGROUP_UNIX_CONNECT, "BPF_CGROUP_UNIX_CONNECT"},
    {"cgroup/sendmsg_unix", BPF_PROG_TYPE_CGROUP_SOCK_ADDR, BW_ATTACH_CGROUP_UNIX_SENDMSG, "BPF_CGROUP_UNIX_SENDMSG"},
};

const LateHook* late_hook(const std::string& section) {
    for (const auto& h : kLateHooks)
        if (section == h.section) return &h;
    return nullptr;
}

void set_late_hook_types(bpf_object* obj) {
    bpf_program* p;
    bpf_object__for_each_program(p, obj) {
        if (const LateHook* h = late_hook(bpf_program__section_name(p))) {
            bpf_program__set_type(p, h->type);
            bpf_program__set_expected_attach_type(p, static_cast<bpf_attach_type>(h->attach_type));
        }
    }
}

// Whether the running kernel has the late hook: its enum bpf_attach_type
// (from the kernel's BTF) names the attach type with the value we use.
// "" when it does, else why not.
std::string late_hook_missing(const LateHook& h) {
    static std::map<std::string, std::string> cache;
    if (auto it = cache.find(h.enumerator); it != cache.end()) return it->second;
    std::string why;
    btf* vmlinux = btf__load_vmlinux_btf();
    if (libbpf_get_error(vmlinux)) {
        why = "kernel BTF unreadable: cannot tell whether this kernel has " + std::string(h.enumerator);
    } else {
        int id = btf__find_by_name_kind(vmlinux, "bpf_attach_type", BTF_KIND_ENUM);
        std::optional<long long> val;
        if (id > 0) {
            const btf_type* t = btf__type_by_id(vmlinux, id);
            const struct btf_enum* e = btf_enum(t);
            for (int i = 0; i < btf_vlen(t); ++i)
                if (std::strcmp(btf__name_by_offset(vmlinux, e[i].name_off), h.enumerator) == 0) val = e[i].val;
        }
        if (!val)
            why = "hook not in this kernel (no " + std::string(h.enumerator) +
                  " in its enum bpf_attach_type; the cgroup unix hooks came with Linux 6.7)";
        else if (*val != h.attach_type)
            why = std::string(h.enumerator) + " is " + std::to_string(*val) + " in this kernel, not " +
                  std::to_string(h.attach_type) + ": not attached";
        btf__free(vmlinux);
    }
    cache[h.enumerator] = why;
    return why;
}

template <class Skel>
Skel* open_skel(const LoadCtx& c, bool pinned) {
    LIBBPF_OPTS(bpf_object_open_opts, o, .pin_root_path = pinned ? c.opts.pin_root.c_str() : nullptr);
    Skel* s = Skel::open(&o);
    if (!s) return nullptr;
    set_late_hook_types(s->obj);
    s->rodata->bw_root_cgid = c.root_id;
    s->rodata->bw_root_level = c.root_level;
    if (!pinned) {  // throwaway probe object: private, small maps
        bpf_map* m;
        bpf_object__for_each_map(m, s->obj) {
            if (bpf_map__is_internal(m)) continue;
            bpf_map__set_pin_path(m, nullptr);
            bpf_map__set_max_entries(m, bpf_map__type(m) == BPF_MAP_TYPE_RINGBUF ? 4096 : 1);
        }
    }
    return s;
}

template <class Skel>
struct SkelDeleter {
    void operator()(Skel* s) const { Skel::destroy(s); }
};

// Loads one program alone; empty reason when it loads.
template <class Skel>
std::pair<std::string, std::string> probe_program(const LoadCtx& c, const std::string& prog) {
    LibbpfCapture cap;
    std::unique_ptr<Skel, SkelDeleter<Skel>> s(open_skel<Skel>(c, false));
    if (!s) return {"cannot open object: " + errno_name(errno), {}};
    bpf_program* p;
    bpf_object__for_each_program(p, s->obj) bpf_program__set_autoload(p, prog == bpf_program__name(p));
    int err = Skel::load(s.get());
    if (err == 0) return {};
    std::string log = cap.verifier_log();
    return {load_failure_reason(err, log), log};
}

// The hook's program reduced to `return 0`. When the kernel refuses even
// that with EPERM (the host refuses the program type, as BPF LSM is refused
// here), it refuses the real program the same way, and the costly probe (the
// whole object opened, relocated against the kernel's BTF and loaded, ~17 ms
// a program) is skipped. Any other outcome leaves the verdict to that probe.
class MinimalLsmProbe {
public:
    MinimalLsmProbe() = default;
    MinimalLsmProbe(const MinimalLsmProbe&) = delete;
    MinimalLsmProbe& operator=(const MinimalLsmProbe&) = delete;
    ~MinimalLsmProbe() { btf__free(vmlinux_); }

    // The refusal reason, or "" when the real program must be probed.
    std::string refused(const std::string& section) {
        if (!section.starts_with("lsm/")) return "";
        if (!tried_) {
            tried_ = true;
            vmlinux_ = btf__load_vmlinux_btf();
            if (libbpf_get_error(vmlinux_)) vmlinux_ = nullptr;
        }
        if (!vmlinux_) return "";
        const std::string fn = "bpf_lsm_" + section.substr(4);
        int id = btf__find_by_name_kind(vmlinux_, fn.c_str(), BTF_KIND_FUNC);
        if (id < 0) return "";
        bpf_insn insns[2] = {};
        insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K;  // r0 = 0
        insns[1].code = BPF_JMP | BPF_EXIT;
        LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = BPF_LSM_MAC,
                    .attach_btf_id = static_cast<__u32>(id));
        int fd = bpf_prog_load(BPF_PROG_TYPE_LSM, "bw_probe", "GPL", insns, 2, &o);
        if (fd >= 0) {
            ::close(fd);
            return "";
        }
        return fd == -EPERM ? load_failure_reason(EPERM, "") : "";
    }

private:
    btf* vmlinux_ = nullptr;
    bool tried_ = false;
};

bool is_cgroup_prog(bpf_program* p) {
    auto t = bpf_program__type(p);
    return t == BPF_PROG_TYPE_CGROUP_SOCK_ADDR || t == BPF_PROG_TYPE_CGROUP_SOCK ||
           t == BPF_PROG_TYPE_CGROUP_SKB || t == BPF_PROG_TYPE_CGROUP_SOCKOPT;
}

}  // namespace

struct BpfLoader::Object {
    std::string name;
    std::shared_ptr<void> skel;  // destroyed after links (declared first)
    std::vector<LinkPtr> links;
    std::vector<Fd> adopted_links;
    ~Object() {
        // Pinned links stay in the kernel; only drop our handles without detaching.
        for (auto& l : links) {
            bpf_link__disconnect(l.get());
            ::close(bpf_link__fd(l.get()));
        }
    }
};

namespace {

template <class Skel>
std::expected<std::unique_ptr<BpfLoader::Object>, SysError> load_object(const std::string& name, const LoadCtx& c,
                                                                        std::vector<ProgramStatus>& out) {
    auto obj = std::make_unique<BpfLoader::Object>();
    obj->name = name;
    std::unique_ptr<Skel, SkelDeleter<Skel>> s(open_skel<Skel>(c, true));
    if (!s) return std::unexpected(SysError{"bpf_object__open(" + name + ")", errno});

    std::vector<ProgramStatus> st;
    bpf_program* p;
    bpf_object__for_each_program(p, s->obj) {
        ProgramStatus ps{name, bpf_program__name(p), bpf_program__section_name(p)};
        std::string pin = c.links_dir + "/" + ps.name;
        if (ps.name == "bw_sys_enter" && !c.opts.trace_syscalls) {
            ps.reason = "not requested (LoaderOptions::trace_syscalls is off)";
        } else if (int fd = bpf_obj_get(pin.c_str()); fd >= 0) {
            obj->adopted_links.emplace_back(fd);
            ps.adopted = true;
            ps.state = ProgState::Attached;
            ps.reason = "link re-adopted from " + pin;
        }
        st.push_back(std::move(ps));
    }
    // Programs whose hook the kernel refuses outright are settled before the
    // object is loaded at all.
    for (auto& ps : st)
        if (const LateHook* h = late_hook(ps.section); h && !ps.adopted && ps.reason.empty())
            if (std::string why = late_hook_missing(*h); !why.empty()) {
                ps.state = ProgState::Unavailable;
                ps.reason = std::move(why);
            }
    MinimalLsmProbe minimal;
    if (!c.opts.full_probe)
        for (auto& ps : st)
            if (!ps.adopted && ps.reason.empty())
                if (std::string why = minimal.refused(ps.section); !why.empty()) {
                    ps.state = ProgState::Unavailable;
                    ps.reason = std::move(why);
                }
    auto set_autoload = [&](Skel* sk) {
        size_t i = 0;
        bpf_object__for_each_program(p, sk->obj) {
            bpf_program__set_autoload(p, !st[i].adopted && st[i].reason.empty());
            ++i;
        }
    };
    set_autoload(s.get());
    int err;
    {
        LibbpfCapture quiet;  // an expected refusal (e.g. LSM here) is reported per program below
        err = Skel::load(s.get());
    }
    if (err) {
        spdlog::info("bpf: {} did not load as a whole ({}); probing each program", name, errno_name(-err));
        s.reset();
        for (auto& ps : st) {
            if (ps.adopted || !ps.reason.empty()) continue;
            auto [reason, log] = probe_program<Skel>(c, ps.name);
            if (!reason.empty()) {
                ps.state = ProgState::Unavailable;
                ps.reason = reason;
                ps.verifier_log = log;
            }
        }
        s.reset(open_skel<Skel>(c, true));
        if (!s) return std::unexpected(SysError{"bpf_object__open(" + name + ")", errno});
        set_autoload(s.get());
        err = Skel::load(s.get());
        if (err) {
            for (auto& ps : st)
                if (!ps.adopted && ps.reason.empty()) {
                    ps.state = ProgState::Unavailable;
                    ps.reason = "object load failed with the rest: " + errno_name(-err);
                }
        }
    }
    if (!err) {
        size_t i = 0;
        bpf_object__for_each_program(p, s->obj) {
            ProgramStatus& ps = st[i++];
            if (!bpf_program__autoload(p)) continue;
            bpf_link* l = is_cgroup_prog(p) ? bpf_program__attach_cgroup(p, c.parent_fd) : bpf_program__attach(p);
            if (!l) {
                ps.state = ProgState::Unavailable;
                ps.reason = "attach failed: " + errno_name(errno);
                continue;
            }
            std::string pin = c.links_dir + "/" + ps.name;
            if (int perr = bpf_link__pin(l, pin.c_str()); perr) {
                ps.reason = "attached but not pinned (" + errno_name(-perr) + "): ends with this process";
                spdlog::warn("bpf: pin {}: {}", pin, errno_name(-perr));
            }
            ps.state = ProgState::Attached;
            obj->links.emplace_back(l);
        }
    }
    obj->skel = std::shared_ptr<void>(s.release(), [](void* v) { Skel::destroy(static_cast<Skel*>(v)); });
    for (auto& ps : st) out.push_back(std::move(ps));
    return obj;
}

}  // namespace

// ---------------------------------------------------------------- cgroups, bpffs

std::expected<std::string, SysError> resolve_cgroup_parent(const std::string& configured) {
    auto mnt = cgroup2_mount();
    if (!mnt) return std::unexpected(mnt.error());
    std::string parent = configured;
    if (parent.empty()) {
        auto own = own_cgroup2_path();
        if (!own) return std::unexpected(own.error());
        parent = *mnt + (*own == "/" ? "" : *own) + "/bulwark";
    }
    if (parent.rfind(*mnt + "/", 0) != 0)
        return std::unexpected(SysError{"sandbox parent " + parent + " is not below the cgroup v2 mount " + *mnt, EINVAL});
    return parent;
}

std::expected<CgroupHandle, SysError> cgroup_handle(const std::string& dir) {
    struct {
        struct file_handle fh;
        uint64_t id;
    } h{};
    h.fh.handle_bytes = sizeof(uint64_t);
    int mount_id = 0;
    if (name_to_handle_at(AT_FDCWD, dir.c_str(), &h.fh, &mount_id, 0) != 0)
        return std::unexpected(SysError::last("name_to_handle_at(" + dir + ")"));
    CgroupHandle out;
    std::memcpy(&out.id, h.fh.f_handle, sizeof out.id);
    out.type = h.fh.handle_type;
    return out;
}

std::expected<uint64_t, SysError> cgroup_id(const std::string& dir) {
    auto h = cgroup_handle(dir);
    if (!h) return std::unexpected(h.error());
    return h->id;
}

std::expected<void, SysError> ensure_bpffs() {
    struct statfs s{};
    if (statfs("/sys/fs/bpf", &s) == 0 && static_cast<unsigned long>(s.f_type) == kBpffsMagic) return {};
    if (auto r = mkdir_p("/sys/fs/bpf"); !r) return r;
    if (mount("bpf", "/sys/fs/bpf", "bpf", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700") != 0)
        return std::unexpected(SysError::last("mount(bpf, /sys/fs/bpf, bpf)"));
    spdlog::info("bpf: mounted bpffs at /sys/fs/bpf");
    return {};
}

// ---------------------------------------------------------------- loader

// ---------------------------------------------------------------- build marker

std::vector<MapHolder> other_map_holders(uint32_t map_id, bool children) {
    std::vector<MapHolder> out;
    const std::string want = "map_id:\t" + std::to_string(map_id);
    const pid_t self = ::getpid();
    std::error_code ec;
    for (const auto& proc : fs::directory_iterator("/proc", ec)) {
        const std::string name = proc.path().filename().string();
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
        pid_t pid = static_cast<pid_t>(std::stol(name));
        if (pid == self) continue;
        std::error_code fec;
        for (const auto& fd : fs::directory_iterator(proc.path() / "fd", fec)) {
            std::error_code lec;
            if (fs::read_symlink(fd.path(), lec).string() != "anon_inode:bpf-map") continue;
            std::ifstream fi(proc.path() / "fdinfo" / fd.path().filename());
            std::string line;
            bool match = false;
            while (std::getline(fi, line))
                if (line == want) match = true;
            if (!match) continue;
            bool ours = false;
            if (!children) {
                std::ifstream st(proc.path() / "status");
                while (std::getline(st, line))
                    if (line.starts_with("PPid:")) {
                        ours = std::strtol(line.c_str() + 5, nullptr, 10) == self;
                        break;
                    }
            }
            if (ours) break;
            MapHolder h{pid, {}};
            std::ifstream(proc.path() / "comm") >> h.comm;
            out.push_back(std::move(h));
            break;
        }
    }
    return out;
}

namespace {

// <pin_root>/bw_build: an array map of one entry naming the build whose
// programs and maps are pinned there: the ABI version, the objects' size and
// the digest of the objects taken when they were built
// (cmake/BulwarkBpfDigest.cmake: it tells builds apart, it is no defence
// against whoever can write bpffs, who is root anyway).
struct BuildMarker {
    uint32_t abi = 0;
    uint32_t elf_bytes = 0;
    uint64_t digest[2] = {};
};

const BuildMarker& own_build() {
    static constexpr BuildMarker m{BW_ABI_VERSION, BW_OBJECTS_BYTES, {BW_OBJECTS_DIGEST0, BW_OBJECTS_DIGEST1}};
    return m;
}

std::string build_text(const BuildMarker& b) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(b.digest[0]));
    return "ABI " + std::to_string(b.abi) + ", objects " + std::to_string(b.elf_bytes) + " bytes, digest " + hex;
}

std::expected<void, SysError> pin_build_marker(const std::string& path) {
    int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "bw_build", sizeof(uint32_t), sizeof(BuildMarker), 1, nullptr);
    if (fd < 0) return std::unexpected(SysError::last("bpf_map_create(bw_build)"));
    uint32_t k = 0;
    int rc = bpf_map_update_elem(fd, &k, &own_build(), BPF_ANY);
    if (rc == 0) rc = bpf_obj_pin(fd, path.c_str());
    int e = errno;
    ::close(fd);
    if (rc != 0) return std::unexpected(SysError{"pin " + path, e});
    return {};
}

// Removes everything pinned below pin_root, keeping the directory.
std::expected<void, SysError> clear_pins(const std::string& pin_root) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(pin_root, ec)) {
        std::error_code rec;
        fs::remove_all(e.path(), rec);  // unlinking a pinned link detaches it once no fd holds it
        if (rec) return std::unexpected(SysError{"rm -r " + e.path().string(), rec.value()});
    }
    return {};
}

bool cgroup_populated(const std::string& dir) {
    std::ifstream in(dir + "/cgroup.events");
    std::string k, v;
    while (in >> k >> v)
        if (k == "populated") return v == "1";
    return false;
}

// Programs and maps pinned by another build are never re-adopted: old code
// would enforce against maps this build lays out differently, or new maps
// would be read by old code. Unused, they are replaced; in use (live
// sandboxes, another process holding the maps), the start fails.
std::expected<void, SysError> settle_pinned_build(const std::string& pin_root, const std::string& parent) {
    const std::string marker = pin_root + "/bw_build";
    std::string found;
    if (int fd = bpf_obj_get(marker.c_str()); fd >= 0) {
        BuildMarker m;
        uint32_t k = 0;
        bool ok = bpf_map_lookup_elem(fd, &k, &m) == 0;
        ::close(fd);
        if (ok && std::memcmp(&m, &own_build(), sizeof m) == 0) return {};
        found = ok ? build_text(m) : "an unreadable build marker";
    } else {
        bool pinned = false;
        std::error_code ec;
        for (const auto& e : fs::recursive_directory_iterator(pin_root, ec))
            if (!e.is_directory()) pinned = true;
        if (!pinned) return pin_build_marker(marker);
        found = "no build marker";
    }
    std::vector<std::string> users;
    if (cgroup_populated(parent)) users.push_back("live sandboxes below " + parent);
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(pin_root, ec)) {
        if (e.is_directory()) continue;
        int fd = bpf_obj_get(e.path().c_str());
        if (fd < 0) continue;
        bpf_map_info info{};
        uint32_t len = sizeof info;
        bool got = bpf_obj_get_info_by_fd(fd, &info, &len) == 0;
        ::close(fd);
        if (!got) continue;
        for (const auto& h : other_map_holders(info.id)) {
            std::string u = "pid " + std::to_string(h.pid) + " (" + h.comm + ")";
            if (std::find(users.begin(), users.end(), u) == users.end()) users.push_back(u);
        }
    }
    if (!users.empty()) {
        std::string list;
        for (const auto& u : users) list += (list.empty() ? "" : ", ") + u;
        return std::unexpected(SysError{
            "the BPF programs and maps pinned under " + pin_root + " are another Bulwark build's (" + found +
                "; this is " + build_text(own_build()) + ") and in use by " + list +
                "; they are neither re-adopted nor replaced: stop those, then remove " + pin_root +
                " (or use another pin root)",
            EEXIST});
    }
    spdlog::warn("bpf: the programs and maps pinned under {} are another build's ({}) and unused: replacing them",
                 pin_root, found);
    // The directory itself stays: it is the lock that agentd run and serve share.
    if (auto r = clear_pins(pin_root); !r) return r;
    if (auto r = mkdir_p(pin_root + "/links"); !r) return r;
    return pin_build_marker(marker);
}

}  // namespace

std::string bpf_build_id() { return build_text(own_build()); }

std::expected<std::unique_ptr<BpfLoader>, SysError> BpfLoader::start(LoaderOptions opts) {
    route_libbpf_logs();
    std::unique_ptr<BpfLoader> L(new BpfLoader());
    L->opts_ = std::move(opts);
    const LoaderOptions& o = L->opts_;

    if (auto r = ensure_bpffs(); !r) return std::unexpected(r.error());
    const std::string links_dir = o.pin_root + "/links";
    if (auto r = mkdir_p(links_dir); !r) return std::unexpected(r.error());

    auto mnt = cgroup2_mount();
    if (!mnt) return std::unexpected(mnt.error());
    auto resolved = resolve_cgroup_parent(o.cgroup_parent);
    if (!resolved) return std::unexpected(resolved.error());
    const std::string parent = *resolved;
    if (auto r = mkdir_p(parent); !r) return std::unexpected(r.error());
    L->parent_path_ = parent;
    L->parent_fd_ = Fd(::open(parent.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC));
    if (!L->parent_fd_) return std::unexpected(SysError::last("open(" + parent + ", O_DIRECTORY)"));
    auto id = cgroup_id(parent);
    if (!id) return std::unexpected(id.error());
    L->parent_id_ = *id;
    for (const auto& part : fs::path(parent.substr(mnt->size())))
        if (part != "/" && !part.empty()) ++L->parent_level_;

    if (auto r = settle_pinned_build(o.pin_root, parent); !r) return std::unexpected(r.error());
    if (o.reuse_proof && o.truth_check && L->adopt_recorded_proof()) {
        auto maps = PolicyMaps::open_pinned(o.pin_root);
        if (!maps) return std::unexpected(maps.error());
        L->maps_ = std::move(*maps);
        spdlog::info("bpf: verdicts of the {}", L->proof_);
        return L;
    }
    LoadCtx c{o, L->parent_id_, L->parent_level_, L->parent_fd_.get(), links_dir};
    auto add = [&](auto r) -> std::expected<void, SysError> {
        if (!r) return std::unexpected(r.error());
        L->objects_.push_back(std::move(*r));
        return {};
    };
    // sock_addr first: its load creates and pins the shared maps on this kernel.
    if (o.sock)
        if (auto r = add(load_object<sock_addr>("sock_addr", c, L->programs_)); !r) return std::unexpected(r.error());
    if (o.sock)
        if (auto r = add(load_object<sock_unix>("sock_unix", c, L->programs_)); !r) return std::unexpected(r.error());
    if (o.monitor)
        if (auto r = add(load_object<monitor>("monitor", c, L->programs_)); !r) return std::unexpected(r.error());
    if (o.lsm)
        if (auto r = add(load_object<lsm>("lsm", c, L->programs_)); !r) return std::unexpected(r.error());

    auto maps = PolicyMaps::open_pinned(o.pin_root);
    if (!maps) return std::unexpected(maps.error());
    L->maps_ = std::move(*maps);

    if (o.truth_check) {
        if (auto r = L->truth_check(); !r) return std::unexpected(r.error());
        L->proof_ = "truth check by this process";
        L->record_proof();
    } else {
        L->proof_ = "none: the truth check is off";
    }
    for (const auto& p : L->programs_) spdlog::info("bpf: {}", p.line());
    return L;
}

BpfLoader::~BpfLoader() = default;

const ProgramStatus* BpfLoader::program(const std::string& section) const {
    for (const auto& p : programs_)
        if (p.section == section || p.name == section) return &p;
    return nullptr;
}

bool BpfLoader::object_proven(const std::string& object) const {
    bool any = false;
    for (const auto& p : programs_) {
        if (p.object != object) continue;
        any = true;
        if (p.state != ProgState::Enforcing && p.state != ProgState::Observing) return false;
    }
    return any;
}

std::string BpfLoader::report() const {
    std::string s;
    for (const auto& p : programs_) s += p.line() + "\n";
    return s;
}

std::expected<void, SysError> BpfLoader::unpin_all(const std::string& pin_root) {
    std::error_code ec;
    if (!fs::exists(pin_root, ec)) return {};
    if (auto r = clear_pins(pin_root); !r) return r;
    if (!fs::remove(pin_root, ec) && ec) return std::unexpected(SysError{"rmdir " + pin_root, ec.value()});
    return {};
}

}  // namespace bulwark::bpf
