// The bundle cache: one JSON entry per (compiler build, rule file, options,
// working directory), holding the facts the compile learnt and its bundle.
#include "bulwark/policy/compile_cache.h"
#include "bulwark/policy/private_files.h"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace bulwark::policy {
namespace {

using json = nlohmann::json;

constexpr int kFormat = 1;
constexpr size_t kMaxEntryBytes = 64u << 20;
// Entries beyond this many are pruned, oldest first, when one is stored.
constexpr size_t kKeepEntries = 256;

int note_build_id(struct dl_phdr_info* info, size_t, void* out) {
    auto& id = *static_cast<std::string*>(out);
    // The first object is the program itself.
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const auto& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_NOTE) continue;
        auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
        const unsigned char* end = p + ph.p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(p);
            const unsigned char* name = p + sizeof(ElfW(Nhdr));
            const unsigned char* desc = name + ((nh->n_namesz + 3) & ~3u);
            if (desc + nh->n_descsz > end) break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
                static constexpr char kHex[] = "0123456789abcdef";
                for (unsigned k = 0; k < nh->n_descsz; ++k) {
                    id += kHex[desc[k] >> 4];
                    id += kHex[desc[k] & 15];
                }
                return 1;
            }
            p = desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
    return 1;
}

std::string limits_text(const InputLimits& l) {
    return std::to_string(l.max_file_bytes) + "," + std::to_string(l.max_string_bytes) + "," +
           std::to_string(l.max_description_bytes) + "," + std::to_string(l.max_nesting) + "," +
           std::to_string(l.max_nodes) + "," + std::to_string(l.max_extends_depth);
}

// Everything besides the filesystem that decides what a compile produces.
json key_material(const std::string& build, const std::string& path, const CompileOptions& opts) {
    char cwd[PATH_MAX];
    struct utsname u{};
    ::uname(&u);  // an imported seccomp profile's minKernel is judged against the running kernel
    return {{"format", kFormat},
            {"build", build},
            {"kernel", std::string(u.release) + " " + u.machine},
            {"cwd", ::getcwd(cwd, sizeof cwd) ? std::string(cwd) : std::string()},
            {"file", path},
            {"rules_dirs", opts.rules_dirs},
            {"library_root", opts.library_root},
            {"limits", limits_text(opts.limits)},
            {"warnings_as_errors", opts.warnings_as_errors}};
}

// The entry's bytes, when it is one this user may trust.
std::expected<std::string, std::string> read_entry(const std::string& file) {
    auto text = read_private_file(file, kMaxEntryBytes);
    if (text) return std::move(*text);
    switch (text.error().kind) {
        case PrivateReadError::Kind::Absent: return std::unexpected("no entry");
        case PrivateReadError::Kind::Untrusted: return std::unexpected("entry " + file + " ignored: " + text.error().why);
        case PrivateReadError::Kind::TooLarge: return std::unexpected("entry larger than 64 MiB");
        case PrivateReadError::Kind::Io: break;
    }
    return std::unexpected("entry: " + text.error().why);
}

// FNV-1a, 64 bits, as hex: the entry's name from its key, and the checksum
// of its bundle text (against a damaged file; who may write an entry is
// settled by its owner and mode).
std::string fnv_hex(std::string_view bytes) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
    char out[17];
    std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
    return out;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// An entry is two lines' worth: a header (key, facts, the bundle text's
// checksum) on the first line, the bundle's JSON text after it. The cached
// bundle, when every fact still holds.
std::expected<Bundle, std::string> reuse(const std::string& file, const json& key) {
    auto text = read_entry(file);
    if (!text) return std::unexpected(text.error());
    const size_t nl = text->find('\n');
    if (nl == std::string::npos) return std::unexpected("entry has no bundle");
    json head = json::parse(std::string_view(*text).substr(0, nl), nullptr, false);
    if (head.is_discarded() || !head.is_object()) return std::unexpected("entry is not JSON");
    if (head.value("key", json()) != key) return std::unexpected("entry is another compile's");
    const json& facts = head.value("facts", json());
    if (!facts.is_array()) return std::unexpected("entry has no facts");
    std::vector<InputFact> known;
    known.reserve(facts.size());
    for (const auto& f : facts) {
        Look how;
        if (!f.is_array() || f.size() != 3 || !f[0].is_string() || !f[1].is_string() || !f[2].is_string() ||
            !look_from_name(f[0].get<std::string>(), how))
            return std::unexpected("entry has a malformed fact");
        known.push_back({how, f[1].get<std::string>(), f[2].get<std::string>()});
    }
    if (std::string changed = first_changed(known); !changed.empty()) return std::unexpected(changed);
    const std::string_view body = std::string_view(*text).substr(nl + 1);
    if (fnv_hex(body) != head.value("bundle_fnv1a", std::string())) return std::unexpected("entry is damaged");
    json b = json::parse(body, nullptr, false);
    if (b.is_discarded() || !b.is_object() || b.value("hash", std::string()).empty())
        return std::unexpected("entry has no hashed bundle");
    auto bundle = bundle_from_own_json(b);
    if (!bundle) return std::unexpected("entry: " + bundle.error());
    return std::move(*bundle);
}

