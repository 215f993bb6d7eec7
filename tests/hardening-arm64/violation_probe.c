/* The arm64 tiers' control (tests/hardening-arm64/arm64_controls.sh): one
   memory or control-flow error per mode, built like the tiers' code (a BTI-
   and PAC-marked library, cmake/BulwarkTest.cmake) and run by the same runner.
   Under MTE sync, PAC and BTI each attempt must die on the spot; each has a
   twin that does the same without the error, or the same error with the
   hardware feature off, and survives.

     uaf      write through a freed pointer           MTE: SIGSEGV SEGV_MTESERR
     oob      write one granule past a heap block      MTE: SIGSEGV SEGV_MTESERR
     bti      indirect call to code without a landing pad       BTI: SIGILL
     bti-pad  the same call to a function with one (control)
     pac      return through a corrupted signed address         PAC: fault
     pac-ok   the same signed return, intact (control)

   A fault prints "fault signal=S code=C" and the process dies of it. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static void on_fault(int sig, siginfo_t* si, void* ctx) {
    (void)ctx;
    char line[64];
    int n = snprintf(line, sizeof line, "fault signal=%d code=%d\n", sig, si->si_code);
    if (write(1, line, (size_t)n) < 0) _exit(125);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* No landing pad: a BTI-guarded page faults on an indirect branch here.
   The three are global and hidden: GOT entries of local symbols would be
   one slot for all (GAS turns them into section-relative relocations). */
__asm__(".text\n.p2align 2\n.globl bulwark_no_pad\n.hidden bulwark_no_pad\n.type bulwark_no_pad, %function\nbulwark_no_pad:\n"
        "  mov x0, #7\n  ret\n.size bulwark_no_pad, .-bulwark_no_pad\n");
__attribute__((visibility("hidden"))) int bulwark_no_pad(void);
/* With a landing pad (BTI c), otherwise the same. */
__asm__(".text\n.p2align 2\n.globl bulwark_with_pad\n.hidden bulwark_with_pad\n.type bulwark_with_pad, %function\nbulwark_with_pad:\n"
        "  hint #34\n  mov x0, #7\n  ret\n.size bulwark_with_pad, .-bulwark_with_pad\n");
__attribute__((visibility("hidden"))) int bulwark_with_pad(void);
/* Signs its return address (PACIASP), flips bit 53 of the signed value when
   x0 is 1 (an overwrite an attacker would make), authenticates it
   (AUTIASP) and returns: a corrupted value fails authentication. */
__asm__(".text\n.p2align 2\n.globl bulwark_signed_return\n.hidden bulwark_signed_return\n.type bulwark_signed_return, %function\nbulwark_signed_return:\n"
        "  hint #34\n  hint #25\n  cbz x0, 1f\n  eor x30, x30, #(1 << 53)\n1:\n"
        "  hint #29\n  mov x0, #7\n  ret\n.size bulwark_signed_return, .-bulwark_signed_return\n");
__attribute__((visibility("hidden"))) int bulwark_signed_return(long corrupt);

int bulwark_test_main(int argc, char** argv) __attribute__((visibility("default")));
int bulwark_test_main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s uaf|oob|bti|bti-pad|pac|pac-ok\n", argv[0]);
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGILL, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    printf("tagged_addr_ctrl=0x%x\n", (unsigned)prctl(PR_GET_TAGGED_ADDR_CTRL, 0, 0, 0, 0));
    fflush(stdout);
    const char* m = argv[1];
    if (!strcmp(m, "uaf")) {
        /* Several rounds: a freed block's new tag equals the old one with
           probability 1/15; sixteen rounds make a miss ~1e-19. */
        for (int i = 0; i < 16; ++i) {
            char* volatile p = malloc(64);
            p[0] = 1;
            free(p);
            p[0] = 2;
        }
    } else if (!strcmp(m, "oob")) {
        for (int i = 0; i < 16; ++i) {
            char* volatile p = malloc(48);
            char* volatile q = malloc(48);
            p[48] = 1; /* the first byte of the next 16-byte granule, not this block's */
            free(q);
            free(p);
        }
    } else if (!strcmp(m, "bti") || !strcmp(m, "bti-pad")) {
        int (*volatile f)(void) = !strcmp(m, "bti") ? bulwark_no_pad : bulwark_with_pad;
        if (f() != 7) return 3;
    } else if (!strcmp(m, "pac") || !strcmp(m, "pac-ok")) {
        if (bulwark_signed_return(!strcmp(m, "pac")) != 7) return 3;
    } else {
        fprintf(stderr, "unknown mode %s\n", m);
        return 2;
    }
    printf("survived %s\n", m);
    return 0;
}
