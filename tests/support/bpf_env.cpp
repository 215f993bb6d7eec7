#include "bpf_env.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace bwtest {

Env& Env::get() {
    static Env env;
    return env;
}

Env::Env() {
    pin_root = "/sys/fs/bpf/bulwark-it-" + std::to_string(getpid());
    auto mnt = bulwark::cgroup2_mount();
    auto own = bulwark::own_cgroup2_path();
    if (!mnt || !own) throw std::runtime_error("no cgroup v2");
    parent = *mnt + (*own == "/" ? "" : *own) + "/bulwark-it-" + std::to_string(getpid());
    bulwark::bpf::LoaderOptions o;
    o.pin_root = pin_root;
    o.cgroup_parent = parent;
    o.trace_syscalls = true;
    auto l = BpfLoader::start(o);
    if (!l) throw std::runtime_error("loader: " + l.error().message());
    loader_ = std::move(*l);
    auto r = bulwark::bpf::RingbufReader::create(maps().events_fd(), [this](const bw_event& e) { pending_.push_back(e); });
    if (!r) throw std::runtime_error("reader: " + r.error().message());
    reader_ = std::move(*r);
}

Env::~Env() {
    reader_.reset();
    loader_.reset();
    (void)BpfLoader::unpin_all(pin_root);
    ::rmdir(parent.c_str());
}

std::vector<bw_event> Env::drain() {
    (void)reader_->consume();
    return std::exchange(pending_, {});
}

std::vector<bw_event> Env::events_of(uint64_t cgid) {
    (void)reader_->consume();
    std::vector<bw_event> mine, rest;
    for (const auto& e : pending_) (e.cgroup_id == cgid ? mine : rest).push_back(e);
    pending_ = std::move(rest);
    return mine;
}

Leaf::Leaf(const std::string& name) : Leaf(Env::get().parent, name) {}

Leaf::Leaf(const std::string& parent_dir, const std::string& name) {
    path = parent_dir + "/" + name;
    ::rmdir(path.c_str());
    if (::mkdir(path.c_str(), 0700) != 0) throw std::runtime_error("mkdir " + path + ": " + strerror(errno));
    auto id_or = bulwark::bpf::cgroup_id(path);
    if (!id_or) throw std::runtime_error(id_or.error().message());
    id = *id_or;
}

Leaf::~Leaf() {
    (void)Env::get().maps().unbind(id);
    ::rmdir(path.c_str());
}

