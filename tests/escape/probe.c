/* Escape battery probe: `probe <attempt> [args]` makes one escape attempt.
   Prints "OK <detail>" and exits 0 when the attempt succeeded, or
   "DENIED <ERRNAME> <detail>" and exits 1 when it failed; a probe whose
   helper child was killed prints "DENIED SIG<NAME>". Run unconfined (control:
   must succeed) and sandboxed (must fail). Controls that would touch the host
   run in a private namespace of a forked child. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/kcmp.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <mqueue.h>
#include <netinet/in.h>
#include <pty.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static int ok(const char* d) { printf("OK %s\n", d ? d : ""); return 0; }
static int denied(int e, const char* d) {
    const char* n = strerrorname_np(e);
    printf("DENIED %s %s\n", n ? n : "E?", d ? d : "");
    return 1;
}
#define TRY(expr, what) do { if ((long)(expr) < 0) return denied(errno, what); } while (0)

/* Runs fn in a forked child; reports its result (or the signal that killed it). */
static int in_child(int (*fn)(void*), void* arg) {
    int p[2];
    if (pipe(p) != 0) return denied(errno, "pipe");
    pid_t c = fork();
    if (c < 0) {
        /* No child allowed (a pids limit of 1): the attempt itself, here. */
        close(p[0]);
        close(p[1]);
        int rc = fn(arg);
        return rc == 0 ? ok("in the probe itself") : denied(-rc, "in the probe itself");
    }
    if (c == 0) {
        close(p[0]);
        int rc = fn(arg);
        int e = rc < 0 ? -rc : 0;
        if (write(p[1], &e, sizeof e) < 0) {}
        _exit(0);
    }
    close(p[1]);
    int e = -1, st = 0;
    ssize_t n = read(p[0], &e, sizeof e);
    close(p[0]);
    waitpid(c, &st, 0);
    if (n != sizeof e) {
        if (WIFSIGNALED(st)) {
            printf("DENIED SIG%s child killed\n", sigabbrev_np(WTERMSIG(st)));
            return 1;
        }
        return denied(EIO, "child vanished");
    }
    return e == 0 ? ok("in child") : denied(e, "in child");
}
#define R(expr) ((long)(expr) < 0 ? -errno : 0)

static void private_mount_ns(void) {
    /* Control: a throwaway namespace; sandboxed: refused, and the attempt
       below then meets the sandbox's own namespace. */
    if (unshare(CLONE_NEWNS) == 0) mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
}

