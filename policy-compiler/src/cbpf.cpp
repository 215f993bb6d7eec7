// Classic-BPF checker and interpreter for seccomp programs. The checks follow
// the kernel's bpf_check_classic(), check_load_and_stores() and
// seccomp_check_filter() (kernel/seccomp.c, net/core/filter.c) rule for rule;
// the interpreter follows the classic->eBPF translation's run-time behaviour
// (division by a zero X returns 0, shifts by X use its low five bits).
#include "bulwark/policy/cbpf.h"

#include <array>
#include <cstddef>
#include "seccomp_format.h"
#include <vector>

namespace bulwark::policy {
namespace {

constexpr uint32_t kDataSize = sizeof(seccomp_data);

// The opcodes seccomp_check_filter lets through (after its rewrite of the
// LEN loads into immediates).
bool seccomp_opcode_allowed(uint16_t code) {
    switch (code) {
        case BPF_LD | BPF_W | BPF_ABS:
        case BPF_LD | BPF_W | BPF_LEN:
        case BPF_LDX | BPF_W | BPF_LEN:
        case BPF_RET | BPF_K:
        case BPF_RET | BPF_A:
        case BPF_ALU | BPF_ADD | BPF_K:
        case BPF_ALU | BPF_ADD | BPF_X:
        case BPF_ALU | BPF_SUB | BPF_K:
        case BPF_ALU | BPF_SUB | BPF_X:
        case BPF_ALU | BPF_MUL | BPF_K:
        case BPF_ALU | BPF_MUL | BPF_X:
        case BPF_ALU | BPF_DIV | BPF_K:
        case BPF_ALU | BPF_DIV | BPF_X:
        case BPF_ALU | BPF_AND | BPF_K:
        case BPF_ALU | BPF_AND | BPF_X:
        case BPF_ALU | BPF_OR | BPF_K:
        case BPF_ALU | BPF_OR | BPF_X:
        case BPF_ALU | BPF_XOR | BPF_K:
        case BPF_ALU | BPF_XOR | BPF_X:
        case BPF_ALU | BPF_LSH | BPF_K:
        case BPF_ALU | BPF_LSH | BPF_X:
        case BPF_ALU | BPF_RSH | BPF_K:
        case BPF_ALU | BPF_RSH | BPF_X:
        case BPF_ALU | BPF_NEG:
        case BPF_LD | BPF_IMM:
        case BPF_LDX | BPF_IMM:
        case BPF_MISC | BPF_TAX:
        case BPF_MISC | BPF_TXA:
        case BPF_LD | BPF_MEM:
        case BPF_LDX | BPF_MEM:
        case BPF_ST:
        case BPF_STX:
        case BPF_JMP | BPF_JA:
        case BPF_JMP | BPF_JEQ | BPF_K:
        case BPF_JMP | BPF_JEQ | BPF_X:
        case BPF_JMP | BPF_JGE | BPF_K:
        case BPF_JMP | BPF_JGE | BPF_X:
        case BPF_JMP | BPF_JGT | BPF_K:
        case BPF_JMP | BPF_JGT | BPF_X:
        case BPF_JMP | BPF_JSET | BPF_K:
        case BPF_JMP | BPF_JSET | BPF_X:
            return true;
        default:
            return false;
    }
}

bool is_conditional_jump(uint16_t code) {
    return BPF_CLASS(code) == BPF_JMP && BPF_OP(code) != BPF_JA;
}

std::unexpected<CbpfError> fail(size_t pc, std::string message) {
    return std::unexpected(CbpfError{pc, std::move(message)});
}

// check_load_and_stores(): every scratch slot read must have been written on
// every path that reaches the read.
std::expected<void, CbpfError> check_memory(std::span<const sock_filter> prog) {
    const size_t n = prog.size();
    std::vector<uint16_t> masks(n, 0xffff);
    uint16_t memvalid = 0;
    for (size_t pc = 0; pc < n; ++pc) {
        memvalid &= masks[pc];
        const sock_filter& f = prog[pc];
        switch (f.code) {
            case BPF_ST:
            case BPF_STX:
                memvalid |= static_cast<uint16_t>(1u << f.k);
                break;
            case BPF_LD | BPF_MEM:
            case BPF_LDX | BPF_MEM:
                if (!(memvalid & (1u << f.k)))
                    return fail(pc, detail::format("reads scratch slot M[{}] before any write", f.k));
                break;
            case BPF_JMP | BPF_JA:
                masks[pc + 1 + f.k] &= memvalid;
                memvalid = 0xffff;
                break;
            default:
                if (is_conditional_jump(f.code)) {
                    masks[pc + 1 + f.jt] &= memvalid;
                    masks[pc + 1 + f.jf] &= memvalid;
                    memvalid = 0xffff;
                }
                break;
        }
    }
    return {};
}

}  // namespace

std::expected<void, CbpfError> check_seccomp_filter(std::span<const sock_filter> prog) {
    const size_t n = prog.size();
    if (n == 0) return fail(0, "empty program");
    if (n > BPF_MAXINSNS)
        return fail(0, detail::format("{} instructions, the kernel accepts at most {}", n,
                                   BPF_MAXINSNS));
    for (size_t pc = 0; pc < n; ++pc) {
        const sock_filter& f = prog[pc];
        if (!seccomp_opcode_allowed(f.code))
            return fail(pc, detail::format("opcode {:#06x} is not allowed in a seccomp filter", f.code));
        switch (f.code) {
            case BPF_LD | BPF_W | BPF_ABS:
                if (f.k >= kDataSize || (f.k & 3) != 0)
                    return fail(pc, detail::format("absolute load at offset {} is outside struct "
                                                "seccomp_data or not 4-byte aligned",
                                                f.k));
                break;
            case BPF_ALU | BPF_DIV | BPF_K:
                if (f.k == 0) return fail(pc, "division by constant zero");
                break;
            case BPF_ALU | BPF_LSH | BPF_K:
            case BPF_ALU | BPF_RSH | BPF_K:
                if (f.k >= 32) return fail(pc, detail::format("shift by {} (must be < 32)", f.k));
                break;
            case BPF_LD | BPF_MEM:
            case BPF_LDX | BPF_MEM:
            case BPF_ST:
            case BPF_STX:
                if (f.k >= BPF_MEMWORDS)
                    return fail(pc, detail::format("scratch slot {} out of range (< {})", f.k,
                                                BPF_MEMWORDS));
                break;
            case BPF_JMP | BPF_JA:
                if (f.k >= n - pc - 1)
                    return fail(pc, detail::format("jump by {} leaves the program", f.k));
                break;
            default:
                if (is_conditional_jump(f.code) &&
                    (pc + f.jt + 1 >= n || pc + f.jf + 1 >= n))
                    return fail(pc, detail::format("conditional jump ({}, {}) leaves the program",
                                                f.jt, f.jf));
                break;
        }
    }
    const uint16_t last = prog[n - 1].code;
    if (last != (BPF_RET | BPF_K) && last != (BPF_RET | BPF_A))
        return fail(n - 1, "the last instruction is not a return");
    return check_memory(prog);
}

uint32_t run_seccomp_filter(std::span<const sock_filter> prog, const seccomp_data& data, bool* read_more) {
    if (read_more) *read_more = false;
    if (!check_seccomp_filter(prog)) return SECCOMP_RET_KILL_PROCESS;

    std::array<uint32_t, BPF_MEMWORDS> mem{};
    uint32_t a = 0, x = 0;
    auto load_word = [&data, read_more](uint32_t off) {
        if (read_more && off >= offsetof(seccomp_data, instruction_pointer)) *read_more = true;
        uint32_t w;
        __builtin_memcpy(&w, reinterpret_cast<const unsigned char*>(&data) + off, sizeof w);
        return w;
    };
    // Jumps only go forward and the last instruction returns, so this loop
    // runs at most prog.size() times.
    for (size_t pc = 0; pc < prog.size(); ++pc) {
        const sock_filter& f = prog[pc];
        switch (f.code) {
            case BPF_LD | BPF_W | BPF_ABS: a = load_word(f.k); break;
            case BPF_LD | BPF_W | BPF_LEN: a = kDataSize; break;
            case BPF_LDX | BPF_W | BPF_LEN: x = kDataSize; break;
            case BPF_LD | BPF_IMM: a = f.k; break;
            case BPF_LDX | BPF_IMM: x = f.k; break;
            case BPF_LD | BPF_MEM: a = mem[f.k]; break;
            case BPF_LDX | BPF_MEM: x = mem[f.k]; break;
            case BPF_ST: mem[f.k] = a; break;
            case BPF_STX: mem[f.k] = x; break;
            case BPF_MISC | BPF_TAX: x = a; break;
            case BPF_MISC | BPF_TXA: a = x; break;
            case BPF_RET | BPF_K: return f.k;
            case BPF_RET | BPF_A: return a;
            case BPF_ALU | BPF_ADD | BPF_K: a += f.k; break;
            case BPF_ALU | BPF_ADD | BPF_X: a += x; break;
            case BPF_ALU | BPF_SUB | BPF_K: a -= f.k; break;
            case BPF_ALU | BPF_SUB | BPF_X: a -= x; break;
            case BPF_ALU | BPF_MUL | BPF_K: a *= f.k; break;
            case BPF_ALU | BPF_MUL | BPF_X: a *= x; break;
            case BPF_ALU | BPF_DIV | BPF_K: a /= f.k; break;
            case BPF_ALU | BPF_DIV | BPF_X:
                if (x == 0) return 0;  // the kernel's translation exits with 0
                a /= x;
                break;
            case BPF_ALU | BPF_AND | BPF_K: a &= f.k; break;
            case BPF_ALU | BPF_AND | BPF_X: a &= x; break;
            case BPF_ALU | BPF_OR | BPF_K: a |= f.k; break;
            case BPF_ALU | BPF_OR | BPF_X: a |= x; break;
            case BPF_ALU | BPF_XOR | BPF_K: a ^= f.k; break;
            case BPF_ALU | BPF_XOR | BPF_X: a ^= x; break;
            case BPF_ALU | BPF_LSH | BPF_K: a <<= f.k; break;
            case BPF_ALU | BPF_LSH | BPF_X: a <<= (x & 31); break;
            case BPF_ALU | BPF_RSH | BPF_K: a >>= f.k; break;
            case BPF_ALU | BPF_RSH | BPF_X: a >>= (x & 31); break;
            case BPF_ALU | BPF_NEG: a = 0u - a; break;
            case BPF_JMP | BPF_JA: pc += f.k; break;
            case BPF_JMP | BPF_JEQ | BPF_K: pc += (a == f.k) ? f.jt : f.jf; break;
            case BPF_JMP | BPF_JEQ | BPF_X: pc += (a == x) ? f.jt : f.jf; break;
            case BPF_JMP | BPF_JGE | BPF_K: pc += (a >= f.k) ? f.jt : f.jf; break;
            case BPF_JMP | BPF_JGE | BPF_X: pc += (a >= x) ? f.jt : f.jf; break;
            case BPF_JMP | BPF_JGT | BPF_K: pc += (a > f.k) ? f.jt : f.jf; break;
            case BPF_JMP | BPF_JGT | BPF_X: pc += (a > x) ? f.jt : f.jf; break;
            case BPF_JMP | BPF_JSET | BPF_K: pc += (a & f.k) ? f.jt : f.jf; break;
            case BPF_JMP | BPF_JSET | BPF_X: pc += (a & x) ? f.jt : f.jf; break;
            default: return SECCOMP_RET_KILL_PROCESS;  // unreachable after the check
        }
    }
    return SECCOMP_RET_KILL_PROCESS;  // unreachable: the last instruction returns
}

}  // namespace bulwark::policy
