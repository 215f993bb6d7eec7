/* Network probe run as a sandboxed tool by the bpfrun tier.
 *   netprobe tcp|udp-send|udp-connect ADDR PORT     one attempt, prints "OK" or "DENIED <ERRNO>"
 *   netprobe steps DIR OP ADDR PORT N               attempt i waits for DIR/go<i>, writes DIR/res<i>
 *   netprobe loop DIR OP ADDR PORT                  creates DIR/started, then attempts back to back
 *                                                   until DIR/stop exists (at most 120 s), then prints "ok <n> denied <m>"
 * ADDR is an IPv4 or IPv6 literal (IPv4-mapped IPv6 too). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int attempt(const char *op, const char *addr, int port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	memset(&ss, 0, sizeof ss);
	int fam;
	if (strchr(addr, ':')) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = fam = AF_INET6;
		a->sin6_port = htons(port);
		if (inet_pton(AF_INET6, addr, &a->sin6_addr) != 1)
			return EINVAL;
		len = sizeof *a;
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = fam = AF_INET;
		a->sin_port = htons(port);
		if (inet_pton(AF_INET, addr, &a->sin_addr) != 1)
			return EINVAL;
		len = sizeof *a;
	}
	int tcp = strcmp(op, "tcp") == 0;
	int s = socket(fam, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC, 0);
	if (s < 0)
		return errno;
	int rc;
	if (strcmp(op, "udp-send") == 0)
		rc = sendto(s, "x", 1, 0, (struct sockaddr *)&ss, len) < 0 ? errno : 0;
	else
		rc = connect(s, (struct sockaddr *)&ss, len) < 0 ? errno : 0;
	close(s);
	return rc;
}

static void verdict(char *buf, size_t n, int err)
{
	if (err == 0)
		snprintf(buf, n, "OK\n");
	else
		snprintf(buf, n, "DENIED %s\n", strerrorname_np(err) ? strerrorname_np(err) : "?");
}

int main(int argc, char **argv)
{
	char out[64];
	if (argc == 4) {
		verdict(out, sizeof out, attempt(argv[1], argv[2], atoi(argv[3])));
		fputs(out, stdout);
		return 0;
	}
	if (argc == 7 && strcmp(argv[1], "steps") == 0) {
		int n = atoi(argv[6]);
		for (int i = 1; i <= n; i++) {
			char go[512], res[512], tmp[512];
			snprintf(go, sizeof go, "%s/go%d", argv[2], i);
			snprintf(res, sizeof res, "%s/res%d", argv[2], i);
			snprintf(tmp, sizeof tmp, "%s/res%d.tmp", argv[2], i);
			struct stat st;
			for (int w = 0; stat(go, &st) != 0; w++) {
				if (w > 12000)
					return 3;
				struct timespec ts = {0, 10 * 1000 * 1000};
				nanosleep(&ts, NULL);
			}
			verdict(out, sizeof out, attempt(argv[3], argv[4], atoi(argv[5])));
			FILE *f = fopen(tmp, "w");
			if (!f)
				return 4;
			fputs(out, f);
			fclose(f);
			if (rename(tmp, res) != 0)
				return 5;
			fputs(out, stdout);
		}
		return 0;
	}
	if (argc == 6 && strcmp(argv[1], "loop") == 0) {
		char stop[512], started[512];
		snprintf(stop, sizeof stop, "%s/stop", argv[2]);
		snprintf(started, sizeof started, "%s/started", argv[2]);
		FILE *f = fopen(started, "w");
		if (!f)
			return 4;
		fclose(f);
		long ok = 0, denied = 0;
		time_t end = time(NULL) + 120;
		struct stat st;
		while (stat(stop, &st) != 0 && time(NULL) < end) {
			for (int i = 0; i < 256; i++) {
				if (attempt(argv[3], argv[4], atoi(argv[5])) == 0)
					ok++;
				else
					denied++;
			}
		}
		printf("ok %ld denied %ld\n", ok, denied);
		return 0;
	}
	fprintf(stderr, "usage: netprobe tcp|udp-send|udp-connect ADDR PORT | steps DIR OP ADDR PORT N | "
			"loop DIR OP ADDR PORT\n");
	return 2;
}
