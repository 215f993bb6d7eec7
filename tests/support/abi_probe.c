/* Foreign system call ABI probe: `abi_probe <attempt> [path]` issues system
   calls of another ABI from this x86-64 process, the way an exploit would
   step around a filter written for x86-64 numbers:
     i386_getpid        getpid through int $0x80 (i386 number 20)
     i386_open PATH     open(PATH, O_RDONLY) through int $0x80 (i386 number 5),
                        then one byte read from the fd natively
     x32_getpid         getpid with the x32 bit set (__X32_SYSCALL_BIT)
   Prints "OK <detail>" and exits 0 when the call did what it asks, or
   "DENIED <ERRNAME> <detail>" and exits 1 (the escape battery's format); a
   kernel without the ABI answers "UNAVAILABLE <detail>" and exits 3 when the
   probe can tell (no IA32 emulation: int $0x80 raises SIGSEGV).
   Needs no 32-bit toolchain: int $0x80 takes its number in eax and the
   arguments in ebx, ecx, edx, 32 bits each, so a pointer must lie below
   4 GiB (MAP_32BIT). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static int ok(const char* d) { printf("OK %s\n", d); return 0; }
static int denied(long ret, const char* d) {
    const char* n = strerrorname_np((int)-ret);
    printf("DENIED %s %s\n", n ? n : "E?", d);
    return 1;
}

static sigjmp_buf no_ia32;
static void on_segv(int sig) { (void)sig; siglongjmp(no_ia32, 1); }

static long int80(long nr, long a, long b, long c) {
    long ret;
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c)
                     : "memory", "r8", "r9", "r10", "r11");
    return ret;
}

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    const char* a = argv[1];
    setvbuf(stdout, NULL, _IONBF, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sigaction(SIGSEGV, &sa, NULL);
    if (sigsetjmp(no_ia32, 1)) {
        printf("UNAVAILABLE int $0x80 raised SIGSEGV (no IA32 emulation)\n");
        return 3;
    }
    if (!strcmp(a, "i386_getpid")) {
        long r = int80(20, 0, 0, 0);
        if (r < 0 && r > -4096) return denied(r, "i386 getpid");
        char d[64];
        snprintf(d, sizeof d, "i386 getpid %ld (native %d)", r, (int)getpid());
        if (r != getpid()) {
            printf("WRONG %s\n", d);
            return 4;
        }
        return ok(d);
    }
    if (!strcmp(a, "i386_open") && argc > 2) {
        size_t n = strlen(argv[2]) + 1;
        char* low = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
        if (low == MAP_FAILED || n > 4096) {
            printf("WRONG no buffer below 4 GiB\n");
            return 4;
        }
        memcpy(low, argv[2], n);
        long fd = int80(5, (long)low, O_RDONLY, 0);
        if (fd < 0 && fd > -4096) return denied(fd, "i386 open");
        char c;
        if (read((int)fd, &c, 1) != 1) {
            printf("WRONG fd %ld from i386 open does not read\n", fd);
            return 4;
        }
        close((int)fd);
        return ok("i386 open returned a readable fd");
    }
    if (!strcmp(a, "x32_getpid")) {
        long r = syscall(SYS_getpid | 0x40000000);
        if (r < 0) return denied(-errno, "x32 getpid");
        return ok("x32 getpid");
    }
    return 2;
}
