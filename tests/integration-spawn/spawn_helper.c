/* Multi-call helper the integration tier runs inside sandboxes. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int hog(long mib) {
    for (long i = 0; i < mib; ++i) {
        char* p = malloc(1 << 20);
        if (!p) { printf("malloc failed at %ld\n", i); return 1; }
        memset(p, 1, 1 << 20);
    }
    printf("survived %ld MiB\n", mib);
    return 0;
}

static int forkcount(int n) {
    int ok = 0;
    for (int i = 0; i < n; ++i) {
        pid_t p = fork();
        if (p == 0) { pause(); _exit(0); }
        if (p > 0) ++ok;
    }
    printf("forked %d\n", ok);
    fflush(stdout);
    return 0;
}

/* Double fork; the grandchild leaves the session, ignores SIGTERM and
   appends a heartbeat to the file forever. */
static int orphan(const char* file) {
    pid_t p = fork();
    if (p == 0) {
        if (fork() == 0) {
            setsid();
            signal(SIGTERM, SIG_IGN);
            signal(SIGHUP, SIG_IGN);
            for (;;) {
                int fd = open(file, O_WRONLY | O_CREAT | O_APPEND, 0644);
                if (fd >= 0) { if (write(fd, "x", 1) < 0) {} close(fd); }
                usleep(20000);
            }
        }
        _exit(0);
    }
    waitpid(p, NULL, 0);
    for (;;) pause();
}

static int fds(void) {
    DIR* d = opendir("/proc/self/fd");
    if (!d) { perror("opendir"); return 1; }
    int self = dirfd(d);
    struct dirent* e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == self) continue;
        printf("%s\n", e->d_name);
    }
    closedir(d);
    return 0;
}

/* The flags of interface `name` (SIOCGIFFLAGS on a unix socket: the
   request goes to the device layer whatever the socket's family). */
static int ifflags(const char* name) {
    int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
    if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) != 0) { perror("SIOCGIFFLAGS"); return 1; }
    printf("%s up=%d running=%d loopback=%d\n", name, !!(ifr.ifr_flags & IFF_UP), !!(ifr.ifr_flags & IFF_RUNNING),
           !!(ifr.ifr_flags & IFF_LOOPBACK));
    return 0;
}

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    const char* m = argv[1];
    if (!strcmp(m, "hog") && argc > 2) return hog(atol(argv[2]));
    if (!strcmp(m, "forkcount") && argc > 2) return forkcount(atoi(argv[2]));
    if (!strcmp(m, "orphan") && argc > 2) return orphan(argv[2]);
    if (!strcmp(m, "fds")) return fds();
    if (!strcmp(m, "ifflags") && argc > 2) return ifflags(argv[2]);
    if (!strcmp(m, "spin")) for (;;) {}
    if (!strcmp(m, "exit") && argc > 2) return atoi(argv[2]);
    if (!strcmp(m, "bigfile") && argc > 2) {
        int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        char buf[65536] = {0};
        for (int i = 0; i < 64; ++i)
            if (write(fd, buf, sizeof buf) < 0) { perror("write"); return 1; }
        return 0;
    }
    return 2;
}
