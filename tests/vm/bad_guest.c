/* A hostile microVM guest for microvm_test.sh: /init of a test image that
 * speaks the channel's framing (agentd/vm/channel.h) only to abuse it. It says
 * Hello, reads the host's Start, and by the marker in it (the tool's argv):
 *   MODE-FLOOD     Stdout frames of 64 KiB, forever
 *   MODE-GARBAGE   random bytes, forever
 *   MODE-OVERSIZE  a frame announcing 4 GiB
 *   MODE-WRONGWAY  a Start frame (host -> guest only)
 *   MODE-ESCAPE:<path>:  root in the guest with no Bulwark layer at all: mounts
 *                  the host's 9p view and tries to read <path> (a host file the
 *                  tool's rules do not grant), and tries to reach an address;
 *                  says what happened on Stdout and exits through the protocol
 *   MODE-PROBE:<probe>:<attempt,attempt,...>:  root in the guest with no
 *                  Bulwark layer runs the escape battery's probe for each
 *                  attempt (chrooted into the host's 9p view): the control, in
 *                  the guest, for the same attempts under the tool's guest layers
 *   MODE-NETESCAPE:<ip>:<port>:<port2>:  root in the guest with no Bulwark
 *                  layer: brings up the user-mode network device itself and
 *                  connects to <ip>:<port> and <ip>:<port2>; what the guest no
 *                  longer checks, the VMM's policy on the host still does
 * agentd must end the run (setup-failed, the reason said), kill the VM and
 * stay well. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/reboot.h>
#include <sys/syscall.h>
#include <unistd.h>

/* eth0 at 10.0.2.15/24, default route via 10.0.2.2 (qemu's user-mode
 * network), as any root in the guest can: "up", or the failing call. */
static const char* bring_up_eth0(void) {
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct ifreq r = {0};
	strcpy(r.ifr_name, "eth0");
	struct sockaddr_in* in = (struct sockaddr_in*)&r.ifr_addr;
	in->sin_family = AF_INET;
	inet_pton(AF_INET, "10.0.2.15", &in->sin_addr);
	if (ioctl(s, SIOCSIFADDR, &r) != 0) return "SIOCSIFADDR failed";
	inet_pton(AF_INET, "255.255.255.0", &in->sin_addr);
	if (ioctl(s, SIOCSIFNETMASK, &r) != 0) return "SIOCSIFNETMASK failed";
	if (ioctl(s, SIOCGIFFLAGS, &r) != 0) return "SIOCGIFFLAGS failed";
	r.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &r) != 0) return "SIOCSIFFLAGS failed";
	struct rtentry rt = {0};
	struct sockaddr_in* gw = (struct sockaddr_in*)&rt.rt_gateway;
	gw->sin_family = AF_INET;
	inet_pton(AF_INET, "10.0.2.2", &gw->sin_addr);
	((struct sockaddr_in*)&rt.rt_dst)->sin_family = AF_INET;
	((struct sockaddr_in*)&rt.rt_genmask)->sin_family = AF_INET;
	rt.rt_flags = RTF_UP | RTF_GATEWAY;
	if (ioctl(s, SIOCADDRT, &rt) != 0) return "SIOCADDRT failed";
	close(s);
	return "up";
}

static void write_all(int fd, const void* p, size_t n) {
	const char* c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w <= 0) {
			usleep(1000);
			continue;
		}
		c += w;
		n -= (size_t)w;
	}
}

static void frame(int fd, uint8_t type, const char* p, uint32_t n) {
	uint32_t len = n + 1;
	unsigned char h[5] = {len & 0xff, (len >> 8) & 0xff, (len >> 16) & 0xff, len >> 24, type};
	write_all(fd, h, 5);
	if (n) write_all(fd, p, n);
}

