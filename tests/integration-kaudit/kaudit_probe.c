/* Probe run inside (and outside) a sandbox by the kernel audit tier.
 *   kaudit_probe read PATH       open PATH for reading: exit 0 if it opened, 1 if not (prints errno)
 *   kaudit_probe getppid N       call getppid N times: prints how many failed, exit 0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char** argv) {
    if (argc == 3 && !strcmp(argv[1], "read")) {
        int fd = open(argv[2], O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            printf("errno %d\n", errno);
            return 1;
        }
        close(fd);
        printf("ok\n");
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "getppid")) {
        long n = atol(argv[2]), failed = 0;
        for (long i = 0; i < n; ++i)
            if (syscall(SYS_getppid) < 0) ++failed;
        printf("failed %ld\n", failed);
        return 0;
    }
    fprintf(stderr, "usage: kaudit_probe read PATH | getppid N\n");
    return 2;
}
