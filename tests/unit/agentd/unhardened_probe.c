/* The control of sandbox_own_hardening_test: a program built without the
 * hardening (no canaries, no FORTIFY, lazy binding), which the same checker
 * must tell apart. */
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
    char buf[32];
    strcpy(buf, argc > 1 ? argv[1] : "probe");
    printf("%s\n", buf);
    return 0;
}