static int open_port(void) {
	for (int i = 0; i < 500; ++i) {
		DIR* d = opendir("/sys/class/virtio-ports");
		struct dirent* e;
		while (d && (e = readdir(d))) {
			char p[512], name[64] = {0};
			snprintf(p, sizeof p, "/sys/class/virtio-ports/%s/name", e->d_name);
			int f = open(p, O_RDONLY);
			if (f < 0) continue;
			(void)!read(f, name, sizeof name - 1);
			close(f);
			if (strncmp(name, "bulwark.ctl", 11) == 0) {
				snprintf(p, sizeof p, "/dev/%s", e->d_name);
				closedir(d);
				return open(p, O_RDWR);
			}
		}
		if (d) closedir(d);
		usleep(10000);
	}
	return -1;
}

int main(void) {
	mount("dev", "/dev", "devtmpfs", 0, NULL);
	mount("sys", "/sys", "sysfs", 0, NULL);
	FILE* order = fopen("/lib/modules/load-order", "r");
	char m[128];
	while (order && fgets(m, sizeof m, order)) {
		m[strcspn(m, "\n")] = 0;
		char p[256];
		snprintf(p, sizeof p, "/lib/modules/%s.ko", m);
		int f = open(p, O_RDONLY);
		if (f >= 0) {
			syscall(SYS_finit_module, f, "", 0);
			close(f);
		}
	}
	int fd = open_port();
	if (fd < 0) reboot(RB_POWER_OFF);
	frame(fd, 1, "{\"kernel\":\"bad\"}", 16);
	static char start[1 << 20];
	size_t have = 0;
	while (have < sizeof start - 1) {
		ssize_t n = read(fd, start + have, sizeof start - 1 - have);
		if (n > 0) have += (size_t)n;
		if (memmem(start, have, "MODE-", 5) && memmem(start, have, "\"workdir\"", 9)) break;
		if (n <= 0) usleep(10000);
	}
	static char buf[65536];
	if (memmem(start, have, "MODE-FLOOD", 10)) {
		memset(buf, 'A', sizeof buf);
		for (;;) frame(fd, 5, buf, sizeof buf);
	} else if (memmem(start, have, "MODE-GARBAGE", 12)) {
		for (;;) {
			(void)!getrandom(buf, sizeof buf, 0);
			(void)!write(fd, buf, sizeof buf);
		}
	} else if (memmem(start, have, "MODE-OVERSIZE", 13)) {
		unsigned char h[5] = {0xff, 0xff, 0xff, 0xff, 5};
		write_all(fd, h, 5);
		for (;;) write_all(fd, buf, sizeof buf);
	} else if (memmem(start, have, "MODE-PROBE:", 11)) {
		char* p = memmem(start, have, "MODE-PROBE:", 11) + 11;
		char probe[256] = {0}, list[1024] = {0};
		char* c1 = memchr(p, ':', 256);
		char* c2 = c1 ? memchr(c1 + 1, ':', 1024) : NULL;
		if (c1 && c2) {
			memcpy(probe, p, (size_t)(c1 - p));
			memcpy(list, c1 + 1, (size_t)(c2 - c1 - 1));
		}
		mkdir("/mnt", 0755);
		char out[8192];
		int n = 0;
		if (mount("root", "/mnt", "9p", MS_RDONLY, "trans=virtio,version=9p2000.L") != 0)
			n = snprintf(out, sizeof out, "mount: %s\n", strerror(errno));
		for (char* a = strtok(list, ","); a && n < (int)sizeof out - 256; a = strtok(NULL, ",")) {
			int pp[2];
			if (pipe(pp) != 0) break;
			pid_t c = fork();
			if (c == 0) {
				dup2(pp[1], 1);
				dup2(pp[1], 2);
				if (chroot("/mnt") != 0 || chdir("/") != 0) _exit(120);
				char* argv[] = {probe, a, NULL};
				execv(probe, argv);
				_exit(121);
			}
			close(pp[1]);
			char line[256] = {0};
			ssize_t r = read(pp[0], line, sizeof line - 1);
			close(pp[0]);
			int st = 0;
			waitpid(c, &st, 0);
			if (r > 0 && line[r - 1] == '\n') line[r - 1] = 0;
			n += snprintf(out + n, sizeof out - (size_t)n, "%s: %s\n", a, r > 0 ? line : "(no output)");
		}
		frame(fd, 5, out, (uint32_t)n);
		const char* exit_doc = "{\"outcome\":\"exited\",\"exit_code\":0}";
		frame(fd, 7, exit_doc, (uint32_t)strlen(exit_doc));
	} else if (memmem(start, have, "MODE-NETESCAPE:", 15)) {
		char* p = memmem(start, have, "MODE-NETESCAPE:", 15) + 15;
		char ip[64] = {0};
		unsigned port[2] = {0, 0};
		char* c1 = memchr(p, ':', 64);
		if (c1 && c1 - p < 63) memcpy(ip, p, (size_t)(c1 - p));
		if (c1) sscanf(c1 + 1, "%u:%u:", &port[0], &port[1]);
		char out[1024];
		int n = snprintf(out, sizeof out, "network: %s\n", bring_up_eth0());
		for (int i = 0; i < 2; i++) {
			int s4 = socket(AF_INET, SOCK_STREAM, 0);
			struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port[i])};
			inet_pton(AF_INET, ip, &a.sin_addr);
			int r = s4 < 0 ? -1 : connect(s4, (struct sockaddr*)&a, sizeof a);
			n += snprintf(out + n, sizeof out - (size_t)n, "connect %s:%u: %s\n", ip, port[i],
			              r == 0 ? "CONNECTED" : strerror(errno));
			if (s4 >= 0) close(s4);
		}
		frame(fd, 5, out, (uint32_t)n);
		const char* exit_doc = "{\"outcome\":\"exited\",\"exit_code\":0}";
		frame(fd, 7, exit_doc, (uint32_t)strlen(exit_doc));
	} else if (memmem(start, have, "MODE-ESCAPE:", 12)) {
		char* p = memmem(start, have, "MODE-ESCAPE:", 12) + 12;
		char* end = memchr(p, ':', (size_t)(start + have - p));
		char path[512] = "/mnt";
		if (end && end - p < 400) memcpy(path + 4, p, (size_t)(end - p));
		mkdir("/mnt", 0755);
		char out[2048];
		int n = 0;
		if (mount("root", "/mnt", "9p", MS_RDONLY, "trans=virtio,version=9p2000.L") != 0) {
			n = snprintf(out, sizeof out, "mount: %s\n", strerror(errno));
		} else {
			int f = open(path, O_RDONLY);
			if (f < 0) {
				n = snprintf(out, sizeof out, "read %s: %s\n", path + 4, strerror(errno));
			} else {
				char data[256] = {0};
				ssize_t r = read(f, data, sizeof data - 1);
				n = snprintf(out, sizeof out, "read %s: %s (%zd bytes: %s)\n", path + 4,
				             r < 0 ? strerror(errno) : "READ", r, r > 0 ? data : "");
			}
		}
		int s4 = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
		a.sin_addr.s_addr = htonl(0x0a000202); /* 10.0.2.2: a user-mode network's host */
		int c = s4 < 0 ? -1 : connect(s4, (struct sockaddr*)&a, sizeof a);
		n += snprintf(out + n, sizeof out - (size_t)n, "connect 10.0.2.2:80: %s\n", c == 0 ? "CONNECTED" : strerror(errno));
		frame(fd, 5, out, (uint32_t)n);
		const char* exit_doc = "{\"outcome\":\"exited\",\"exit_code\":0}";
		frame(fd, 7, exit_doc, (uint32_t)strlen(exit_doc));
	} else {
		frame(fd, 2, "{}", 2);
	}
	for (;;) pause();
}
