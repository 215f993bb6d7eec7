// The cBPF checker and interpreter on hand-written programs.
#include <catch2/catch.hpp>

#include <linux/audit.h>

#include <vector>

#include "bulwark/policy/cbpf.h"

using namespace bulwark::policy;

namespace {
sock_filter S(uint16_t code, uint32_t k) { return BPF_STMT(code, k); }
sock_filter J(uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) { return BPF_JUMP(code, k, jt, jf); }

seccomp_data data(int nr, uint32_t arch = AUDIT_ARCH_X86_64, uint64_t a0 = 0) {
    seccomp_data d{};
    d.nr = nr;
    d.arch = arch;
    d.args[0] = a0;
    return d;
}

bool valid(const std::vector<sock_filter>& p) { return check_seccomp_filter(p).has_value(); }
}  // namespace

TEST_CASE("interpreter: arch check, syscall match, return values", "[seccomp][cbpf]") {
    const std::vector<sock_filter> prog = {
        S(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        J(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        S(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        S(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        J(BPF_JMP | BPF_JEQ | BPF_K, 39, 0, 1),
        S(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        J(BPF_JMP | BPF_JGE | BPF_K, 100, 0, 1),
        S(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 38),
        S(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 1),
    };
    REQUIRE(valid(prog));
    CHECK(run_seccomp_filter(prog, data(39)) == SECCOMP_RET_ALLOW);
    CHECK(run_seccomp_filter(prog, data(100)) == (SECCOMP_RET_ERRNO | 38));
    CHECK(run_seccomp_filter(prog, data(99)) == (SECCOMP_RET_ERRNO | 1));
    CHECK(run_seccomp_filter(prog, data(39, AUDIT_ARCH_I386)) == SECCOMP_RET_KILL_PROCESS);
    CHECK(seccomp_ret_action(SECCOMP_RET_ERRNO | 38) == SECCOMP_RET_ERRNO);
    CHECK(seccomp_ret_data(SECCOMP_RET_ERRNO | 38) == 38);
}

TEST_CASE("interpreter: says whether a run read past nr and arch", "[seccomp][cbpf]") {
    // nr 39 decides on arg0; every other nr by its number alone
    const std::vector<sock_filter> prog = {
        S(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        J(BPF_JMP | BPF_JEQ | BPF_K, 39, 0, 3),
        S(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),
        J(BPF_JMP | BPF_JEQ | BPF_K, 1, 0, 1),
        S(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        S(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 1),
    };
    REQUIRE(valid(prog));
    bool read_more = true;
    CHECK(run_seccomp_filter(prog, data(40), &read_more) == (SECCOMP_RET_ERRNO | 1));
    CHECK_FALSE(read_more);
    CHECK(run_seccomp_filter(prog, data(39), &read_more) == (SECCOMP_RET_ERRNO | 1));
    CHECK(read_more);
    CHECK(run_seccomp_filter(prog, data(39, AUDIT_ARCH_X86_64, 1), &read_more) == SECCOMP_RET_ALLOW);
    CHECK(read_more);
}

TEST_CASE("interpreter: ALU, X register, scratch memory, JSET, RET A", "[seccomp][cbpf]") {
    const std::vector<sock_filter> prog = {
        S(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),  // low half of a0 (LE)
        S(BPF_ST, 3),
        S(BPF_ALU | BPF_AND | BPF_K, 0xff),
        S(BPF_MISC | BPF_TAX, 0),
        S(BPF_LD | BPF_MEM, 3),
        S(BPF_ALU | BPF_RSH | BPF_K, 8),
        S(BPF_ALU | BPF_ADD | BPF_X, 0),   // A = (a0 >> 8) + (a0 & 0xff)
        S(BPF_ALU | BPF_LSH | BPF_K, 1),
        S(BPF_ALU | BPF_SUB | BPF_K, 2),
        S(BPF_ALU | BPF_MUL | BPF_K, 3),
        S(BPF_ALU | BPF_DIV | BPF_K, 2),
        S(BPF_ALU | BPF_XOR | BPF_K, 0x10),
        S(BPF_ALU | BPF_OR | BPF_K, 0x100),
        J(BPF_JMP | BPF_JSET | BPF_K, 0x1000, 0, 1),
        S(BPF_RET | BPF_K, 0),
        S(BPF_ALU | BPF_AND | BPF_K, SECCOMP_RET_DATA),
        S(BPF_ALU | BPF_OR | BPF_K, SECCOMP_RET_ERRNO),
        S(BPF_RET | BPF_A, 0),
    };
    REQUIRE(valid(prog));
    // a0 = 0x0203: (0x02 + 0x03) = 5; <<1 = 10; -2 = 8; *3 = 24; /2 = 12; ^0x10 = 28; |0x100 = 0x11c
    CHECK(run_seccomp_filter(prog, data(0, AUDIT_ARCH_X86_64, 0x0203)) == (SECCOMP_RET_ERRNO | 0x11c));
    // Division by a zero X ends the program with 0 (SECCOMP_RET_KILL_THREAD).
    const std::vector<sock_filter> div0 = {
        S(BPF_LDX | BPF_IMM, 0), S(BPF_LD | BPF_IMM, 7), S(BPF_ALU | BPF_DIV | BPF_X, 0),
        S(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
    REQUIRE(valid(div0));
    CHECK(run_seccomp_filter(div0, data(0)) == 0);
    // LEN loads give sizeof(seccomp_data); NEG; TXA; shifts by X use 5 bits.
    const std::vector<sock_filter> misc = {
        S(BPF_LD | BPF_W | BPF_LEN, 0), S(BPF_MISC | BPF_TAX, 0), S(BPF_LD | BPF_IMM, 1),
        S(BPF_ALU | BPF_LSH | BPF_X, 0),  // 1 << (64 & 31) = 1
        S(BPF_ALU | BPF_NEG, 0), S(BPF_ALU | BPF_AND | BPF_K, 0xffff), S(BPF_RET | BPF_A, 0)};
    REQUIRE(valid(misc));
    CHECK(run_seccomp_filter(misc, data(0)) == 0xffff);
    const std::vector<sock_filter> jx = {
        S(BPF_LDX | BPF_W | BPF_LEN, 0), S(BPF_LD | BPF_W | BPF_ABS, 0),
        J(BPF_JMP | BPF_JGT | BPF_X, 0, 0, 1), S(BPF_RET | BPF_K, 1), S(BPF_RET | BPF_K, 2)};
    REQUIRE(valid(jx));
    CHECK(run_seccomp_filter(jx, data(65)) == 1);
    CHECK(run_seccomp_filter(jx, data(64)) == 2);
}

TEST_CASE("checker refuses what the kernel refuses", "[seccomp][cbpf]") {
    const sock_filter ret = S(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    CHECK_FALSE(valid({}));
    CHECK(valid({ret}));
    CHECK(valid(std::vector<sock_filter>(BPF_MAXINSNS, ret)));
    CHECK_FALSE(valid(std::vector<sock_filter>(BPF_MAXINSNS + 1, ret)));
    // Loads: inside seccomp_data, 4-byte aligned, words only.
    CHECK(valid({S(BPF_LD | BPF_W | BPF_ABS, 60), ret}));
    CHECK_FALSE(valid({S(BPF_LD | BPF_W | BPF_ABS, 64), ret}));
    CHECK_FALSE(valid({S(BPF_LD | BPF_W | BPF_ABS, 2), ret}));
    CHECK_FALSE(valid({S(BPF_LD | BPF_H | BPF_ABS, 0), ret}));
    CHECK_FALSE(valid({S(BPF_LD | BPF_B | BPF_ABS, 0), ret}));
    CHECK_FALSE(valid({S(BPF_LD | BPF_W | BPF_IND, 0), ret}));
    CHECK_FALSE(valid({S(BPF_LDX | BPF_B | BPF_MSH, 0), ret}));
    CHECK_FALSE(valid({S(BPF_ALU | BPF_MOD | BPF_K, 3), ret}));
    CHECK_FALSE(valid({S(BPF_ALU | BPF_DIV | BPF_K, 0), ret}));
    CHECK_FALSE(valid({S(BPF_ALU | BPF_LSH | BPF_K, 32), ret}));
    // The last instruction returns; jumps stay inside.
    CHECK_FALSE(valid({ret, S(BPF_LD | BPF_IMM, 0)}));
    CHECK_FALSE(valid({S(BPF_JMP | BPF_JA, 1), ret}));
    CHECK(valid({S(BPF_JMP | BPF_JA, 0), ret}));
    CHECK_FALSE(valid({J(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0), ret}));
    CHECK_FALSE(valid({J(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1), ret}));
    // Scratch memory: slot in range, written on every path before a read.
    CHECK_FALSE(valid({S(BPF_ST, 16), ret}));
    CHECK_FALSE(valid({S(BPF_LD | BPF_MEM, 0), ret}));
    CHECK(valid({S(BPF_ST, 0), S(BPF_LD | BPF_MEM, 0), ret}));
    CHECK_FALSE(valid({J(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1), S(BPF_ST, 2), S(BPF_LDX | BPF_MEM, 2), ret}));
    CHECK(valid({S(BPF_STX, 2), J(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1), S(BPF_ST, 2),
                 S(BPF_LDX | BPF_MEM, 2), ret}));
    // A refused program never allows.
    const std::vector<sock_filter> bad = {S(BPF_LD | BPF_W | BPF_ABS, 2), ret};
    CHECK(run_seccomp_filter(bad, data(0)) == SECCOMP_RET_KILL_PROCESS);
}
