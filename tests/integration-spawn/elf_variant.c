/* Built twice, hardened and soft, for the ELF property checks. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
    char buf[64];
    snprintf(buf, sizeof buf, "%s", argc > 1 ? argv[1] : "x");
    if (argc > 5 && read(0, buf, (size_t)argc * 8) < 0) return 1; /* __read_chk when fortified */
    puts(buf);
    return 0;
}
