#include "kaudit/kernel_audit_parse.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>

namespace bulwark::kaudit {
namespace {

// Keys whose values the kernel writes with audit_log_untrustedstring (or
// always as hex, like proctitle): an unquoted value there is hex.
constexpr std::array<std::string_view, 9> kUntrusted = {"comm", "exe", "path", "name", "cwd",
                                                        "proctitle", "ocomm", "opath", "dev"};

bool is_untrusted(std::string_view key) {
    return std::find(kUntrusted.begin(), kUntrusted.end(), key) != kUntrusted.end();
}

int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

template <typename T>
bool parse_num(std::string_view s, T& out, int base = 10) {
    if (s.empty()) return false;
    auto r = std::from_chars(s.data(), s.data() + s.size(), out, base);
    return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

bool is_key_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

}  // namespace

const std::string* Record::get(std::string_view key) const {
    for (const auto& f : fields)
        if (f.key == key) return &f.value;
    return nullptr;
}

std::optional<uint64_t> Record::get_u64(std::string_view key, int base) const {
    const std::string* v = get(key);
    uint64_t n = 0;
    if (!v) return std::nullopt;
    std::string_view s(*v);
    if (base == 16 && (s.starts_with("0x") || s.starts_with("0X"))) s.remove_prefix(2);
    if (!parse_num(s, n, base)) return std::nullopt;
    return n;
}

std::string decode_value(std::string_view key, std::string_view raw) {
    if (raw.size() >= 2 && ((raw.front() == '"' && raw.back() == '"') || (raw.front() == '\'' && raw.back() == '\'')))
        return std::string(raw.substr(1, raw.size() - 2));
    if (raw == "(null)" || raw == "(none)") return "";
    if (is_untrusted(key) && !raw.empty() && raw.size() % 2 == 0) {
        std::string out;
        out.reserve(raw.size() / 2);
        for (size_t i = 0; i < raw.size(); i += 2) {
            int hi = hexval(raw[i]), lo = hexval(raw[i + 1]);
            if (hi < 0 || lo < 0) return std::string(raw);
            out.push_back(static_cast<char>(hi * 16 + lo));
        }
        // proctitle separates argv with NULs: show them as spaces.
        if (key == "proctitle") std::replace(out.begin(), out.end(), '\0', ' ');
        return out;
    }
    return std::string(raw);
}

std::expected<Record, std::string> parse_record(uint16_t type, std::string_view body) {
    Record r;
    r.type = type;
    // The netlink payload may carry a trailing NUL or newline.
    while (!body.empty() && (body.back() == '\0' || body.back() == '\n')) body.remove_suffix(1);
    constexpr std::string_view kHead = "audit(";
    if (!body.starts_with(kHead)) return std::unexpected("offset 0: expected 'audit(' header");
    size_t close = body.find("): ", kHead.size());
    size_t close_end = close == std::string_view::npos ? std::string_view::npos : close + 3;
    if (close == std::string_view::npos && body.ends_with("):")) {
        close = body.size() - 2;
        close_end = body.size();
    }
    if (close == std::string_view::npos) return std::unexpected("offset 6: header without '): '");
    std::string_view stamp = body.substr(kHead.size(), close - kHead.size());
    size_t dot = stamp.find('.'), colon = stamp.find(':');
    if (dot == std::string_view::npos || colon == std::string_view::npos || colon < dot)
        return std::unexpected("offset 6: timestamp is not <sec>.<msec>:<serial>");
    if (!parse_num(stamp.substr(0, dot), r.sec) || !parse_num(stamp.substr(dot + 1, colon - dot - 1), r.msec) ||
        r.msec > 999 || !parse_num(stamp.substr(colon + 1), r.serial))
        return std::unexpected("offset 6: bad number in timestamp '" + std::string(stamp) + "'");
    // ts_ns() must fit an int64_t: seconds from the epoch to the year 2262.
    if (r.sec < 0 || r.sec > (INT64_MAX - 999'000'000) / 1'000'000'000)
        return std::unexpected("offset 6: timestamp out of range '" + std::string(stamp) + "'");

    size_t i = close_end;
    while (i < body.size()) {
        if (body[i] == ' ') {
            ++i;
            continue;
        }
        size_t ks = i;
        while (i < body.size() && is_key_char(body[i])) ++i;
        if (i == ks || i >= body.size() || body[i] != '=')
            return std::unexpected("offset " + std::to_string(i) + ": expected key=value");
        std::string_view key = body.substr(ks, i - ks);
        ++i;  // '='
        size_t vs = i;
        if (i < body.size() && (body[i] == '"' || body[i] == '\'')) {
            char q = body[i];
            size_t end = body.find(q, i + 1);
            if (end == std::string_view::npos)
                return std::unexpected("offset " + std::to_string(vs) + ": unterminated quote in " + std::string(key));
            i = end + 1;
        } else {
            while (i < body.size() && body[i] != ' ') ++i;
        }
        r.fields.push_back({std::string(key), decode_value(key, body.substr(vs, i - vs))});
    }
    return r;
}

std::string_view seccomp_action_name(uint32_t code) {
    switch (code & 0xffff0000u) {
        case 0x80000000u: return "kill_process";
        case 0x00000000u: return "kill_thread";
        case 0x00030000u: return "trap";
        case 0x00050000u: return "errno";
        case 0x7fc00000u: return "user_notif";
        case 0x7ff00000u: return "trace";
        case 0x7ffc0000u: return "log";
        case 0x7fff0000u: return "allow";
        default: return "unknown";
    }
}

void EventAssembler::malformed(std::string why) {
    ++stats_.malformed;
    stats_.last_error = std::move(why);
}

uint32_t EventAssembler::domain_creator(uint64_t domain) const {
    auto it = domains_.find(domain);
    return it == domains_.end() ? 0 : it->second;
}

void EventAssembler::feed(uint16_t type, std::string_view body, int64_t now_ns, std::vector<KernelDenial>& out) {
    ++stats_.records;
    switch (type) {
        case rtype::kSyscall: case rtype::kPath: case rtype::kCwd: case rtype::kEoe: case rtype::kSeccomp:
        case rtype::kProctitle: case rtype::kLandlockAccess: case rtype::kLandlockDomain: break;
        default: ++stats_.ignored; return;
    }
    auto rec = parse_record(type, body);
    if (!rec) {
        malformed("type " + std::to_string(type) + ": " + rec.error());
        return;
    }
    if (type == rtype::kEoe) {
        complete(rec->serial, true, out);
        return;
    }
    if (type == rtype::kSeccomp) {
        // Logged at syscall entry, before the syscall's audit context: a
        // SECCOMP record is an event of its own.
        std::vector<Record> one{std::move(*rec)};
        emit_event(one, out);
        return;
    }
    if (type == rtype::kLandlockDomain) {
        const std::string* status = rec->get("status");
        auto domain = rec->get_u64("domain", 16);
        if (!status || !domain) {
            malformed("LANDLOCK_DOMAIN serial " + std::to_string(rec->serial) + ": no status or domain");
            return;
        }
        if (*status == "deallocated") {
            // Sent on its own when the domain is freed: the kernel's own count.
            stats_.landlock_domain_denials += rec->get_u64("denials").value_or(0);
            return;
        }
        if (*status == "allocated") {
            ++stats_.landlock_domains;
            auto pid = rec->get_u64("pid");
            if (pid && domains_.emplace(*domain, static_cast<uint32_t>(*pid)).second) {
                domain_order_.push_back(*domain);
                while (domain_order_.size() > max_domains_) {
                    domains_.erase(domain_order_.front());
                    domain_order_.pop_front();
                }
            }
        }
    }
    auto [it, fresh] = pending_.try_emplace(rec->serial);
    if (fresh) it->second.first_ns = now_ns;
    it->second.records.push_back(std::move(*rec));
    while (pending_.size() > max_pending_) {
        ++stats_.evicted;
        complete(pending_.begin()->first, false, out);
    }
}

void EventAssembler::flush_older(int64_t cutoff_ns, std::vector<KernelDenial>& out) {
    std::vector<uint64_t> due;
    for (const auto& [serial, p] : pending_)
        if (p.first_ns <= cutoff_ns) due.push_back(serial);
    for (uint64_t s : due) complete(s, false, out);
}

void EventAssembler::flush_all(std::vector<KernelDenial>& out) {
    while (!pending_.empty()) complete(pending_.begin()->first, false, out);
}

void EventAssembler::complete(uint64_t serial, bool with_eoe, std::vector<KernelDenial>& out) {
    auto it = pending_.find(serial);
    if (it == pending_.end()) return;  // an EOE of an event with nothing of interest
    std::vector<Record> records = std::move(it->second.records);
    pending_.erase(it);
    bool interesting = std::any_of(records.begin(), records.end(),
                                   [](const Record& r) { return r.type == rtype::kLandlockAccess; });
    if (interesting && !with_eoe) ++stats_.incomplete;
    emit_event(records, out);
}

void EventAssembler::emit_event(std::vector<Record>& records, std::vector<KernelDenial>& out) {
    const Record* sys = nullptr;
    const Record* cwd = nullptr;
    const Record* title = nullptr;
    std::vector<std::string> names;
    for (const auto& r : records) {
        if (r.type == rtype::kSyscall) sys = &r;
        else if (r.type == rtype::kCwd) cwd = &r;
        else if (r.type == rtype::kProctitle) title = &r;
        else if (r.type == rtype::kPath)
            if (const auto* n = r.get("name")) names.push_back(*n);
    }
    bool any = false;
    for (const auto& r : records) {
        if (r.type != rtype::kLandlockAccess && r.type != rtype::kSeccomp) continue;
        KernelDenial d;
        d.serial = r.serial;
        d.ts_ns = r.ts_ns();
        if (r.type == rtype::kSeccomp) {
            d.layer = KernelDenial::Layer::Seccomp;
            auto pid = r.get_u64("pid");
            auto nr = r.get_u64("syscall");
            auto arch = r.get_u64("arch", 16);
            auto code = r.get_u64("code", 16);
            if (!pid || !nr || !arch || !code) {
                malformed("SECCOMP serial " + std::to_string(r.serial) + ": pid, syscall, arch or code missing");
                continue;
            }
            d.pid = static_cast<uint32_t>(*pid);
            d.syscall = static_cast<int64_t>(*nr);
            d.arch = static_cast<uint32_t>(*arch);
            d.action = static_cast<uint32_t>(*code);
            d.signal = static_cast<int>(r.get_u64("sig").value_or(0));
            if (const auto* v = r.get("comm")) d.comm = *v;
            if (const auto* v = r.get("exe")) d.exe = *v;
        } else {
            d.layer = KernelDenial::Layer::Landlock;
            auto domain = r.get_u64("domain", 16);
            const std::string* blockers = r.get("blockers");
            if (!domain || !blockers || blockers->empty()) {
                malformed("LANDLOCK_ACCESS serial " + std::to_string(r.serial) + ": domain or blockers missing");
                continue;
            }
            d.domain = *domain;
            d.blockers = *blockers;
            d.domain_creator_pid = domain_creator(d.domain);
            if (const auto* p = r.get("path")) d.object = *p;
            else if (const auto* da = r.get("daddr")) d.object = "tcp " + *da + ":" + (r.get("dest") ? *r.get("dest") : "?");
            else if (const auto* sa = r.get("saddr")) d.object = "tcp " + *sa + ":" + (r.get("src") ? *r.get("src") : "?");
            else if (const auto* op = r.get("opid")) d.object = "pid " + *op;
            else if (const auto* dev = r.get("dev")) d.object = "dev " + *dev + (r.get("ino") ? " ino " + *r.get("ino") : "");
            if (sys) {
                d.pid = static_cast<uint32_t>(sys->get_u64("pid").value_or(0));
                d.ppid = static_cast<uint32_t>(sys->get_u64("ppid").value_or(0));
                d.syscall = static_cast<int64_t>(sys->get_u64("syscall").value_or(uint64_t(-1)));
                d.arch = static_cast<uint32_t>(sys->get_u64("arch", 16).value_or(0));
                if (const auto* v = sys->get("exit")) {
                    int64_t e = 0;
                    if (parse_num(std::string_view(*v), e)) d.exit = e;
                }
                if (const auto* v = sys->get("comm")) d.comm = *v;
                if (const auto* v = sys->get("exe")) d.exe = *v;
            }
            if (cwd)
                if (const auto* v = cwd->get("cwd")) d.cwd = *v;
            d.path_names = names;
            if (d.object.empty() && !names.empty()) d.object = names.front();
        }
        if (title)
            if (const auto* v = title->get("proctitle")) d.proctitle = *v;
        any = true;
        ++stats_.denials;
        out.push_back(std::move(d));
    }
    if (any) ++stats_.events;
}

}  // namespace bulwark::kaudit
