/* Unix socket probe for the escape battery: one attempt, prints "OK" or
 * "DENIED <ERRNO>".
 *   unixprobe stream|seqpacket|dgram-connect|dgram-send ADDR
 *   unixprobe bind ADDR             a stream socket bound to ADDR (a pathname
 *                                   one is removed again), then closed
 *   unixprobe socketpair            stream and datagram pairs, a byte each way
 * ADDR is a path, or "@name" for an abstract name. A stream or seqpacket
 * connect also sends one byte and reads the daemon's one-byte answer, so OK
 * means the daemon was really reached. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static socklen_t fill(const char *a, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof *sa);
	sa->sun_family = AF_UNIX;
	size_t n = strlen(a);
	if (a[0] == '@') {
		if (n > sizeof sa->sun_path)
			return 0;
		memcpy(sa->sun_path + 1, a + 1, n - 1);
		return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
	}
	if (n >= sizeof sa->sun_path)
		return 0;
	memcpy(sa->sun_path, a, n);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
}

static int attempt(const char *op, const char *addr)
{
	struct sockaddr_un sa;
	socklen_t len = fill(addr, &sa);
	if (!len)
		return ENAMETOOLONG;
	int type = !strcmp(op, "stream") || !strcmp(op, "bind") ? SOCK_STREAM : !strcmp(op, "seqpacket") ? SOCK_SEQPACKET : SOCK_DGRAM;
	int s = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	if (s < 0)
		return errno;
	int rc = 0;
	if (!strcmp(op, "bind")) {
		if (bind(s, (struct sockaddr *)&sa, len) != 0)
			rc = errno;
		else if (addr[0] != '@')
			unlink(addr);
	} else if (!strcmp(op, "dgram-send")) {
		if (sendto(s, "x", 1, 0, (struct sockaddr *)&sa, len) != 1)
			rc = errno;
	} else if (connect(s, (struct sockaddr *)&sa, len) != 0) {
		rc = errno;
	} else if (type != SOCK_DGRAM) {
		char c = 0;
		if (send(s, "x", 1, 0) != 1)
			rc = errno;
		else if (recv(s, &c, 1, 0) != 1 || c != 'y')
			rc = errno ? errno : EIO;
	}
	close(s);
	return rc;
}

static int pairs(void)
{
	int types[] = {SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET};
	for (unsigned i = 0; i < sizeof types / sizeof types[0]; i++) {
		int sv[2];
		char c = 0;
		if (socketpair(AF_UNIX, types[i] | SOCK_CLOEXEC, 0, sv) != 0)
			return errno;
		int ok = send(sv[0], "p", 1, 0) == 1 && recv(sv[1], &c, 1, 0) == 1 && c == 'p' &&
			 send(sv[1], "q", 1, 0) == 1 && recv(sv[0], &c, 1, 0) == 1 && c == 'q';
		close(sv[0]);
		close(sv[1]);
		if (!ok)
			return EIO;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int err;
	if (argc == 2 && !strcmp(argv[1], "socketpair"))
		err = pairs();
	else if (argc == 3)
		err = attempt(argv[1], argv[2]);
	else {
		fprintf(stderr, "usage: unixprobe stream|seqpacket|dgram-connect|dgram-send|bind ADDR | socketpair\n");
		return 2;
	}
	if (err == 0)
		printf("OK\n");
	else
		printf("DENIED %s\n", strerrorname_np(err) ? strerrorname_np(err) : "?");
	return 0;
}
