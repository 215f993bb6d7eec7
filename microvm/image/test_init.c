/* test_init: a static /init that checks a guest image built by build_image.py.
 *
 * Prints "BULWARK-IMAGE-OK <release>" on /dev/console, loads the modules of
 * /lib/modules/load-order with finit_module(2) ("MODULE <name> loaded|builtin
 * or already|error ..."), then powers off. With bulwark_io=1 on the kernel
 * command line (unknown name=value parameters reach init's environment) it
 * also lists /sys/class/virtio-ports/<port>/name ("VPORT <port> <name>"), writes
 * a line to the port named bulwark.stdout, mounts the 9p tag "work" on /mnt,
 * reads /mnt/hello.txt, writes /mnt/guest.txt and prints "NINEP ...". The last
 * lines are "UPTIME init=<s> modules=<s> done=<s>" (guest CLOCK_BOOTTIME when
 * init started, after the modules, at the end) and
 * "BULWARK-IMAGE-DONE failures=<n>".
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static int failures;

static double uptime_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void say(const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (n > (int)sizeof buf - 2) n = sizeof buf - 2;
  buf[n++] = '\n';
  if (write(1, buf, (size_t)n) < 0) { /* nothing to do without a console */ }
}

static int read_text(const char *path, char *buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, size - 1);
  close(fd);
  if (n < 0) return -1;
  buf[n] = 0;
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = 0;
  return (int)n;
}

static void load_modules(void) {
  char list[4096];
  if (read_text("/lib/modules/load-order", list, sizeof list) < 0) {
    say("MODULE none: no /lib/modules/load-order (%s)", strerror(errno));
    failures++;
    return;
  }
  for (char *save = NULL, *name = strtok_r(list, "\n", &save); name; name = strtok_r(NULL, "\n", &save)) {
    char path[256];
    snprintf(path, sizeof path, "/lib/modules/%s.ko", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      say("MODULE %s error open: %s", name, strerror(errno));
      failures++;
      continue;
    }
    if (syscall(SYS_finit_module, fd, "", 0) == 0)
      say("MODULE %s loaded", name);
    else if (errno == EEXIST)
      say("MODULE %s already", name);
    else {
      say("MODULE %s error: %s", name, strerror(errno));
      failures++;
    }
    close(fd);
  }
}

static void check_ports(void) {
  DIR *d = opendir("/sys/class/virtio-ports");
  int ports = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[300], name[128], dev[300];
    snprintf(path, sizeof path, "/sys/class/virtio-ports/%s/name", e->d_name);
    if (read_text(path, name, sizeof name) < 0) snprintf(name, sizeof name, "?");
    say("VPORT %s %s", e->d_name, name);
    ports++;
    if (strcmp(name, "bulwark.stdout") == 0) {
      snprintf(dev, sizeof dev, "/dev/%s", e->d_name);
      int fd = open(dev, O_WRONLY | O_CLOEXEC);
      static const char line[] = "hello from the guest over virtio-serial\n";
      if (fd < 0 || write(fd, line, sizeof line - 1) != (ssize_t)(sizeof line - 1)) {
        say("VPORT %s write failed: %s", dev, strerror(errno));
        failures++;
      }
      if (fd >= 0) {
        fsync(fd);
        close(fd);
      }
    }
  }
  if (d) closedir(d);
  if (!ports) {
    say("VPORT none");
    failures++;
  }
}

static void check_9p(const char *release) {
  if (mount("work", "/mnt", "9p", 0, "trans=virtio,version=9p2000.L,msize=262144") != 0) {
    say("NINEP mount failed: %s", strerror(errno));
    failures++;
    return;
  }
  char hello[256];
  if (read_text("/mnt/hello.txt", hello, sizeof hello) >= 0)
    say("NINEP mounted; hello.txt: %s", hello);
  else {
    say("NINEP mounted; hello.txt: %s", strerror(errno));
    failures++;
  }
  int fd = open("/mnt/guest.txt", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  char text[256];
  int n = snprintf(text, sizeof text, "written by the guest, kernel %s\n", release);
  if (fd < 0 || write(fd, text, (size_t)n) != n) {
    say("NINEP write guest.txt failed: %s", strerror(errno));
    failures++;
  } else
    say("NINEP wrote guest.txt");
  if (fd >= 0) close(fd);
  sync();
  if (umount("/mnt") != 0) say("NINEP umount: %s", strerror(errno));
}

int main(void) {
  struct stat st;
  if (stat("/dev/null", &st) != 0 || stat("/dev/ttyS0", &st) != 0) {
    if (mount("devtmpfs", "/dev", "devtmpfs", 0, NULL) != 0 && errno != EBUSY) {
      say("devtmpfs mount: %s", strerror(errno));
      failures++;
    }
  }
  mount("proc", "/proc", "proc", 0, NULL);
  mount("sysfs", "/sys", "sysfs", 0, NULL);
  struct utsname u;
  uname(&u);
  double t_init = uptime_s();
  say("BULWARK-IMAGE-OK %s", u.release);
  load_modules();
  double t_modules = uptime_s();
  const char *io = getenv("bulwark_io");
  if (io && strcmp(io, "1") == 0) {
    check_ports();
    check_9p(u.release);
  }
  say("UPTIME init=%.3f modules=%.3f done=%.3f", t_init, t_modules, uptime_s());
  say("BULWARK-IMAGE-DONE failures=%d", failures);
  sync();
  reboot(RB_POWER_OFF);
  return 0;
}
