#pragma once
// Pure parser of the kernel's audit records (the text of NETLINK_AUDIT
// messages): `audit(<sec>.<msec>:<serial>): key=value ...`, where untrusted
// strings (path, exe, comm, proctitle, ...) come either "quoted" or, when they
// hold a space, a quote or a control byte, as unquoted hex.
//
// Records of one event share the serial; the kernel ends a syscall's event
// with an EOE record. EventAssembler groups records by serial and turns the
// denials Bulwark cares about into KernelDenial values:
//   - SECCOMP (1326): one record per logged action, outside any syscall event
//     (seccomp runs before the syscall's audit context exists): complete alone.
//   - LANDLOCK_ACCESS (1423, Linux >= 6.15): one per denied access, inside the
//     syscall's event; the SYSCALL record (pid, ppid, syscall, exit, exe),
//     CWD, PATH and PROCTITLE records of the same serial complete it, then EOE.
//   - LANDLOCK_DOMAIN (1424): "status=allocated" (with the pid of the task
//     that called landlock_restrict_self) in the event of the domain's first
//     denial; "status=deallocated denials=N" alone when the domain is freed.
// No kernel, no I/O: the unit tier feeds it captured record texts.
#include <cstdint>
#include <deque>
#include <expected>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace bulwark::kaudit {

// Record types (include/uapi/linux/audit.h; the Landlock ones are newer than
// Debian 12's headers).
namespace rtype {
inline constexpr uint16_t kTrustedApp = 1121;  // AUDIT_TRUSTED_APP: our own barrier marks
inline constexpr uint16_t kSyscall = 1300;
inline constexpr uint16_t kPath = 1302;
inline constexpr uint16_t kCwd = 1307;
inline constexpr uint16_t kEoe = 1320;
inline constexpr uint16_t kSeccomp = 1326;
inline constexpr uint16_t kProctitle = 1327;
inline constexpr uint16_t kLandlockAccess = 1423;
inline constexpr uint16_t kLandlockDomain = 1424;
}  // namespace rtype

struct Field {
    std::string key;
    std::string value;  // decoded: quotes removed, hex strings decoded, "(null)" -> ""
};

struct Record {
    uint16_t type = 0;
    int64_t sec = 0;
    uint32_t msec = 0;
    uint64_t serial = 0;
    std::vector<Field> fields;

    const std::string* get(std::string_view key) const;
    std::optional<uint64_t> get_u64(std::string_view key, int base = 10) const;
    int64_t ts_ns() const { return sec * 1'000'000'000 + int64_t(msec) * 1'000'000; }
};

// Parses one record's body. Errors name the byte offset and what was wrong.
std::expected<Record, std::string> parse_record(uint16_t type, std::string_view body);

// Decodes one raw value: "quoted" -> inner text, 'quoted' -> inner text,
// (null) -> "", an untrusted-string key's unquoted even-length hex -> bytes,
// anything else unchanged.
std::string decode_value(std::string_view key, std::string_view raw);

// SECCOMP_RET_* action of a SECCOMP record's `code` field, by name
// ("errno", "kill_process", "trap", "log", ...).
std::string_view seccomp_action_name(uint32_t code);

struct KernelDenial {
    enum class Layer : uint8_t { Landlock, Seccomp };
    Layer layer = Layer::Landlock;
    uint64_t serial = 0;
    int64_t ts_ns = 0;  // CLOCK_REALTIME of the event, ms resolution
    uint32_t pid = 0;   // initial pid namespace
    uint32_t ppid = 0;  // from SYSCALL (0 when absent)
    std::string comm, exe, cwd, proctitle;
    uint32_t arch = 0;   // AUDIT_ARCH_*
    int64_t syscall = -1;
    std::optional<int64_t> exit;  // SYSCALL exit= (negative errno on failure)
    // seccomp
    uint32_t action = 0;  // code= (SECCOMP_RET_* action)
    int signal = 0;
    // landlock
    uint64_t domain = 0;
    uint32_t domain_creator_pid = 0;  // from the domain's "allocated" record, when seen
    std::string blockers;             // "fs.read_file", "net.connect_tcp", ...
    std::string object;               // path, "tcp 10.0.0.1:443", "pid 42", ...
    std::vector<std::string> path_names;  // PATH records' name= of the event
};

class EventAssembler {
public:
    struct Stats {
        uint64_t records = 0;     // fed
        uint64_t malformed = 0;   // could not be parsed (or a known type lacked a field)
        uint64_t ignored = 0;     // types that carry no decision
        uint64_t events = 0;      // completed events of interest
        uint64_t incomplete = 0;  // events flushed without their EOE
        uint64_t evicted = 0;     // events pushed out by the pending bound
        uint64_t denials = 0;
        uint64_t landlock_domains = 0;  // domains seen allocated
        uint64_t landlock_domain_denials = 0;  // sum of denials= of deallocated domains
        std::string last_error;   // of the last malformed record
    };
    explicit EventAssembler(size_t max_pending = 4096, size_t max_domains = 65536)
        : max_pending_(max_pending), max_domains_(max_domains) {}

    // One record as received. now_ns: any monotonic clock (for flush_older).
    void feed(uint16_t type, std::string_view body, int64_t now_ns, std::vector<KernelDenial>& out);
    // Completes events that waited longer than their EOE should take.
    void flush_older(int64_t cutoff_ns, std::vector<KernelDenial>& out);
    void flush_all(std::vector<KernelDenial>& out);

    const Stats& stats() const { return stats_; }
    size_t pending() const { return pending_.size(); }
    // The pid that created a Landlock domain (0: its allocation was not seen).
    uint32_t domain_creator(uint64_t domain) const;

private:
    struct Pending {
        int64_t first_ns = 0;
        std::vector<Record> records;
    };
    void complete(uint64_t serial, bool with_eoe, std::vector<KernelDenial>& out);
    void emit_event(std::vector<Record>& records, std::vector<KernelDenial>& out);
    void malformed(std::string why);

    size_t max_pending_, max_domains_;
    std::map<uint64_t, Pending> pending_;  // by serial
    std::unordered_map<uint64_t, uint32_t> domains_;
    std::deque<uint64_t> domain_order_;
    Stats stats_;
};

}  // namespace bulwark::kaudit