void prune(const std::string& dir) {
    DIR* dp = ::opendir(dir.c_str());
    if (!dp) return;
    std::vector<std::pair<int64_t, std::string>> entries;
    while (auto* de = ::readdir(dp)) {
        std::string n = de->d_name;
        struct stat st{};
        if (!n.ends_with(".json") || ::fstatat(::dirfd(dp), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        entries.emplace_back(int64_t(st.st_mtim.tv_sec), n);
    }
    ::closedir(dp);
    if (entries.size() <= kKeepEntries) return;
    std::sort(entries.begin(), entries.end());
    for (size_t i = 0; i + kKeepEntries * 3 / 4 < entries.size(); ++i) ::unlink((dir + "/" + entries[i].second).c_str());
}

// Writes the entry beside its place and renames it there; "" or why not.
std::string store(const std::string& dir, const std::string& file, json head, const Bundle& bundle) {
    std::string body = dump(bundle_to_json(bundle));
    head["bundle_fnv1a"] = fnv_hex(body);
    if (std::string why = write_private_file(file, dump(head) + "\n" + body); !why.empty()) return why;
    prune(dir);
    return "";
}

}  // namespace

std::string own_build_id() {
    static const std::string id = [] {
        std::string out;
        dl_iterate_phdr(note_build_id, &out);
        return out;
    }();
    return id;
}

std::optional<CompileCache> CompileCache::from_environment(std::string& why_not) {
    const char* env = std::getenv("BULWARK_BUNDLE_CACHE");
    if (env && std::string_view(env) == "off") {
        why_not = "off (BULWARK_BUNDLE_CACHE=off)";
        return std::nullopt;
    }
    return at(env && *env ? env : "/var/cache/bulwark/bundles", why_not);
}

std::optional<CompileCache> CompileCache::at(const std::string& dir, std::string& why_not) {
    std::string build = own_build_id();
    if (build.empty()) {
        why_not = "off: this program carries no GNU build id";
        return std::nullopt;
    }
    if (dir.empty() || dir[0] != '/') {
        why_not = "off: the cache directory must be an absolute path, not \"" + dir + "\"";
        return std::nullopt;
    }
    // Its parents as the system made them; the directory itself this user's.
    if (std::string bad = make_private_dir(dir); !bad.empty()) {
        why_not = "off: " + bad;
        return std::nullopt;
    }
    return CompileCache(dir, build);
}

CachedCompile CompileCache::compile_file(const std::string& path, const CompileOptions& opts) const {
    CachedCompile out;
    if (opts.seccomp_compiler || opts.inputs) {
        out.result = policy::compile_file(path, opts);
        out.cache = "not stored: a compile with its own seccomp compiler or input log";
        return out;
    }
    const json key = key_material(build_, path, opts);
    const std::string file = dir_ + "/" + fnv_hex(dump(key)) + ".json";
    auto cached = reuse(file, key);
    if (cached) {
        out.result.bundle = std::move(*cached);
        out.cache = "hit";
        return out;
    }
    InputLog log;
    CompileOptions logged = opts;
    logged.inputs = &log;
    out.result = policy::compile_file(path, logged);
    const std::string missed = cached.error();
    if (!out.result.ok() || !out.result.diagnostics.empty()) {
        out.cache = "not stored: the compile said something (" + missed + ")";
        return out;
    }
    if (!log.settled()) {
        out.cache = "not stored: an input changed in the last seconds (" + missed + ")";
        return out;
    }
    json facts = json::array();
    for (const auto& f : log.facts()) facts.push_back({look_name(f.how), f.path, f.seen});
    std::string why = store(dir_, file, {{"key", key}, {"facts", std::move(facts)}}, *out.result.bundle);
    out.cache = why.empty() ? "stored (" + missed + ")" : "not stored: " + why + " (" + missed + ")";
    return out;
}

}  // namespace bulwark::policy
