// Runs inside a qemu guest booted with Debian's stock 6.1 kernel (BPF LSM on):
// loads Bulwark's real programs with the real loader and drives the LSM cases
// with real syscalls. Prints one line per case,
//   VMTEST <case> PASS|FAIL <detail>
// and a final "VMTEST-SUMMARY pass=<n> fail=<m>". run_vm.sh maps that to ctest.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "bpf/bpf_loader.h"
#include "bpf/bpf_maps.h"
#include "empty_lsm.skel.h"
#include "lsm.skel.h"
#include "bpf_bench_util.h"
#include "bpf/ringbuf_reader.h"

using namespace bulwark::bpf;
using bulwark::policy::BpfTables;

namespace {

int g_pass = 0, g_fail = 0;

void result(const std::string& name, bool ok, const std::string& detail) {
    std::printf("VMTEST %s %s %s\n", name.c_str(), ok ? "PASS" : "FAIL", detail.c_str());
    std::fflush(stdout);
    ++(ok ? g_pass : g_fail);
}

std::string ename(int e) {
    if (e == 0) return "0";
    const char* n = strerrorname_np(e);
    return n ? n : std::to_string(e);
}

// Expect errno `want` from the operation: prints the case.
void expect(const std::string& name, int got, int want, const std::string& extra = {}) {
    result(name, got == want, "got=" + ename(got) + " want=" + ename(want) + (extra.empty() ? "" : " " + extra));
}

template <class T>
T* shared(size_t n = 1) {
    void* p = mmap(nullptr, sizeof(T) * n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return static_cast<T*>(p);
}

pid_t spawn_in(const std::string& cg, const std::function<int()>& fn) {
    int procs = open((cg + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    pid_t pid = fork();
    if (pid == 0) {
        if (procs < 0 || write(procs, "0", 1) != 1) _exit(120);
        _exit(fn());
    }
    if (procs >= 0) close(procs);
    return pid;
}

int wait_exit(pid_t pid) {
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Runs fn in the cgroup; fn returns an errno (0 = success).
int in(const std::string& cg, const std::function<int()>& fn) { return wait_exit(spawn_in(cg, fn)); }

int err_of(long rc) { return rc < 0 ? errno : 0; }
int open_err(const char* p, int flags) {
    int fd = open(p, flags | O_CLOEXEC, 0600);
    if (fd < 0) return errno;
    close(fd);
    return 0;
}

void write_file(const std::string& p, const std::string& s) {
    int fd = open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    if (fd >= 0) {
        (void)!write(fd, s.data(), s.size());
        close(fd);
    }
}

void copy_file(const char* from, const char* to) {
    int in_fd = open(from, O_RDONLY | O_CLOEXEC);
    int out_fd = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    char buf[65536];
    ssize_t n;
    while ((n = read(in_fd, buf, sizeof buf)) > 0) (void)!write(out_fd, buf, static_cast<size_t>(n));
    close(in_fd);
    close(out_fd);
}

// A loader with a pin root and sandbox parent of its own, no monitor, no canaries.
LoaderOptions own_loader(const std::string& pin_root, const std::string& parent) {
    LoaderOptions o;
    o.pin_root = pin_root;
    o.cgroup_parent = parent;
    o.monitor = false;
    o.truth_check = false;
    return o;
}

struct Leaf {
    std::string path;
    uint64_t id = 0;
    Leaf(const std::string& parent, const std::string& name) : path(parent + "/" + name) {
        mkdir(path.c_str(), 0700);
        id = cgroup_id(path).value_or(0);
    }
};

bulwark::policy::BpfFileEntry rule(const std::string& path, uint32_t allow, uint32_t deny, uint32_t id) {
    bulwark::policy::BpfFileEntry e;
    e.path = path;
    e.value.allow = allow;
    e.value.deny = deny;
    e.value.allow_rule_id = allow ? id : 0;
    e.value.deny_rule_id = deny ? id : 0;
    return e;
}

BpfTables files_policy(bool with_secret, uint32_t mode = BW_MODE_ENFORCE) {
    BpfTables t;
    t.header.mode = mode;
    t.header.flags = BW_POL_FILES_ENFORCED | BW_POL_EXEC_ENFORCED | BW_POL_NET_NONE | BW_POL_DENY_PTRACE |
                     BW_POL_DENY_MOUNT | BW_POL_DENY_BPF;
    t.header.af_allow = (1ull << AF_INET) | (1ull << AF_INET6) | (1ull << AF_UNIX);
    t.header.sock_type_allow = (1u << SOCK_STREAM) | (1u << SOCK_DGRAM);
    t.files.push_back(rule("/data/ro", BW_FS_READ, 0, 1));
    t.files.push_back(rule("/data/ro/deny", 0, BW_FS_READ, 2));
    t.files.push_back(rule("/data/rw", BW_FS_READ | BW_FS_WRITE | BW_FS_CREATE | BW_FS_REMOVE, 0, 3));
    t.files.push_back(rule("/data/mv", BW_FS_READ | BW_FS_REMOVE | BW_FS_CREATE, 0, 4));
    t.files.push_back(rule("/bin", BW_FS_READ | BW_FS_EXEC, 0, 5));
    t.files.push_back(rule("/data/bin", BW_FS_READ, 0, 6));
    if (with_secret) t.files.push_back(rule("/data/secret", BW_FS_READ, 0, 7));
    return t;
}

struct Events {
    std::vector<bw_event> all;
    std::unique_ptr<RingbufReader> reader;
    std::vector<bw_event> of(uint64_t cg) {
        (void)reader->consume();
        std::vector<bw_event> mine, rest;
        for (auto& e : all) (e.cgroup_id == cg ? mine : rest).push_back(e);
        all = std::move(rest);
        return mine;
    }
};

bool has_event(const std::vector<bw_event>& ev, uint16_t layer, uint16_t op, uint8_t decision, uint32_t rule = 0xfffffffe) {
    for (const auto& e : ev)
        if (e.layer == layer && e.op == op && e.decision == decision && (rule == 0xfffffffe || e.rule_id == rule))
            return true;
    return false;
}

void setup_files() {
    for (const char* d : {"/data", "/data/ro", "/data/ro/deny", "/data/rw", "/data/mv", "/data/secret", "/data/bin",
                          "/data/rw/alias"})
        mkdir(d, 0755);
    write_file("/data/ro/f", "ro");
    write_file("/data/ro/g", "ro");
    write_file("/data/ro/deny/f", "no");
    write_file("/data/rw/a", "rw");
    write_file("/data/mv/f", "mv");
    write_file("/data/mv/g", "mv");
    write_file("/data/secret/f", "secret");
    copy_file("/bin/busybox", "/data/bin/prog");
    mount("/data/secret", "/data/rw/alias", nullptr, MS_BIND, nullptr);
}

int exec_err(const char* path) {
    pid_t p = fork();
    if (p == 0) {
        char a0[] = "true";
        char* argv[] = {a0, nullptr};
        char* envp[] = {nullptr};
        execve(path, argv, envp);
        _exit(200 + (errno & 0x3f));
    }
    int rc = wait_exit(p);
    return rc >= 200 ? rc - 200 : (rc == 0 ? 0 : -rc);
}

int memfd_exec_err() {
    int fd = static_cast<int>(syscall(SYS_memfd_create, "payload", 0));
    if (fd < 0) return errno;
    int src = open("/bin/busybox", O_RDONLY | O_CLOEXEC);  // allowed: /bin READ
    if (src < 0) return 1000 + errno;
    char buf[65536];
    ssize_t n;
    while ((n = read(src, buf, sizeof buf)) > 0) (void)!write(fd, buf, static_cast<size_t>(n));
    close(src);
    pid_t p = fork();
    if (p == 0) {
        char a0[] = "true";
        char* argv[] = {a0, nullptr};
        char* envp[] = {nullptr};
        syscall(SYS_execveat, fd, "", argv, envp, AT_EMPTY_PATH);
        _exit(200 + (errno & 0x3f));
    }
    int rc = wait_exit(p);
    return rc >= 200 ? rc - 200 : (rc == 0 ? 0 : -rc);
}


// ---- differential group: the file/exec corpus written by diff_vm_corpus on
// the host (random rule files through the real compiler, their exact map
// contents and the reference evaluator's answers), replayed here for real.

struct DiffOp {
    unsigned method = 0, verdict = 0;  // FileMethod, policy::Verdict (0 allow, 1 deny, 2 audit)
    uint32_t rule = BW_NO_RULE;
    std::string path, judged, to;
};
struct DiffPolicy {
    std::string name;
    size_t index = 0;
    BpfTables tables;
    std::string text;
    std::vector<DiffOp> ops;
};
struct DiffCorpus {
    unsigned long long seed = 0;
    std::vector<std::string> dirs, progs;
    std::string mount, alias, alias_of;
    std::vector<DiffPolicy> policies;
};

const char* const kDiffRoot = "/data/diff";
const char* const kMethodNames[] = {"open(O_RDONLY)", "open(O_WRONLY)", "mknod", "mkdir", "symlink",
                                    "unlink",         "execve",         "rename", "link",
                                    "renameat2(RENAME_EXCHANGE)"};
enum : unsigned { M_READ, M_WRITE, M_MKNOD, M_MKDIR, M_SYMLINK, M_UNLINK, M_EXEC, M_RENAME, M_LINK, M_EXCHANGE };

std::string diff_abs(const std::string& rel) { return rel == "." ? kDiffRoot : std::string(kDiffRoot) + "/" + rel; }

std::optional<DiffCorpus> read_corpus(const char* path, std::string& err) {
    FILE* f = std::fopen(path, "r");
    if (!f) {
        err = std::string(path) + ": " + strerror(errno);
        return std::nullopt;
    }
    DiffCorpus c;
    char word[32];
    char a[4096], b[4096], c3[4096];
    while (std::fscanf(f, "%31s", word) == 1) {
        std::string w = word;
        if (w == "seed") {
            if (std::fscanf(f, "%llu", &c.seed) != 1) break;
        } else if (w == "dir" && std::fscanf(f, "%4095s", a) == 1) {
            c.dirs.push_back(a);
        } else if (w == "prog" && std::fscanf(f, "%4095s", a) == 1) {
            c.progs.push_back(a);
        } else if (w == "mount" && std::fscanf(f, "%4095s", a) == 1) {
            c.mount = a;
        } else if (w == "alias" && std::fscanf(f, "%4095s %4095s", a, b) == 2) {
            c.alias = a;
            c.alias_of = b;
        } else if (w == "policy") {
            DiffPolicy p;
            unsigned long long af;
            size_t nfiles, nops, tlen;
            if (std::fscanf(f, "%4095s %zu %u %u %llu %u %zu %zu %zu", a, &p.index, &p.tables.header.mode,
                            &p.tables.header.flags, &af, &p.tables.header.sock_type_allow, &nfiles, &nops,
                            &tlen) != 9) {
                err = "bad policy line";
                break;
            }
            p.tables.header.af_allow = af;
            p.name = a;
            std::fgetc(f);  // the newline after the header
            p.text.resize(tlen);
            if (std::fread(p.text.data(), 1, tlen, f) != tlen) {
                err = "short policy text";
                break;
            }
            for (size_t i = 0; i < nfiles; ++i) {
                bulwark::policy::BpfFileEntry e;
                if (std::fscanf(f, " file %u %u %u %u %4095s", &e.value.allow, &e.value.deny, &e.value.allow_rule_id,
                                &e.value.deny_rule_id, a) != 5) {
                    err = "bad file line";
                    break;
                }
                e.path = a;
                p.tables.files.push_back(std::move(e));
            }
            for (size_t i = 0; i < nops; ++i) {
                DiffOp o;
                if (std::fscanf(f, " op %u %u %u %4095s %4095s %4095s", &o.method, &o.verdict, &o.rule, a, b,
                                c3) != 6 ||
                    o.method > M_EXCHANGE) {
                    err = "bad op line";
                    break;
                }
                o.path = a;
                o.judged = b;
                o.to = c3;
                p.ops.push_back(std::move(o));
            }
            if (!err.empty()) break;
            c.policies.push_back(std::move(p));
        } else {
            err = "unknown record '" + w + "'";
            break;
        }
    }
    std::fclose(f);
    if (!err.empty()) return std::nullopt;
    return c;
}

void setup_diff_tree(const DiffCorpus& c) {
    mkdir("/data", 0755);
    for (const auto& d : c.dirs) {
        std::string p = diff_abs(d);
        mkdir(p.c_str(), 0755);
        if (d == c.mount) mount("diff", p.c_str(), "tmpfs", 0, "mode=0755");
    }
    for (const auto& d : c.dirs) {
        write_file(diff_abs(d) + "/x", "x");
        write_file(diff_abs(d) + "/y", "y");
    }
    for (const auto& d : c.progs) copy_file("/bin/busybox", (diff_abs(d) + "/prog").c_str());
    std::string al = diff_abs(c.alias);
    mkdir(al.c_str(), 0755);
    mount(diff_abs(c.alias_of).c_str(), al.c_str(), nullptr, MS_BIND, nullptr);
}

int diff_perform(unsigned method, const std::string& path, const std::string& to) {
    const char* p = path.c_str();
    switch (method) {
        case M_READ: return open_err(p, O_RDONLY);
        case M_WRITE: return open_err(p, O_WRONLY);
        case M_MKNOD: return err_of(mknod(p, S_IFREG | 0600, 0));
        case M_MKDIR: return err_of(mkdir(p, 0700));
        case M_SYMLINK: return err_of(symlink("x", p));
        case M_UNLINK: return err_of(unlink(p));
        case M_EXEC: return exec_err(p);
        case M_RENAME: return err_of(rename(p, to.c_str()));
        case M_LINK: return err_of(link(p, to.c_str()));
        case M_EXCHANGE: return err_of(syscall(SYS_renameat2, AT_FDCWD, p, AT_FDCWD, to.c_str(), 2 /* RENAME_EXCHANGE */));
    }
    return EINVAL;
}

// The object the LSM judges: the file itself, or for a new name its directory.
bool judged_object(unsigned method, const std::string& path, uint64_t& dev, uint64_t& ino) {
    std::string obj = path;
    if (method == M_MKNOD || method == M_MKDIR || method == M_SYMLINK) obj = path.substr(0, path.rfind('/'));
    struct stat st;
    if (stat(obj.c_str(), &st) != 0) return false;
    dev = kernel_dev_of(st.st_dev);
    ino = st.st_ino;
    return true;
}

std::string diff_rule(uint32_t r) { return r == BW_NO_RULE ? "none" : std::to_string(r); }

void run_diff_group(BpfLoader& L, Events& ev, const char* corpus_path) {
    std::string err;
    auto corpus = read_corpus(corpus_path, err);
    if (!corpus) {
        result("diff_corpus", false, err);
        return;
    }
    std::printf("VMTEST-INFO diff corpus seed=%llu policies=%zu (replay on the host: BULWARK_DIFF_SEED=%llu)\n",
                corpus->seed, corpus->policies.size(), corpus->seed);
    setup_diff_tree(*corpus);
    auto& M = L.maps();
    static const char* verdicts[] = {"allow", "deny", "audit"};
    size_t ops_total = 0, denied_total = 0, allowed_total = 0, policies_denying = 0;
    for (auto& p : corpus->policies) {
        p.tables.header.flags |= BW_POL_REPORT_ALLOW;  // a record for every decision
        auto h = M.load(p.tables);
        const std::string& name = p.name;
        if (!h) {
            result(name, false, "load: " + h.error().message());
            continue;
        }
        Leaf leaf(L.parent_cgroup(), "diff" + std::to_string(p.index));
        (void)M.bind(leaf.id, h->handle);
        (void)ev.of(leaf.id);
        size_t bad = 0, denied = 0;
        std::string first;
        for (const auto& o : p.ops) {
            if (o.method == M_UNLINK || o.method == M_RENAME || o.method == M_LINK || o.method == M_EXCHANGE)
                write_file(o.path, "victim");
            if (o.method == M_EXCHANGE) write_file(o.to, "other");
            uint64_t dev = 0, ino = 0, dev2 = 0, ino2 = 0;
            bool have_obj = judged_object(o.method, o.path, dev, ino);
            // An exchange is a move each way: the object named by `to` is
            // judged second, and decides when the first move was allowed.
            if (o.method == M_EXCHANGE) have_obj = have_obj && judged_object(o.method, o.to, dev2, ino2);
            int got = in(leaf.path, [&] { return diff_perform(o.method, o.path, o.to); });
            auto evs = ev.of(leaf.id);
            uint8_t want_dec = o.verdict == 0 ? BW_DECISION_ALLOW : o.verdict == 1 ? BW_DECISION_DENY : BW_DECISION_AUDIT;
            int want_err = o.verdict == 1 ? EPERM : 0;
            size_t seen = 0;
            bool ok = have_obj && got == want_err;
            std::string kernel = "errno=" + ename(got);
            auto describe_event = [&](const bw_event& e) {
                return std::string(" event(op ") + std::to_string(e.op) + " " +
                       (e.decision < 3 ? verdicts[e.decision] : "?") + " rule=" + diff_rule(e.rule_id) + ")";
            };
            auto is_obj = [](const bw_event& e, uint64_t d, uint64_t i) {
                return e.layer == BW_LAYER_BPF_LSM && e.obj_kind == BW_OBJ_FILE && e.obj.file.dev == d &&
                       e.obj.file.ino == i;
            };
            if (o.method == M_EXCHANGE) {
                // The first refusal decides, as in the evaluator; with the
                // first move allowed, the second object's event decides.
                const bw_event *first = nullptr, *second = nullptr;
                for (const auto& e : evs) {
                    if (is_obj(e, dev, ino) && !first) first = &e, kernel += describe_event(e);
                    else if (is_obj(e, dev2, ino2) && !second) second = &e, kernel += " second" + describe_event(e);
                }
                const bw_event* decides = first && first->decision == BW_DECISION_ALLOW ? second : first;
                seen = decides ? 1 : 0;
                ok = ok && decides && decides->decision == want_dec && decides->rule_id == o.rule;
            } else {
                for (const auto& e : evs) {
                    if (!is_obj(e, dev, ino)) continue;
                    ++seen;
                    kernel += describe_event(e);
                    ok = ok && e.decision == want_dec && e.rule_id == o.rule;
                }
            }
            ok = ok && seen > 0;
            denied += o.verdict == 1;
            if (ok) continue;
            ++bad;
            std::string repro = "DISAGREEMENT seed=" + std::to_string(corpus->seed) + " policy=" +
                                std::to_string(p.index) + "\n--- rule file\n" + p.text + "--- operation: " +
                                kMethodNames[o.method] + " " + o.path + (o.to == "-" ? "" : " -> " + o.to) +
                                " (judged as " + o.judged + ")\n" +
                                "--- evaluator: " + verdicts[o.verdict] + " rule=" + diff_rule(o.rule) +
                                "\n--- kernel:    " + kernel + "\n";
            size_t at = 0;
            while (at < repro.size()) {
                size_t nl = repro.find('\n', at);
                std::printf("VMTEST-DIFF %s\n", repro.substr(at, nl - at).c_str());
                at = nl == std::string::npos ? repro.size() : nl + 1;
            }
        }
        result(name, bad == 0,
               "ops=" + std::to_string(p.ops.size()) + " denied=" + std::to_string(denied) +
                   " disagreements=" + std::to_string(bad));
        ops_total += p.ops.size();
        denied_total += denied;
        for (const auto& o : p.ops) allowed_total += o.verdict == 0;
        policies_denying += denied > 0;
        (void)M.unbind(leaf.id);
        rmdir(leaf.path.c_str());
        (void)M.free(h->handle.slot);
    }
    // Agreement proves something only where the corpus asks both answers:
    // policies that deny nothing would agree with an LSM that never denies.
    // At least a tenth of the operations are denials and a tenth allows, and
    // most policies deny something.
    const bool mixed = ops_total > 0 && denied_total * 10 >= ops_total && allowed_total * 10 >= ops_total &&
                       policies_denying * 2 >= corpus->policies.size();
    result("diff_corpus_denies", mixed,
           "ops=" + std::to_string(ops_total) + " denied=" + std::to_string(denied_total) + " allowed=" +
               std::to_string(allowed_total) + " policies denying something=" + std::to_string(policies_denying) +
               "/" + std::to_string(corpus->policies.size()));
}


// ---- unix sockets: the LSM socket_connect / socket_sendmsg hooks hold the
// unix rules on this kernel (6.1 has no cgroup connect_unix / sendmsg_unix
// hooks). "Host daemon" sockets are bound by this process outside every
// sandbox; the sandboxed child holds every file right (no files rules), so
// only the unix rules stand between it and them.

sockaddr_un unix_addr(const std::string& name, socklen_t& len) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (name.starts_with("@")) {
        std::memcpy(a.sun_path + 1, name.data() + 1, name.size() - 1);
        len = socklen_t(offsetof(sockaddr_un, sun_path) + name.size());
    } else {
        std::memcpy(a.sun_path, name.data(), name.size());
        len = socklen_t(offsetof(sockaddr_un, sun_path) + name.size() + 1);
    }
    return a;
}

int unix_listen(const std::string& name, int type) {
    socklen_t len;
    sockaddr_un a = unix_addr(name, len);
    if (!name.starts_with("@")) unlink(name.c_str());
    int s = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    if (s < 0 || bind(s, reinterpret_cast<sockaddr*>(&a), len) != 0) return -1;
    if (type != SOCK_DGRAM && listen(s, 64) != 0) return -1;
    return s;
}

// connect (stream, seqpacket, dgram) or an addressed send (dgram): errno, 0 = done
int unix_try(const std::string& name, int type, bool send) {
    socklen_t len;
    sockaddr_un a = unix_addr(name, len);
    int s = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    if (s < 0) return 1000 + errno;
    int rc = send ? err_of(sendto(s, "x", 1, 0, reinterpret_cast<sockaddr*>(&a), len))
                  : err_of(connect(s, reinterpret_cast<sockaddr*>(&a), len));
    close(s);
    return rc;
}

bulwark::policy::BpfUnixEntry unix_rule(const std::string& address, uint32_t ops, uint32_t id) {
    bulwark::policy::BpfUnixEntry e;
    if (address.starts_with("@")) {
        e.key.kind = BW_UNIX_ABSTRACT;
        e.key.name[0] = uint8_t(address.size() - 1);
        std::memcpy(e.key.name + 1, address.data() + 1, address.size() - 1);
        e.key.prefixlen = uint32_t(32 + 8 + 8 * address.size());
    } else {
        e.key.kind = BW_UNIX_PATH;
        std::memcpy(e.key.name, address.data(), address.size());
        e.key.prefixlen = uint32_t(32 + 8 + 8 * (address.size() + (address.ends_with("/") ? 0 : 1)));
    }
    e.value.op_mask = ops;
    e.value.connect_rule_id = ops & BW_NET_CONNECT ? id : BW_NO_RULE;
    e.value.send_rule_id = ops & BW_NET_SEND ? id : BW_NO_RULE;
    e.value.bind_rule_id = ops & BW_NET_BIND ? id : BW_NO_RULE;
    return e;
}

// bind a stream socket to name (a pathname one is removed again); "" is an
// autobind (the family alone: the kernel picks a free abstract name). errno, 0 = bound
int unix_bind(const std::string& name) {
    socklen_t len = socklen_t(offsetof(sockaddr_un, sun_path));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (!name.empty()) a = unix_addr(name, len);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return 1000 + errno;
    int rc = err_of(bind(s, reinterpret_cast<sockaddr*>(&a), len));
    if (rc == 0 && !name.empty() && !name.starts_with("@")) unlink(name.c_str());
    close(s);
    return rc;
}

void run_unix_group(BpfLoader& L, Events& ev) {
    auto& M = L.maps();
    mkdir("/data/sock", 0755);
    mkdir("/data/sock/x", 0755);
    mkdir("/data/sock/ok", 0755);
    mkdir("/data/sock/binds", 0755);
    mkdir("/tmp", 01777);
    struct Listener { const char* name; int type; };
    const Listener listeners[] = {{"/data/sock/host.sock", SOCK_STREAM},  {"/data/sock/seq.sock", SOCK_SEQPACKET},
                                  {"/data/sock/dgram.sock", SOCK_DGRAM},  {"@bulwark-vm-host", SOCK_STREAM},
                                  {"/data/sock/allowed.sock", SOCK_STREAM}, {"@bulwark-vm-ok", SOCK_STREAM},
                                  {"/data/sock/ok/d.sock", SOCK_DGRAM},    {"/data/sock/ok/s.sock", SOCK_STREAM}};
    std::vector<int> fds;
    for (const auto& l : listeners) {
        int fd = unix_listen(l.name, l.type);
        if (fd < 0) {
            result(std::string("unix_listen ") + l.name, false, ename(errno));
            return;
        }
        fds.push_back(fd);
    }
    BpfTables t;
    t.header.flags = BW_POL_UNIX_RULES;
    t.header.af_allow = 1ull << AF_UNIX;
    t.header.sock_type_allow = (1u << SOCK_STREAM) | (1u << SOCK_DGRAM) | (1u << SOCK_SEQPACKET);
    t.unix_sockets = {unix_rule("/data/sock/allowed.sock", BW_NET_CONNECT, 21), unix_rule("@bulwark-vm-ok", BW_NET_CONNECT, 22),
                      unix_rule("/data/sock/ok/", BW_NET_CONNECT | BW_NET_SEND, 23),
                      unix_rule("/data/sock/binds/", BW_NET_BIND, 24), unix_rule("@bulwark-vm-bind-ok", BW_NET_BIND, 25)};
    auto pol = M.load(t);
    if (!pol) {
        result("unix_policy_load", false, pol.error().message());
        return;
    }
    Leaf leaf(L.parent_cgroup(), "unix");
    (void)M.bind(leaf.id, pol->handle);
    struct Case { const char* name; std::string addr; int type; bool send; int want; };
    const Case cases[] = {
        {"unix_stream_connect_unlisted", "/data/sock/host.sock", SOCK_STREAM, false, EPERM},
        {"unix_seqpacket_connect_unlisted", "/data/sock/seq.sock", SOCK_SEQPACKET, false, EPERM},
        {"unix_dgram_connect_unlisted", "/data/sock/dgram.sock", SOCK_DGRAM, false, EPERM},
        {"unix_dgram_send_unlisted", "/data/sock/dgram.sock", SOCK_DGRAM, true, EPERM},
        {"unix_abstract_connect_unlisted", "@bulwark-vm-host", SOCK_STREAM, false, EPERM},
        {"unix_dotdot_out_of_rule", "/data/sock/ok/../host.sock", SOCK_STREAM, false, EPERM},
        {"unix_dotdot_into_rule", "/data/sock/x/../allowed.sock", SOCK_STREAM, false, EPERM},
        {"unix_allowed_path", "/data/sock/allowed.sock", SOCK_STREAM, false, 0},
        {"unix_allowed_abstract", "@bulwark-vm-ok", SOCK_STREAM, false, 0},
        {"unix_allowed_subtree_connect", "/data/sock/ok/s.sock", SOCK_STREAM, false, 0},
        {"unix_allowed_subtree_send", "/data/sock/ok/d.sock", SOCK_DGRAM, true, 0},
    };
    ev.of(leaf.id);
    for (const auto& c : cases) {
        expect(c.name, in(leaf.path, [&] { return unix_try(c.addr, c.type, c.send); }), c.want);
        if (c.want) expect(std::string("control_") + c.name, unix_try(c.addr, c.type, c.send), 0);
    }
    // binds: a bind is a right of its own (socket_bind); every file right is
    // held here, so only the unix rules refuse
    struct BindCase { const char* name; std::string addr; int want; };
    const BindCase binds[] = {
        {"unix_bind_unlisted_path", "/data/sock/x/mine.sock", EPERM},
        {"unix_bind_squat_abstract", "@bulwark-vm-free", EPERM},
        {"unix_bind_connect_rule_is_no_bind_right", "/data/sock/ok/new.sock", EPERM},
        {"unix_bind_connect_rule_abstract", "@bulwark-vm-ok2", EPERM},
        {"unix_bind_dotdot_out_of_rule", "/data/sock/binds/../x/m.sock", EPERM},
        {"unix_bind_relative", "rel.sock", EPERM},
        {"unix_bind_allowed_subtree", "/data/sock/binds/a.sock", 0},
        {"unix_bind_allowed_abstract", "@bulwark-vm-bind-ok", 0},
        {"unix_bind_private_tmp", "/tmp/vm-bind.sock", 0},
        {"unix_autobind", "", 0},
    };
    for (const auto& c : binds) {
        expect(c.name, in(leaf.path, [&] { return unix_bind(c.addr); }), c.want);
        if (c.want) expect(std::string("control_") + c.name, unix_bind(c.addr), 0);
    }
    {
        auto e = ev.of(leaf.id);
        bool deny = false, bind_deny = false;
        for (const auto& x : e) {
            if (x.layer != BW_LAYER_BPF_LSM || x.obj_kind != BW_OBJ_UNIX) continue;
            deny |= x.decision == BW_DECISION_DENY && x.op == BW_OP_CONNECT && x.obj.unx.kind == BW_UNIX_PATH &&
                    std::string(x.obj.unx.name, x.obj.unx.len) == "/data/sock/host.sock";
            bind_deny |= x.decision == BW_DECISION_DENY && x.op == BW_OP_BIND && x.obj.unx.kind == BW_UNIX_ABSTRACT &&
                         std::string(x.obj.unx.name, x.obj.unx.len) == "bulwark-vm-free";
        }
        result("unix_denied_event", deny, "events=" + std::to_string(e.size()));
        result("unix_bind_denied_event", bind_deny, "events=" + std::to_string(e.size()));
    }
    expect("unix_socketpair_unnamed", in(leaf.path, [] {
               int sv[2];
               if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return errno;
               close(sv[0]);
               close(sv[1]);
               return 0;
           }), 0);
    // A policy without unix rules refuses every named socket.
    BpfTables none = t;
    none.header.flags = 0;
    none.unix_sockets.clear();
    if (auto np = M.load(none)) {
        (void)M.bind(leaf.id, np->handle);
        expect("unix_no_rules_refuses_all", in(leaf.path, [] { return unix_try("/data/sock/allowed.sock", SOCK_STREAM, false); }), EPERM);
        (void)M.unbind(leaf.id);
        (void)M.free(np->handle.slot);
    }
    (void)M.unbind(leaf.id);
    rmdir(leaf.path.c_str());
    (void)M.free(pol->handle.slot);
    for (int fd : fds) close(fd);
}

// ---- benchmark mode (vm_runner --bench; run_vm.sh with BULWARK_VM_BENCH=1)
// open/close loop of one file under a 1,000-rule file policy vs no BPF LSM
// program at all, in one boot, conditions interleaved round by round (the
// order rotates): nothing at file_open; an LSM program there that allows at
// once (the floor of any program at that hook); Bulwark's bw_file_open with the
// task in a sandbox leaf bound to the policy; the same with the task outside
// the sandbox parent. Each round attaches its program and detaches it after.
// The maps and the policy come from the real loader (socket programs only, so
// that nothing else sits at file_open) and bw_file_open is Bulwark's own,
// loaded from the same object against those pinned maps.
// A fifth condition runs the same policy with its bw_file_bloom saturated
// (every ancestor looked up, as without the bloom), and the kernel's run-time
// statistics give each program's own time per call.
// Everything runs under qemu TCG, which emulates every instruction: the
// programs' share of an open() is not what it is on hardware.
// Prints "VMBENCH ..." lines.

constexpr int kBenchRounds = 21, kBenchOps = 1000;
constexpr const char* kBenchFile = "/data/bench/a/b/c/f";

// ns per open+close, measured in a child placed in cgroup cg; -1 on error.
double open_close_round(const std::string& cg) {
    auto* out = shared<double>();
    int rc = in(cg, [&] {
        uint64_t t0 = bwbench::now_ns();
        for (int i = 0; i < kBenchOps; ++i) {
            int fd = open(kBenchFile, O_RDONLY | O_CLOEXEC);
            if (fd < 0) return errno;
            close(fd);
        }
        *out = double(bwbench::now_ns() - t0) / kBenchOps;
        return 0;
    });
    double v = rc == 0 ? *out : -1;
    munmap(out, sizeof(double));
    return v;
}

int bench_error(const std::string& what) {
    std::printf("VMBENCH-ERROR %s\n", what.c_str());
    std::fflush(stdout);
    return 1;
}

int run_bench() {
    for (const char* d : {"/data", "/data/bench", "/data/bench/a", "/data/bench/a/b", "/data/bench/a/b/c", "/data/bench/r"})
        mkdir(d, 0755);
    write_file(kBenchFile, "bench");
    write_file("/data/bench/unlisted", "no rule covers this file");
    BpfTables t;
    t.header.flags = BW_POL_FILES_ENFORCED;
    for (int i = 0; i < 999; ++i) {  // 999 unrelated rule directories + the one the loop reads below
        std::string d = "/data/bench/r/" + std::to_string(i);
        mkdir(d.c_str(), 0755);
        t.files.push_back(rule(d, BW_FS_READ, 0, uint32_t(i)));
    }
    t.files.push_back(rule("/data/bench/a", BW_FS_READ, 0, 999));
    const std::string outside = "/sys/fs/cgroup/bench-outside";
    mkdir(outside.c_str(), 0700);

    const std::string pin = "/sys/fs/bpf/bulwark-bench", parent = "/sys/fs/cgroup/bulwark-bench";
    LoaderOptions o = own_loader(pin, parent);
    o.lsm = false;
    auto l = BpfLoader::start(o);
    if (!l) return bench_error("loader: " + l.error().message());
    auto h = (*l)->maps().load(t);
    if (!h) return bench_error("policy load: " + h.error().message());
    Leaf leaf(parent, "leaf");
    if (!(*l)->maps().bind(leaf.id, h->handle)) return bench_error("bind");
    // The same policy in a second slot whose bw_file_bloom is saturated (every
    // bit set): every ancestor is looked up, as without the bloom.
    auto h_full = (*l)->maps().load(t);
    if (!h_full) return bench_error("policy load: " + h_full.error().message());
    Leaf leaf_full(parent, "leaf-no-bloom");
    if (!(*l)->maps().bind(leaf_full.id, h_full->handle)) return bench_error("bind");
    {
        int bloom_fd = bpf_obj_get((pin + "/bw_file_bloom").c_str());
        auto all = std::make_unique<bw_file_bloom>();
        std::memset(all.get(), 0xff, sizeof *all);
        uint32_t slot = h_full->handle.slot;
        if (bloom_fd < 0 || bpf_map_update_elem(bloom_fd, &slot, all.get(), BPF_ANY) != 0)
            return bench_error(std::string("saturate the bloom: ") + std::strerror(errno));
        close(bloom_fd);
    }

    LIBBPF_OPTS(bpf_object_open_opts, oo, .pin_root_path = pin.c_str());
    std::unique_ptr<lsm, void (*)(lsm*)> bw(lsm__open_opts(&oo), lsm__destroy);
    if (!bw) return bench_error("open lsm object");
    bw->rodata->bw_root_cgid = (*l)->parent_cgroup_id();
    bw->rodata->bw_root_level = 1;  // /sys/fs/cgroup/bulwark-bench
    bpf_program* p;
    bpf_object__for_each_program(p, bw->obj) bpf_program__set_autoload(p, p == bw->progs.bw_file_open);
    if (lsm__load(bw.get()) != 0) return bench_error(std::string("load bw_file_open: ") + std::strerror(errno));
    std::unique_ptr<empty_lsm, void (*)(empty_lsm*)> empty(empty_lsm__open_and_load(), empty_lsm__destroy);
    if (!empty) return bench_error(std::string("load the empty program: ") + std::strerror(errno));

    struct Cond {
        const char* name;
        bpf_program* prog;
        std::string cg;
        std::vector<double> v, prog_ns;  // ns per open+close; the program's own run time per call
    };
    std::vector<Cond> conds = {{"nothing at file_open", nullptr, leaf.path, {}, {}},
                               {"empty LSM program (the floor)", empty->progs.bw_bench_empty_file_open, leaf.path, {}, {}},
                               {"bw_file_open, task outside sandboxes", bw->progs.bw_file_open, outside, {}, {}},
                               {"bw_file_open, 1,000-rule file policy", bw->progs.bw_file_open, leaf.path, {}, {}},
                               {"the same, bloom saturated (no skips)", bw->progs.bw_file_open, leaf_full.path, {}, {}}};
    // the kernel's per-program run time (BPF_ENABLE_STATS), read around each round
    int stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
    auto run_time = [](bpf_program* p) {
        bpf_prog_info info{};
        uint32_t len = sizeof info;
        if (!p || bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len) != 0) return std::pair<uint64_t, uint64_t>{0, 0};
        return std::pair<uint64_t, uint64_t>{info.run_time_ns, info.run_cnt};
    };
    {  // the policy must really judge the loop's file: one outside every rule is denied
        bpf_link* k = bpf_program__attach_lsm(bw->progs.bw_file_open);
        int e = k ? in(leaf.path, [] { return open_err("/data/bench/unlisted", O_RDONLY); }) : -1;
        bpf_link__destroy(k);
        if (e != EPERM) return bench_error("bw_file_open does not deny outside the policy's rules (got " + ename(e) + ")");
    }
    for (int r = 0; r < kBenchRounds; ++r)
        for (size_t k = 0; k < conds.size(); ++k) {
            Cond& c = conds[(k + size_t(r)) % conds.size()];
            bpf_link* link = c.prog ? bpf_program__attach_lsm(c.prog) : nullptr;
            if (c.prog && !link) return bench_error(std::string("attach: ") + std::strerror(errno));
            auto s0 = run_time(c.prog);
            double v = open_close_round(c.cg);
            auto s1 = run_time(c.prog);
            bpf_link__destroy(link);
            if (v < 0) return bench_error(std::string("open failed: ") + c.name);
            c.v.push_back(v);
            if (s1.second > s0.second) c.prog_ns.push_back(double(s1.first - s0.first) / double(s1.second - s0.second));
        }
    if (stats_fd >= 0) close(stats_fd);
    (void)(*l)->maps().unbind(leaf.id);
    (void)(*l)->maps().unbind(leaf_full.id);
    rmdir(leaf.path.c_str());
    rmdir(leaf_full.path.c_str());

    // Ratios are medians of per-round ratios: the conditions of one round run
    // back to back, so the host's changing load (TCG runs as fast as the host
    // lets it) cancels out of each.
    auto ratio = [&](size_t num, size_t den) {
        std::vector<double> r;
        for (size_t i = 0; i < conds[num].v.size() && i < conds[den].v.size(); ++i) r.push_back(conds[num].v[i] / conds[den].v[i]);
        return bwbench::pct(r, 50);
    };
    std::printf("VMBENCH open/close loop (qemu TCG), %d interleaved rounds x %d ops\n", kBenchRounds, kBenchOps);
    for (size_t i = 0; i < conds.size(); ++i) {
        const Cond& c = conds[i];
        std::printf("VMBENCH   %-38s median %6.0f ns/op (%.3fx)%s\n", c.name, bwbench::pct(c.v, 50), ratio(i, 0),
                    c.prog_ns.empty() ? "" : (", the program itself " + std::to_string(long(bwbench::pct(c.prog_ns, 50))) + " ns a call").c_str());
    }
    std::printf("VMBENCH   ratio policy / none %.3fx   target <= 1.15x (TCG inflates the programs' share)\n", ratio(3, 0));
    std::printf("VMBENCH   ratio policy / empty program %.3fx (Bulwark's own work above the floor)\n", ratio(3, 1));
    std::printf("VMBENCH-DONE\n");
    std::fflush(stdout);
    return 0;
}

// ---- foreign system call ABIs (seccomp): the compiled filters of a
// native-only policy and of one with `architectures: [native, i386]`,
// written by run_vm.sh with the host's policyc as raw sock_filter arrays.
// This stock kernel runs i386 calls from a 64-bit process (IA32 emulation).
long int80(long nr, long a = 0, long b = 0, long c = 0) {
    long ret;
    asm volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory", "r8", "r9", "r10", "r11");
    return ret;
}

std::optional<std::vector<sock_filter>> read_program(const char* path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    std::vector<sock_filter> prog(BPF_MAXINSNS + 1);
    ssize_t n = read(fd, prog.data(), prog.size() * sizeof(sock_filter));
    close(fd);
    if (n <= 0 || size_t(n) % sizeof(sock_filter) != 0 || size_t(n) > BPF_MAXINSNS * sizeof(sock_filter)) return std::nullopt;
    prog.resize(size_t(n) / sizeof(sock_filter));
    return prog;
}

// In a child: the filter installed (no_new_privs first), then fn; its exit
// status is fn's result (0: as expected).
int under_filter(const std::vector<sock_filter>* prog, const std::function<int()>& fn) {
    pid_t pid = fork();
    if (pid == 0) {
        if (prog) {
            sock_fprog fp{static_cast<unsigned short>(prog->size()), const_cast<sock_filter*>(prog->data())};
            if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(120);
            if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) != 0) _exit(121);
        }
        _exit(fn());
    }
    return wait_exit(pid);
}

void run_abi_group() {
    auto native = read_program("/seccomp-native.bpf");
    auto i386 = read_program("/seccomp-i386.bpf");
    if (!native || !i386) {
        result("abi_programs", false, "no /seccomp-native.bpf or /seccomp-i386.bpf in the initramfs");
        return;
    }
    char* low = static_cast<char*>(
        mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_32BIT, -1, 0));
    if (low == MAP_FAILED) {
        result("abi_low_buffer", false, "mmap(MAP_32BIT): " + ename(errno));
        return;
    }
    std::strcpy(low, "/data/ro/f");  // int $0x80 passes 32-bit pointers
    auto getpid32 = [] { return int80(20) == getpid() ? 0 : int(-int80(20)) & 0xff; };
    auto open32 = [low] {
        long fd = int80(5, reinterpret_cast<long>(low), O_RDONLY);
        if (fd < 0) return int(-fd) & 0xff;
        close(int(fd));
        return 0;
    };
    // Controls: unconfined, both i386 calls work.
    expect("abi_i386_getpid_control", under_filter(nullptr, getpid32), 0);
    expect("abi_i386_open_control", under_filter(nullptr, open32), 0);
    // Native only (the default): the violation errno (EPERM), while the
    // native getpid the rules allow works.
    expect("abi_i386_getpid_refused", under_filter(&*native, getpid32), EPERM);
    expect("abi_i386_open_refused", under_filter(&*native, open32), EPERM);
    expect("abi_native_getpid_allowed", under_filter(&*native, [] { return syscall(SYS_getpid) == getpid() ? 0 : 1; }), 0);
    // i386 accepted: judged by the same rules, allowed.
    expect("abi_i386_getpid_accepted", under_filter(&*i386, getpid32), 0);
    expect("abi_i386_open_accepted", under_filter(&*i386, open32), 0);
    munmap(low, 4096);
}

}  // namespace