/* Over /tmp: a directory every sandbox has, so the refusal is the mount's. */
static int c_mount(void* a) { (void)a; private_mount_ns(); return R(mount("tmpfs", "/tmp", "tmpfs", 0, NULL)); }
static int c_umount(void* a) { (void)a; private_mount_ns(); return R(umount2("/proc", MNT_DETACH)); }
static int c_remount(void* a) { (void)a; private_mount_ns(); return R(mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND, NULL)); }
static int c_pivot(void* a) {
    (void)a;
    private_mount_ns();
    mount("tmpfs", "/mnt", "tmpfs", 0, NULL);
    if (chdir("/mnt") == 0) mkdir("old", 0700);
    return R(syscall(SYS_pivot_root, ".", "old"));
}
static int c_chroot(void* a) { (void)a; return R(chroot(".")); }
static int c_unshare_user(void* a) { (void)a; return R(unshare(CLONE_NEWUSER)); }
static int c_unshare_net(void* a) { (void)a; return R(unshare(CLONE_NEWNET)); }
static int c_sethostname(void* a) { (void)a; unshare(CLONE_NEWUTS); return R(sethostname("pwned", 5)); }
static int c_setns_mnt(void* a) {
    int fd = open((const char*)a, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    return R(setns(fd, 0));
}
static int c_clone3(void* a) {
    (void)a;
    struct clone_args ca = {0};
    ca.flags = CLONE_NEWUSER | CLONE_NEWNS;
    ca.exit_signal = SIGCHLD;
    long p = syscall(SYS_clone3, &ca, sizeof ca);
    if (p == 0) _exit(0);
    if (p < 0) return -errno;
    waitpid(p, NULL, 0);
    return 0;
}
static int c_clone_ns(void* a) {
    (void)a;
    long p = syscall(SYS_clone, CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0);
    if (p == 0) _exit(0);
    if (p < 0) return -errno;
    waitpid(p, NULL, 0);
    return 0;
}
static int c_memfd_exec(void* a) {
    (void)a;
    int src = open("/usr/bin/true", O_RDONLY | O_CLOEXEC);
    if (src < 0) return -errno;
    int m = memfd_create("x", 0);
    if (m < 0) return -errno;
    char buf[65536];
    ssize_t n;
    while ((n = read(src, buf, sizeof buf)) > 0) if (write(m, buf, n) != n) return -EIO;
    char* argv[] = {"true", NULL};
    char* envp[] = {NULL};
    pid_t c = fork();
    if (c == 0) { syscall(SYS_execveat, m, "", argv, envp, AT_EMPTY_PATH); _exit(100 + errno); }
    int st;
    waitpid(c, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -(WEXITSTATUS(st) - 100);
}
static int c_exec_copy(void* a) {
    const char* dir = a;
    char path[512];
    snprintf(path, sizeof path, "%s/probe-true-%d", dir, getpid());
    int src = open("/usr/bin/true", O_RDONLY | O_CLOEXEC);
    int dst = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    if (src < 0 || dst < 0) return -errno;
    char buf[65536];
    ssize_t n;
    while ((n = read(src, buf, sizeof buf)) > 0) if (write(dst, buf, n) != n) return -EIO;
    close(dst);
    char* argv[] = {"true", NULL};
    char* envp[] = {NULL};
    pid_t c = fork();
    if (c == 0) { execve(path, argv, envp); _exit(100 + errno); }
    int st;
    waitpid(c, &st, 0);
    unlink(path);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -(WEXITSTATUS(st) - 100);
}

static int with_child_target(int what) {
    pid_t c = fork();
    if (c == 0) { for (;;) pause(); }
    long r = 0;
    int e = 0;
    if (what == 0) {
        r = ptrace(PTRACE_SEIZE, c, 0, 0);
    } else if (what == 1) {
        static char dst[16];
        char src[16] = "hello";
        struct iovec l = {dst, sizeof dst}, rm = {src, sizeof src};
        r = syscall(SYS_process_vm_readv, c, &l, 1, &rm, 1, 0);
    } else {
        r = syscall(SYS_kcmp, getpid(), c, KCMP_FILE, 0, 0);
    }
    e = errno;
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    return r < 0 ? denied(e, "on own child") : ok("on own child");
}

static int connect_to(int family, const char* addr, int port, int type) {
    int s = socket(family, type | SOCK_CLOEXEC, 0);
    if (s < 0) return denied(errno, "socket");
    int r;
    if (family == AF_INET) {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
        inet_pton(AF_INET, addr, &sa.sin_addr);
        r = type == SOCK_DGRAM ? (int)sendto(s, "x", 1, 0, (struct sockaddr*)&sa, sizeof sa)
                               : connect(s, (struct sockaddr*)&sa, sizeof sa);
    } else {
        struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
        inet_pton(AF_INET6, addr, &sa.sin6_addr);
        r = connect(s, (struct sockaddr*)&sa, sizeof sa);
    }
    int e = errno;
    close(s);
    return r < 0 ? denied(e, addr) : ok(addr);
}

static int unix_connect(const char* path, int abstract) {
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return denied(errno, "socket");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    socklen_t len;
    if (abstract) {
        sa.sun_path[0] = 0;
        strncpy(sa.sun_path + 1, path, sizeof sa.sun_path - 2);
        len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(path);
    } else {
        strncpy(sa.sun_path, path, sizeof sa.sun_path - 1);
        len = sizeof sa;
    }
    int r = connect(s, (struct sockaddr*)&sa, len);
    int e = errno;
    close(s);
    return r < 0 ? denied(e, path) : ok(path);
}

static int open_path(const char* p, int flags) {
    int fd = open(p, flags | O_CLOEXEC);
    if (fd < 0) return denied(errno, p);
    close(fd);
    return ok(p);
}

static int posture(void) {
    FILE* f = fopen("/proc/self/status", "r");
    if (!f) return denied(errno, "status");
    char line[256];
    int weak = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "Seccomp:", 8) && atoi(line + 8) != 2) weak = 1;
        if (!strncmp(line, "NoNewPrivs:", 11) && atoi(line + 11) != 1) weak = 1;
        if ((!strncmp(line, "CapEff:", 7) || !strncmp(line, "CapBnd:", 7)) && strtoull(line + 7, NULL, 16) != 0) weak = 1;
    }
    fclose(f);
    return weak ? ok("weak posture: privileges or no filter") : denied(EPERM, "posture sound");
}

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    const char* a = argv[1];
    const char* arg = argc > 2 ? argv[2] : "";
    setvbuf(stdout, NULL, _IONBF, 0);
    /* ---- syscall surface ---- */
    if (!strcmp(a, "io_uring_setup")) {
        char params[120] = {0};
        long fd = syscall(SYS_io_uring_setup, 4, params);
        TRY(fd, "io_uring_setup");
        return ok("ring created");
    }
    if (!strcmp(a, "clone3_newuser")) return in_child(c_clone3, NULL);
    if (!strcmp(a, "clone_newns")) return in_child(c_clone_ns, NULL);
    if (!strcmp(a, "unshare_user")) return in_child(c_unshare_user, NULL);
    if (!strcmp(a, "unshare_net")) return in_child(c_unshare_net, NULL);
    if (!strcmp(a, "setns_mnt")) return in_child(c_setns_mnt, (void*)arg);
    if (!strcmp(a, "mount_tmpfs")) return in_child(c_mount, NULL);
    if (!strcmp(a, "umount_proc")) return in_child(c_umount, NULL);
    if (!strcmp(a, "remount_root_rw")) return in_child(c_remount, NULL);
    if (!strcmp(a, "pivot_root")) return in_child(c_pivot, NULL);
    if (!strcmp(a, "chroot")) return in_child(c_chroot, NULL);
    if (!strcmp(a, "add_key")) {
        TRY(syscall(SYS_add_key, "user", "bulwark-probe", "x", 1, KEY_SPEC_PROCESS_KEYRING), "add_key");
        return ok("key added");
    }
    if (!strcmp(a, "keyctl")) {
        TRY(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0), "keyctl");
        return ok("session keyring");
    }
    if (!strcmp(a, "bpf_map_create")) {
        union bpf_attr at;
        memset(&at, 0, sizeof at);
        at.map_type = BPF_MAP_TYPE_ARRAY;
        at.key_size = 4;
        at.value_size = 4;
        at.max_entries = 1;
        TRY(syscall(SYS_bpf, BPF_MAP_CREATE, &at, sizeof at), "bpf");
        return ok("map created");
    }
    if (!strcmp(a, "perf_event_open")) {
        struct perf_event_attr pe;
        memset(&pe, 0, sizeof pe);
        pe.type = PERF_TYPE_SOFTWARE;
        pe.size = sizeof pe;
        pe.config = PERF_COUNT_SW_CPU_CLOCK;
        pe.disabled = 1;
        pe.exclude_kernel = 1;
        TRY(syscall(SYS_perf_event_open, &pe, 0, -1, -1, 0), "perf_event_open");
        return ok("event opened");
    }
    if (!strcmp(a, "userfaultfd")) {
        TRY(syscall(SYS_userfaultfd, O_CLOEXEC), "userfaultfd");
        return ok("uffd");
    }
    if (!strcmp(a, "open_by_handle_at")) {
        struct { struct file_handle h; unsigned char b[128]; } fh;
        fh.h.handle_bytes = 128;
        int mnt_id;
        /* A file every sandbox may read, so that only the capability check stands. */
        syscall(SYS_name_to_handle_at, AT_FDCWD, "/usr/bin/true", &fh.h, &mnt_id, 0);
        int mfd = open("/usr", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        TRY(syscall(SYS_open_by_handle_at, mfd, &fh.h, O_RDONLY), "open_by_handle_at");
        return ok("opened by handle");
    }
    if (!strcmp(a, "clock_settime")) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        TRY(clock_settime(CLOCK_REALTIME, &ts), "clock_settime");
        return ok("clock set (to now)");
    }
    if (!strcmp(a, "adjtimex")) {
        struct timex tx = {0};
        adjtimex(&tx);
        long tick = tx.tick;
        memset(&tx, 0, sizeof tx);
        tx.modes = ADJ_TICK;
        tx.tick = tick;
        TRY(adjtimex(&tx), "adjtimex(ADJ_TICK)");
        return ok("tick written (unchanged)");
    }
    if (!strcmp(a, "ptrace_child")) return with_child_target(0);
    if (!strcmp(a, "process_vm_readv")) return with_child_target(1);
    if (!strcmp(a, "kcmp")) return with_child_target(2);
    if (!strcmp(a, "memfd_exec")) return in_child(c_memfd_exec, NULL);
    if (!strcmp(a, "exec_written_file")) return in_child(c_exec_copy, (void*)arg);
    /* ---- posture ---- */
    if (!strcmp(a, "posture")) return posture();
    if (!strcmp(a, "setuid_root")) { TRY(setuid(0), "setuid(0)"); return ok("uid 0"); }
    if (!strcmp(a, "capset_sys_admin")) {
        struct { uint32_t v; int pid; } h = {0x20080522, 0};
        struct { uint32_t e, p, i; } d[2];
        TRY(syscall(SYS_capget, &h, d), "capget");
        d[0].e |= 1u << 21;  /* CAP_SYS_ADMIN */
        d[0].p |= 1u << 21;
        TRY(syscall(SYS_capset, &h, d), "capset");
        return ok("CAP_SYS_ADMIN effective");
    }
    if (!strcmp(a, "securebits_unlock")) {
        TRY(prctl(PR_SET_SECUREBITS, 0, 0, 0, 0), "PR_SET_SECUREBITS 0");
        return ok("securebits cleared");
    }
    /* ---- filesystem ---- */
    if (!strcmp(a, "procpid_root_shadow")) {
        char p[80];
        snprintf(p, sizeof p, "/proc/%s/root/etc/shadow", arg);
        return open_path(p, O_RDONLY);
    }
    if (!strcmp(a, "read_shadow")) return open_path("/etc/shadow", O_RDONLY);
    if (!strcmp(a, "launcher_environ")) {
        char p[64];
        snprintf(p, sizeof p, "/proc/%s/environ", arg);
        return open_path(p, O_RDONLY);
    }
    if (!strcmp(a, "launcher_exe")) {
        char p[64];
        snprintf(p, sizeof p, "/proc/%s/exe", arg);
        return open_path(p, O_RDONLY);
    }
    if (!strcmp(a, "leaked_fds")) {
        for (int fd = 3; fd < 1024; ++fd) {
            struct stat st;
            if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
                if (fchdir(fd) == 0) return ok("fchdir through an inherited directory fd");
            }
        }
        return denied(EBADF, "no inherited descriptor");
    }
    if (!strcmp(a, "core_pattern")) return open_path("/proc/sys/kernel/core_pattern", O_WRONLY);
    if (!strcmp(a, "release_agent")) return open_path("/sys/fs/cgroup/pids/release_agent", O_WRONLY);
    if (!strcmp(a, "host_file")) return open_path(arg, O_RDONLY);
    if (!strcmp(a, "kmsg")) return open_path("/dev/kmsg", O_RDONLY);
    if (!strcmp(a, "write_usr")) {
        int fd = open("/usr/bin/.bulwark-probe", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) return denied(errno, "/usr/bin");
        close(fd);
        unlink("/usr/bin/.bulwark-probe");
        return ok("created in /usr/bin");
    }
    if (!strcmp(a, "mknod_char")) {
        char p[512];
        snprintf(p, sizeof p, "%s/null2", arg);
        TRY(mknod(p, S_IFCHR | 0666, makedev(1, 3)), "mknod");
        unlink(p);
        return ok("char device created");
    }
    if (!strcmp(a, "chmod_setuid")) {
        char p[512];
        snprintf(p, sizeof p, "%s/suid", arg);
        int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
        if (fd < 0) return denied(errno, "create");
        close(fd);
        int r = chmod(p, 04755);
        int e = errno;
        unlink(p);
        return r < 0 ? denied(e, "chmod u+s") : ok("setuid bit set");
    }
    if (!strcmp(a, "hardlink_etc")) {
        char p[512];
        snprintf(p, sizeof p, "%s/passwd-link", arg);
        TRY(link("/etc/passwd", p), "link");
        unlink(p);
        return ok("hard link into workdir");
    }
    if (!strcmp(a, "dotdot_escape")) return open_path("/usr/../../../../../root", O_RDONLY | O_DIRECTORY);
    /* ---- network ---- */
    if (!strcmp(a, "tcp_loopback_host")) return connect_to(AF_INET, "127.0.0.1", atoi(arg), SOCK_STREAM);
    if (!strcmp(a, "tcp6_loopback_host")) return connect_to(AF_INET6, "::1", atoi(arg), SOCK_STREAM);
    if (!strcmp(a, "udp_metadata")) return connect_to(AF_INET, "169.254.169.254", 80, SOCK_DGRAM);
    if (!strcmp(a, "tcp_external")) return connect_to(AF_INET, "192.0.2.1", 9, SOCK_DGRAM);
    if (!strcmp(a, "packet_socket")) { TRY(socket(AF_PACKET, SOCK_RAW, htons(0x0003)), "AF_PACKET"); return ok("AF_PACKET"); }
    if (!strcmp(a, "raw_socket")) { TRY(socket(AF_INET, SOCK_RAW, IPPROTO_ICMP), "SOCK_RAW"); return ok("raw"); }
    if (!strcmp(a, "socket_vsock")) { TRY(socket(AF_VSOCK, SOCK_STREAM, 0), "AF_VSOCK"); return ok("vsock"); }
    if (!strcmp(a, "socket_xdp")) { TRY(socket(AF_XDP, SOCK_RAW, 0), "AF_XDP"); return ok("xdp"); }
    if (!strcmp(a, "netlink_audit")) { TRY(socket(AF_NETLINK, SOCK_RAW, 9 /* NETLINK_AUDIT */), "NETLINK_AUDIT"); return ok("audit netlink"); }
    if (!strcmp(a, "bind_port_80")) {
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0) return denied(errno, "socket");
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(80)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        TRY(bind(s, (struct sockaddr*)&sa, sizeof sa), "bind :80");
        return ok("bound :80");
    }
    if (!strcmp(a, "abstract_unix_host")) return unix_connect(arg, 1);
    if (!strcmp(a, "pathname_unix_host")) return unix_connect(arg, 0);
    /* ---- terminal and IPC ---- */
    if (!strcmp(a, "tiocsti")) {
        int fd = open("/dev/tty", O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            int m, s;
            if (openpty(&m, &s, NULL, NULL, NULL) != 0) return denied(errno, "no tty, no pty");
            setsid();
            if (ioctl(s, TIOCSCTTY, 0) != 0) return denied(errno, "TIOCSCTTY");
            fd = s;
        }
        char c = '#';
        TRY(ioctl(fd, TIOCSTI, &c), "TIOCSTI");
        return ok("byte injected");
    }
    if (!strcmp(a, "kill_all")) { TRY(kill(-1, 0), "kill(-1, 0)"); return ok("some process signalable"); }
    if (!strcmp(a, "signal_launcher")) { TRY(kill(atoi(arg), 0), "kill(launcher, 0)"); return ok("launcher signalable"); }
    if (!strcmp(a, "pidfd_launcher")) { TRY(syscall(SYS_pidfd_open, atoi(arg), 0), "pidfd_open"); return ok("pidfd"); }
    if (!strcmp(a, "f_setown_launcher")) {
        int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        TRY(fcntl(s, F_SETOWN, atoi(arg)), "F_SETOWN");
        return ok("owner set");
    }
    if (!strcmp(a, "sysv_shm_host")) { TRY(shmget(atoi(arg), 0, 0), "shmget"); return ok("host segment"); }
    if (!strcmp(a, "mqueue_host")) { TRY(mq_open(arg, O_RDONLY), "mq_open"); return ok("host queue"); }
    if (!strcmp(a, "dev_shm_host")) return open_path(arg, O_RDONLY);
    if (!strcmp(a, "sethostname")) return in_child(c_sethostname, NULL);
    /* ---- resources ---- */
    if (!strcmp(a, "fork_bomb")) {
        int n = 0;
        static pid_t kids[200];
        for (int i = 0; i < 200; ++i) {
            pid_t p = fork();
            if (p == 0) { pause(); _exit(0); }
            if (p < 0) break;
            kids[n++] = p;
        }
        int e = errno;
        for (int i = 0; i < n; ++i) { kill(kids[i], SIGKILL); waitpid(kids[i], NULL, 0); }
        if (n == 200) return ok("200 processes");
        return denied(e, "fork refused");
    }
    if (!strcmp(a, "fd_bomb")) {
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl);
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        for (int i = 0; i < 5000; ++i)
            if (open("/dev/null", O_RDONLY) < 0) return denied(errno, "open");
        return ok("5000 descriptors");
    }
    if (!strcmp(a, "memory_hog")) {
        for (int i = 0; i < 512; ++i) {
            char* p = malloc(1 << 20);
            if (!p) return denied(ENOMEM, "malloc");
            memset(p, 1, 1 << 20);
        }
        return ok("512 MiB touched");
    }
    if (!strcmp(a, "disk_fill")) {
        char p[512];
        snprintf(p, sizeof p, "%s/fill", arg);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) return denied(errno, "create");
        static char buf[1 << 20];
        signal(SIGXFSZ, SIG_IGN);
        for (int i = 0; i < 64; ++i)
            if (write(fd, buf, sizeof buf) != sizeof buf) { int e = errno; unlink(p); return denied(e, "write"); }
        unlink(p);
        return ok("64 MiB written");
    }
    if (!strcmp(a, "cpu_spin")) {
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        const int seconds = arg && *arg ? atoi(arg) : 8;
        do clock_gettime(CLOCK_MONOTONIC, &t); while (t.tv_sec - t0.tv_sec < seconds);
        return ok("spun");
    }
    if (!strcmp(a, "raise_core_limit")) {
        struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
        TRY(setrlimit(RLIMIT_CORE, &rl), "setrlimit(CORE)");
        return ok("core dumps on");
    }
    if (!strcmp(a, "own_cgroup_limits")) return open_path(arg, O_WRONLY);
    if (!strcmp(a, "orphan")) {
        /* Double fork, setsid, ignore SIGTERM, heartbeat into arg. */
        pid_t c = fork();
        if (c < 0) return denied(errno, "fork (child)");
        if (c == 0) {
            pid_t g = fork();
            if (g < 0) _exit(3);
            if (g == 0) {
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                dup2(null, 1);
                dup2(null, 2);
                setsid();
                signal(SIGTERM, SIG_IGN);
                for (;;) {
                    int fd = open(arg, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                    if (fd >= 0) { if (write(fd, "x", 1) < 0) {} close(fd); }
                    usleep(20000);
                }
            }
            printf("PID %d\n", g);
            _exit(0);
        }
        int st = 0;
        waitpid(c, &st, 0);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 3) return denied(EAGAIN, "fork (grandchild)");
        usleep(100000);
        return ok("orphan started");
    }
    fprintf(stderr, "unknown attempt %s\n", a);
    return 2;
}
