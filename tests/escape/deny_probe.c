/* Probe for denies below an allowed subtree: `deny_probe <op> <args...>`
   does one file operation and prints "OK" (exit 0) or "DENIED <ERRNAME>"
   (exit 1). Paths are as the tool sees them (relative to its cwd, the
   workdir, or absolute). `wait <file> <op> <args...>` first waits (up to 10 s)
   for <file> to exist, so the test can change the host tree after launch. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int report(int rc) {
    if (rc == 0) {
        puts("OK");
        return 0;
    }
    printf("DENIED %s\n", strerrorname_np(errno) ? strerrorname_np(errno) : "?");
    return 1;
}

static int do_read(const char* p) {
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[64];
    ssize_t n = read(fd, buf, sizeof buf);
    int e = errno;
    close(fd);
    errno = e;
    return n < 0 ? -1 : 0;
}

static int do_write(const char* p) {
    int fd = open(p, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = write(fd, "x", 1);
    int e = errno;
    close(fd);
    errno = e;
    return n == 1 ? 0 : -1;
}

static int do_create(const char* p) {
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    close(fd);
    return 0;
}

/* mkdir -p of `p`, then a file "f" at the bottom */
static int do_mkdirs_create(const char* p) {
    char buf[8192];
    snprintf(buf, sizeof buf, "%s", p);
    for (char* s = buf + 1; *s; ++s) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
        *s = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
    strncat(buf, "/f", sizeof buf - strlen(buf) - 1);
    return do_create(buf);
}

/* symlink `link` -> `target`, then read `link`/`name` */
static int do_symlink_read(const char* target, const char* link, const char* name) {
    if (symlink(target, link) != 0) return -1;
    char buf[8192];
    snprintf(buf, sizeof buf, "%s/%s", link, name);
    return do_read(buf);
}

static int run(int argc, char** argv) {
    const char* op = argv[1];
    if (!strcmp(op, "read") && argc == 3) return report(do_read(argv[2]));
    if (!strcmp(op, "write") && argc == 3) return report(do_write(argv[2]));
    if (!strcmp(op, "create") && argc == 3) return report(do_create(argv[2]));
    if (!strcmp(op, "mkdir") && argc == 3) return report(mkdir(argv[2], 0755));
    if (!strcmp(op, "mkdirs_create") && argc == 3) return report(do_mkdirs_create(argv[2]));
    if (!strcmp(op, "unlink") && argc == 3) return report(unlink(argv[2]));
    if (!strcmp(op, "rmdir") && argc == 3) return report(rmdir(argv[2]));
    if (!strcmp(op, "rename") && argc == 4) return report(rename(argv[2], argv[3]));
    if (!strcmp(op, "exchange") && argc == 4)
        return report(renameat2(AT_FDCWD, argv[2], AT_FDCWD, argv[3], RENAME_EXCHANGE));
    if (!strcmp(op, "link") && argc == 4) return report(link(argv[2], argv[3]));
    if (!strcmp(op, "symlink_read") && argc == 5) return report(do_symlink_read(argv[2], argv[3], argv[4]));
    if (!strcmp(op, "chmod") && argc == 3) return report(chmod(argv[2], 0777));
    /* the attack on a deny's path: move its parent away, rebuild the path, write there */
    if (!strcmp(op, "rebuild") && argc == 5) {
        if (rename(argv[2], argv[3]) != 0) return report(-1);
        return report(do_mkdirs_create(argv[4]));
    }
    fprintf(stderr, "deny_probe: bad arguments for %s\n", op);
    return 2;
}

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: deny_probe <op> <args...>\n");
        return 2;
    }
    if (!strcmp(argv[1], "wait")) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        for (int i = 0; i < 1000 && access(argv[2], F_OK) != 0; ++i) nanosleep(&ts, NULL);
        return run(argc - 2, argv + 2);
    }
    return run(argc, argv);
}