int main(int argc, char** argv) {
    spdlog::set_level(spdlog::level::warn);
    if (argc > 1 && std::string(argv[1]) == "--bench") return run_bench();
    setup_files();
    run_abi_group();  // before the LSM programs load: seccomp alone decides
    std::printf("VMTEST-INFO kernel facts: lsm=%s\n", probe_host().lsm_list.c_str());
    LoaderOptions o;
    o.cgroup_parent = "/sys/fs/cgroup/bulwark";
    auto started = BpfLoader::start(o);
    if (!started) {
        result("loader_start", false, started.error().message());
        std::printf("VMTEST-SUMMARY pass=%d fail=%d\n", g_pass, g_fail);
        return 1;
    }
    BpfLoader& L = **started;
    for (const auto& p : L.programs()) std::printf("VMTEST-INFO %s\n", p.line().c_str());
    for (const char* s : {"lsm/file_open", "lsm/path_mkdir", "lsm/bpf", "lsm/task_kill", "lsm/socket_create",
                          "lsm/socket_connect", "lsm/socket_bind", "lsm/socket_sendmsg", "lsm/bprm_check_security"}) {
        auto* p = L.program(s);
        result(std::string("truth_") + s, p && p->state == ProgState::Enforcing, p ? p->line() : "missing");
    }
    // every program this kernel loaded is proven by its canary: none is left
    // attached but unproven (an earlier hook refusing its canary first)
    {
        std::string unproven;
        for (const auto& p : L.programs())
            if (p.state == ProgState::Attached) unproven += p.line() + "; ";
        result("truth_every_loaded_program", unproven.empty(), unproven);
    }
    size_t lsm_loaded = 0, lsm_total = 0;
    for (const auto& p : L.programs())
        if (p.object == "lsm") {
            ++lsm_total;
            lsm_loaded += p.state != ProgState::Unavailable;
        }
    result("lsm_all_loaded", lsm_loaded == lsm_total,
           std::to_string(lsm_loaded) + "/" + std::to_string(lsm_total) + " attached");

    Events ev;
    ev.reader = std::move(RingbufReader::create(L.maps().events_fd(), [&](const bw_event& e) { ev.all.push_back(e); }).value());
    auto& M = L.maps();
    const std::string parent = L.parent_cgroup();

    auto pol = M.load(files_policy(false));
    auto pol_secret = M.load(files_policy(true));
    if (!pol || !pol_secret) {
        result("policy_load", false, (!pol ? pol.error() : pol_secret.error()).message());
        std::printf("VMTEST-SUMMARY pass=%d fail=%d\n", g_pass, g_fail);
        return 1;
    }
    Leaf leaf(parent, "files");
    (void)M.bind(leaf.id, pol->handle);

    // ---- a run's first binding (BW_BIND_SETUP): the sandbox's own setup goes
    // through until the tool's exec, which is judged and arms the binding.
    {
        Leaf setup(parent, "setup");
        (void)M.bind(setup.id, pol->handle, 0, 0, BW_BIND_SETUP);
        expect("setup_lets_own_code_through", in(setup.path, [] { return open_err("/data/secret/f", O_RDONLY); }), 0);
        expect("setup_exec_still_judged", in(setup.path, [] { return exec_err("/data/bin/prog"); }), EPERM);
        auto still = M.binding(setup.id);
        result("setup_denied_exec_does_not_arm", still && (still->flags & BW_BIND_SETUP),
               still ? "flags=" + std::to_string(still->flags) : "no binding");
        expect("setup_exec_allowed", in(setup.path, [] { return exec_err("/bin/busybox"); }), 0);
        auto armed = M.binding(setup.id);
        result("setup_armed_by_exec", armed && !(armed->flags & BW_BIND_SETUP),
               armed ? "flags=" + std::to_string(armed->flags) : "no binding");
        expect("armed_denies", in(setup.path, [] { return open_err("/data/secret/f", O_RDONLY); }), EPERM);
        (void)M.unbind(setup.id);
    }

    // ---- files
    expect("allowed_read", in(leaf.path, [] { return open_err("/data/ro/f", O_RDONLY); }), 0);
    expect("denied_read_unlisted", in(leaf.path, [] { return open_err("/data/secret/f", O_RDONLY); }), EPERM);
    ev.of(leaf.id);
    expect("denied_read_nested_deny", in(leaf.path, [] { return open_err("/data/ro/deny/f", O_RDONLY); }), EPERM);
    {
        auto e = ev.of(leaf.id);
        result("denied_read_event", e.size() == 1 && e[0].layer == BW_LAYER_BPF_LSM && e[0].op == BW_OP_FILE_OPEN &&
                                        e[0].rule_id == 2 && e[0].decision == BW_DECISION_DENY &&
                                        std::string(e[0].obj.file.path) == "f" && e[0].obj.file.rights == BW_FS_READ,
               "events=" + std::to_string(e.size()) + (e.empty() ? "" : " rule=" + std::to_string(e[0].rule_id)));
    }
    expect("denied_write_ro_subtree", in(leaf.path, [] { return open_err("/data/ro/f", O_WRONLY); }), EPERM);
    expect("denied_truncate_ro", in(leaf.path, [] { return err_of(truncate("/data/ro/f", 0)); }), EPERM);
    expect("denied_create_ro", in(leaf.path, [] { return open_err("/data/ro/new", O_WRONLY | O_CREAT); }), EPERM);
    expect("denied_mkdir_ro", in(leaf.path, [] { return err_of(mkdir("/data/ro/d", 0700)); }), EPERM);
    expect("allowed_create_rw", in(leaf.path, [] { return open_err("/data/rw/new", O_WRONLY | O_CREAT); }), 0);
    expect("denied_unlink_ro", in(leaf.path, [] { return err_of(unlink("/data/ro/g")); }), EPERM);
    expect("chmod_rw_allowed", in(leaf.path, [] { return err_of(chmod("/data/rw/new", 0640)); }), 0);
    expect("chmod_setuid_denied", in(leaf.path, [] { return err_of(chmod("/data/rw/new", 04755)); }), EPERM);
    expect("chmod_ro_denied", in(leaf.path, [] { return err_of(chmod("/data/ro/g", 0600)); }), EPERM);
    expect("chown_ro_denied", in(leaf.path, [] { return err_of(chown("/data/ro/g", 1, 1)); }), EPERM);
    expect("dotdot_same_verdict_allow", in(leaf.path, [] { return open_err("/data/rw/../ro/./f", O_RDONLY); }), 0);
    expect("dotdot_same_verdict_deny", in(leaf.path, [] { return open_err("/data/ro/../secret//f", O_RDONLY); }), EPERM);
    expect("bind_alias_denied", in(leaf.path, [] { return open_err("/data/rw/alias/f", O_RDONLY); }), EPERM);
    expect("rename_out_of_subtree", in(leaf.path, [] { return err_of(rename("/data/ro/f", "/data/rw/f")); }), EPERM);
    expect("rename_gains_write", in(leaf.path, [] { return err_of(rename("/data/mv/f", "/data/rw/f2")); }), EPERM);
    expect("rename_within_rw", in(leaf.path, [] { return err_of(rename("/data/rw/a", "/data/rw/b")); }), 0);
    expect("hardlink_across_boundary", in(leaf.path, [] { return err_of(link("/data/mv/g", "/data/rw/lnk")); }), EPERM);
    expect("hardlink_within_rw", in(leaf.path, [] { return err_of(link("/data/rw/b", "/data/rw/c")); }), 0);
    expect("rename_exchange_across", in(leaf.path, [] {
               return err_of(syscall(SYS_renameat2, AT_FDCWD, "/data/rw/c", AT_FDCWD, "/data/mv/g", 2 /* RENAME_EXCHANGE */));
           }), EPERM);

    {
        std::string deep = "/data/rw";
        for (int i = 0; i < BW_PATH_WALK_MAX + 4; ++i) {
            deep += "/d";
            mkdir(deep.c_str(), 0755);
        }
        write_file(deep + "/f", "deep");
        auto before = M.stats();
        expect("walk_too_deep_denied", in(leaf.path, [&] { return open_err((deep + "/f").c_str(), O_RDONLY); }), EPERM);
        auto after = M.stats();
        result("walk_too_deep_counted", before && after && after->walk_too_deep > before->walk_too_deep,
               after ? "walk_too_deep=" + std::to_string(after->walk_too_deep) : "no stats");
    }

    // ---- code execution
    expect("exec_allowed", in(leaf.path, [] { return exec_err("/bin/busybox"); }), 0);
    expect("exec_denied", in(leaf.path, [] { return exec_err("/data/bin/prog"); }), EPERM);
    expect("exec_memfd_denied", in(leaf.path, [] { return memfd_exec_err(); }), EPERM);
    expect("mmap_exec_denied", in(leaf.path, [] {
               int fd = open("/data/ro/f", O_RDONLY | O_CLOEXEC);
               if (fd < 0) return 1000 + errno;
               void* p = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
               return p == MAP_FAILED ? errno : 0;
           }), EPERM);
    expect("mprotect_exec_denied", in(leaf.path, [] {
               int fd = open("/data/ro/f", O_RDONLY | O_CLOEXEC);
               if (fd < 0) return 1000 + errno;
               void* p = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
               if (p == MAP_FAILED) return 2000 + errno;
               return err_of(mprotect(p, 4096, PROT_READ | PROT_EXEC));
           }), EPERM);

    // ---- other processes, mounts, bpf(), sockets
    expect("kill_outside_denied", in(leaf.path, [] { return err_of(kill(1, 0)); }), EPERM);
    expect("kill_own_sandbox_allowed", in(leaf.path, [] { return err_of(kill(getpid(), 0)); }), 0);
    expect("mount_denied", in(leaf.path, [] { return err_of(mount("none", "/data/rw", "tmpfs", 0, nullptr)); }), EPERM);
    expect("bpf_denied", in(leaf.path, [] {
               union bpf_attr a;
               std::memset(&a, 0, sizeof a);
               a.map_type = BPF_MAP_TYPE_ARRAY;
               a.key_size = a.value_size = 4;
               a.max_entries = 1;
               return err_of(syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof a));
           }), EPERM);
    expect("af_packet_denied", in(leaf.path, [] { return err_of(socket(AF_PACKET, SOCK_RAW, 0)); }), EPERM);
    // network.netlink: the family listed, only NETLINK_ROUTE among its protocols
    {
        auto nl_socket = [](int protocol) {
            return [protocol] {
                int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol);
                if (s < 0) return errno;
                close(s);
                return 0;
            };
        };
        BpfTables t = files_policy(false);
        t.header.af_allow |= 1ull << AF_NETLINK;
        t.header.sock_type_allow |= 1u << SOCK_RAW;
        t.header.flags |= BW_POL_NETLINK_LIST;
        t.header.netlink_allow = 1u << NETLINK_ROUTE;
        auto listed = M.load(t);
        t.header.flags &= ~BW_POL_NETLINK_LIST;  // a policy with the family and no list: every protocol
        auto open = M.load(t);
        if (!listed || !open) {
            result("netlink_policy_load", false, (!listed ? listed.error() : open.error()).message());
        } else {
            Leaf nl(parent, "netlink");
            (void)M.bind(nl.id, listed->handle);
            ev.of(nl.id);
            expect("netlink_route_allowed", in(nl.path, nl_socket(NETLINK_ROUTE)), 0);
            expect("netlink_audit_denied", in(nl.path, nl_socket(NETLINK_AUDIT)), EPERM);
            expect("netlink_sock_diag_denied", in(nl.path, nl_socket(NETLINK_SOCK_DIAG)), EPERM);
            expect("netlink_protocol_past_32_denied", in(nl.path, nl_socket(40)), EPERM);
            {
                auto e = ev.of(nl.id);
                result("netlink_denied_event", has_event(e, BW_LAYER_BPF_LSM, BW_OP_SOCK_CREATE, BW_DECISION_DENY),
                       "events=" + std::to_string(e.size()));
            }
            Leaf nl_open(parent, "netlink-open");
            (void)M.bind(nl_open.id, open->handle);
            expect("netlink_no_list_audit_allowed", in(nl_open.path, nl_socket(NETLINK_AUDIT)), 0);
            (void)M.unbind(nl_open.id);
            (void)M.unbind(nl.id);
            // Unconfined, the same sockets open (the kernel itself refuses a protocol past its 32).
            expect("control_netlink_audit_unconfined", nl_socket(NETLINK_AUDIT)(), 0);
            expect("control_netlink_sock_diag_unconfined", nl_socket(NETLINK_SOCK_DIAG)(), 0);
            expect("control_netlink_protocol_past_32_unconfined", nl_socket(40)(), EPROTONOSUPPORT);
        }
        if (listed) (void)M.free(listed->handle.slot);
        if (open) (void)M.free(open->handle.slot);
    }
    ev.of(leaf.id);
    expect("connect_denied_lsm", in(leaf.path, [] {
               int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
               sockaddr_in a{};
               a.sin_family = AF_INET;
               a.sin_port = htons(9);
               a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
               return err_of(connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a));
           }), EPERM);
    {
        auto e = ev.of(leaf.id);
        result("connect_denied_lsm_event", has_event(e, BW_LAYER_BPF_LSM, BW_OP_CONNECT, BW_DECISION_DENY),
               "events=" + std::to_string(e.size()));
    }

    // ---- controls: unconfined, the same probes really do the thing
    expect("control_read_unconfined", open_err("/data/secret/f", O_RDONLY), 0);
    expect("control_exec_unconfined", exec_err("/data/bin/prog"), 0);
    expect("control_memfd_exec_unconfined", memfd_exec_err(), 0);
    expect("control_af_packet_unconfined", [] {
        int s = socket(AF_PACKET, SOCK_RAW, 0);
        if (s < 0) return errno;
        close(s);
        return 0;
    }(), 0);
    expect("control_link_unconfined", err_of(link("/data/mv/g", "/data/rw/lnk-control")), 0);
    expect("control_chmod_setuid_unconfined", err_of(chmod("/data/rw/new", 04755)), 0);

    // ---- audit mode
    {
        auto audit = M.load(files_policy(false, BW_MODE_AUDIT));
        Leaf al(parent, "audit");
        (void)M.bind(al.id, audit->handle);
        expect("audit_allows", in(al.path, [] { return open_err("/data/secret/f", O_RDONLY); }), 0);
        auto e = ev.of(al.id);
        result("audit_reports_audit", has_event(e, BW_LAYER_BPF_LSM, BW_OP_FILE_OPEN, BW_DECISION_AUDIT),
               "events=" + std::to_string(e.size()));
        (void)M.unbind(al.id);
        (void)M.free(audit->handle.slot);
    }

    // ---- a deny on a path absent at load: nothing to hold where the policy
    // refuses every new name in its nearest directory; anywhere a name may
    // appear (create granted, or audit mode) the load fails, as before.
    {
        auto with_absent = [](const std::string& path, uint32_t mode) {
            auto t = files_policy(false, mode);
            t.files.push_back(rule(path, 0, BW_FS_READ, 8));
            return t;
        };
        auto held = M.load(with_absent("/data/ro/absent/key", BW_MODE_ENFORCE));
        result("absent_deny_without_create_loads", held && held->absent_denies.size() == 1,
               held ? (held->absent_denies.empty() ? std::string("not reported") : held->absent_denies[0])
                    : held.error().message());
        if (held) {
            Leaf al(parent, "absent");
            (void)M.bind(al.id, held->handle);
            mkdir("/data/rw/carry", 0755);
            expect("absent_deny_path_cannot_be_made",
                   in(al.path, [] { return err_of(mkdir("/data/ro/absent", 0700)); }), EPERM);
            expect("absent_deny_rename_cannot_bring_it",
                   in(al.path, [] { return err_of(rename("/data/rw/carry", "/data/ro/absent")); }), EPERM);
            (void)M.unbind(al.id);
            (void)M.free(held->handle.slot);
        }
        auto creatable = M.load(with_absent("/data/rw/absent/key", BW_MODE_ENFORCE));
        result("absent_deny_where_create_granted_fails_load", !creatable && creatable.error().err == ENOENT,
               creatable ? "loaded" : creatable.error().message());
        auto audit = M.load(with_absent("/data/ro/absent/key", BW_MODE_AUDIT));
        result("absent_deny_in_audit_mode_fails_load", !audit && audit.error().err == ENOENT,
               audit ? "loaded" : audit.error().message());
        if (creatable) (void)M.free(creatable->handle.slot);
        if (audit) (void)M.free(audit->handle.slot);
        // control: unconfined, the directory can be made
        expect("control_absent_mkdir_unconfined", err_of(mkdir("/data/ro/absent", 0700)), 0);
        rmdir("/data/ro/absent");
    }

    // ---- subtask switch: takes effect on the next operation
    {
        Leaf sl(parent, "switch");
        (void)M.bind(sl.id, pol_secret->handle);
        int go[2], back[2];
        (void)!pipe(go);
        (void)!pipe(back);
        pid_t c = spawn_in(sl.path, [&] {
            char b;
            for (int i = 0; i < 3; ++i) {
                if (read(go[0], &b, 1) != 1) return 1;
                int r = open_err("/data/secret/f", O_RDONLY);
                if (write(back[1], &r, sizeof r) != sizeof r) return 2;
            }
            return 0;
        });
        int r[3];
        for (int i = 0; i < 3; ++i) {
            (void)M.bind(sl.id, i == 1 ? pol->handle : pol_secret->handle);  // one map write
            (void)!write(go[1], "x", 1);
            (void)!read(back[0], &r[i], sizeof r[i]);
        }
        wait_exit(c);
        result("subtask_switch_next_op", r[0] == 0 && r[1] == EPERM && r[2] == 0,
               "results=" + ename(r[0]) + "," + ename(r[1]) + "," + ename(r[2]));
    }

    // ---- unix sockets: connect and addressed send against the unix rules
    run_unix_group(L, ev);

    // ---- differential: random policies and operations against the reference evaluator
    run_diff_group(L, ev, "/diff.corpus");

    // ---- pinned enforcement survives the loader exiting
    {
        const std::string pin = "/sys/fs/bpf/bulwark-pin", pparent = "/sys/fs/cgroup/bulwark-pin";
        auto* leaf_id = shared<uint64_t>();
        pid_t loader_proc = fork();
        if (loader_proc == 0) {
            LoaderOptions po = own_loader(pin, pparent);
            po.sock = false;
            auto l = BpfLoader::start(po);
            if (!l) _exit(1);
            BpfTables t;
            t.header.flags = BW_POL_FILES_ENFORCED;
            auto h = (*l)->maps().load(t);
            Leaf pl(pparent, "leaf");
            *leaf_id = pl.id;
            if (!h || !(*l)->maps().bind(pl.id, h->handle)) _exit(2);
            _exit(0);  // the loader process is gone
        }
        int lrc = wait_exit(loader_proc);
        expect("pinned_loader_exited", lrc, 0);
        expect("pinned_enforcement_survives", in(pparent + "/leaf", [] { return open_err("/data/ro/f", O_RDONLY); }), EPERM);
        LoaderOptions po = own_loader(pin, pparent);
        po.sock = false;
        auto again = BpfLoader::start(po);
        bool adopted = again.has_value();
        if (again)
            for (const auto& p : (*again)->programs()) adopted = adopted && p.adopted;
        result("pinned_readopted", adopted, again ? "programs=" + std::to_string((*again)->programs().size()) : again.error().message());
        again = std::unexpected(bulwark::SysError{});
        (void)BpfLoader::unpin_all(pin);
        expect("unpinned_released", in(pparent + "/leaf", [] { return open_err("/data/ro/f", O_RDONLY); }), 0);
    }

    auto st = M.stats();
    if (st)
        std::printf("VMTEST-INFO stats events=%llu reserve_failures=%llu deny=%llu walk_too_deep=%llu\n",
                    (unsigned long long)st->events_emitted, (unsigned long long)st->ringbuf_reserve_failures,
                    (unsigned long long)st->decisions[BW_DECISION_DENY], (unsigned long long)st->walk_too_deep);
    std::printf("VMTEST-SUMMARY pass=%d fail=%d\n", g_pass, g_fail);
    std::fflush(stdout);
    return g_fail == 0 ? 0 : 1;
}