pid_t spawn_in(const std::string& cgroup_path, const std::function<int()>& fn) {
    int procs = ::open((cgroup_path + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (procs < 0) throw std::runtime_error("open cgroup.procs: " + std::string(strerror(errno)));
    pid_t pid = fork();
    if (pid == 0) {
        if (write(procs, "0", 1) != 1) _exit(120);
        close(procs);
        _exit(fn());
    }
    close(procs);
    return pid;
}

int wait_exit(pid_t pid) {
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int run_in(const std::string& cgroup_path, const std::function<int()>& fn) {
    return wait_exit(spawn_in(cgroup_path, fn));
}

BpfTables net_policy(uint32_t flags, uint32_t mode) {
    BpfTables t;
    t.header.mode = mode;
    t.header.flags = flags;
    t.header.af_allow = (1ull << AF_INET) | (1ull << AF_INET6) | (1ull << AF_UNIX);
    t.header.sock_type_allow = (1u << SOCK_STREAM) | (1u << SOCK_DGRAM);
    return t;
}

void v6_of(const std::string& ip, uint8_t out[16]) {
    std::memset(out, 0, 16);
    in_addr a4{};
    if (inet_pton(AF_INET, ip.c_str(), &a4) == 1) {
        out[10] = out[11] = 0xff;
        std::memcpy(out + 12, &a4, 4);
        return;
    }
    if (inet_pton(AF_INET6, ip.c_str(), out) != 1) throw std::runtime_error("bad ip " + ip);
}

void add_net(BpfTables& t, const std::string& cidr, std::vector<Range> ranges) {
    auto slash = cidr.find('/');
    std::string ip = cidr.substr(0, slash);
    int len = std::stoi(cidr.substr(slash + 1));
    bulwark::policy::BpfNetEntry e;
    v6_of(ip, e.key.addr);
    bool v4 = ip.find(':') == std::string::npos;
    e.key.prefixlen = 32 + (v4 ? 96 + len : len);
    e.value.count = static_cast<uint32_t>(ranges.size());
    for (size_t i = 0; i < ranges.size(); ++i) {
        auto& r = e.value.ranges[i];
        r.lo = ranges[i].lo;
        r.hi = ranges[i].hi;
        r.proto_mask = ranges[i].proto;
        r.op_mask = ranges[i].ops;
        r.action = ranges[i].action;
        r.rule_id = ranges[i].rule_id;
    }
    t.net.push_back(e);
}

PolicyHandle load(const BpfTables& t) {
    auto r = Env::get().maps().load(t);
    if (!r) throw std::runtime_error("load: " + r.error().message());
    return r->handle;
}

namespace {
socklen_t fill(const std::string& ip, uint16_t port, sockaddr_storage& ss, int& family) {
    std::memset(&ss, 0, sizeof ss);
    if (ip.find(':') == std::string::npos) {
        auto* a = reinterpret_cast<sockaddr_in*>(&ss);
        a->sin_family = AF_INET;
        a->sin_port = htons(port);
        inet_pton(AF_INET, ip.c_str(), &a->sin_addr);
        family = AF_INET;
        return sizeof *a;
    }
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    inet_pton(AF_INET6, ip.c_str(), &a->sin6_addr);
    family = AF_INET6;
    return sizeof *a;
}

int with_socket(const std::string& ip, uint16_t port, int type, const std::function<int(int, sockaddr*, socklen_t)>& fn) {
    sockaddr_storage ss;
    int family;
    socklen_t len = fill(ip, port, ss, family);
    int s = socket(family, type | SOCK_CLOEXEC, 0);
    if (s < 0) return errno;
    int r = fn(s, reinterpret_cast<sockaddr*>(&ss), len);
    close(s);
    return r;
}
}  // namespace

int tcp_connect(const std::string& ip, uint16_t port) {
    return with_socket(ip, port, SOCK_STREAM, [](int s, sockaddr* a, socklen_t l) { return connect(s, a, l) ? errno : 0; });
}
int udp_connect(const std::string& ip, uint16_t port) {
    return with_socket(ip, port, SOCK_DGRAM, [](int s, sockaddr* a, socklen_t l) { return connect(s, a, l) ? errno : 0; });
}
int udp_sendto(const std::string& ip, uint16_t port) {
    return with_socket(ip, port, SOCK_DGRAM,
                       [](int s, sockaddr* a, socklen_t l) { return sendto(s, "x", 1, 0, a, l) < 0 ? errno : 0; });
}
int bind_to(int, int type, const std::string& ip, uint16_t port) {
    return with_socket(ip, port, type, [](int s, sockaddr* a, socklen_t l) { return bind(s, a, l) ? errno : 0; });
}

Listener::Listener(int family, int type) {
    fd = socket(family, type | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage ss{};
    socklen_t len;
    if (family == AF_INET) {
        auto* a = reinterpret_cast<sockaddr_in*>(&ss);
        a->sin_family = AF_INET;
        len = sizeof *a;
    } else {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
        a->sin6_family = AF_INET6;
        len = sizeof *a;
    }
    if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) throw std::runtime_error("listener bind");
    if (type == SOCK_STREAM && listen(fd, 4096) != 0) throw std::runtime_error("listen");
    getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                   : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

Listener::~Listener() {
    if (fd >= 0) close(fd);
}

}  // namespace bwtest
