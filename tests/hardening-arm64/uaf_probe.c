/* Use-after-free probe for the MTE test: with glibc.mem.tagging=3 (sync)
   the write through a freed pointer faults (SIGSEGV); without it the
   program survives. Several rounds so a colliding random tag cannot hide it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>

int main(void) {
    printf("tagged_addr_ctrl=0x%x\n", (unsigned)prctl(PR_GET_TAGGED_ADDR_CTRL, 0, 0, 0, 0));
    fflush(stdout);
    for (int i = 0; i < 16; ++i) {
        char* volatile p = malloc(64);
        p[0] = 1;
        free(p);
        p[0] = 2; /* use after free */
    }
    printf("survived\n");
    return 0;
}
