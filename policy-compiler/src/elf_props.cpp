#include "bulwark/policy/elf_props.h"

#include "bulwark/policy/compile_inputs.h"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>

namespace bulwark {
namespace {

constexpr uint32_t kGnuPropX86Feature1 = 0xc0000002;
constexpr uint32_t kGnuPropAarch64Feature1 = 0xc0000000;

class Reader {
public:
    Reader(const uint8_t* d, size_t n) : d_(d), n_(n) {}
    bool ok(uint64_t off, uint64_t len) const { return off <= n_ && len <= n_ - off; }
    uint64_t u(uint64_t off, int size) const {
        uint64_t v = 0;
        if (!ok(off, size)) return 0;
        for (int i = 0; i < size; ++i) {
            uint64_t b = d_[off + i];
            v |= be_ ? (b << (8 * (size - 1 - i))) : (b << (8 * i));
        }
        return v;
    }
    std::string str(uint64_t off) const {
        if (off >= n_) return "";
        const char* s = reinterpret_cast<const char*>(d_ + off);
        return std::string(s, strnlen(s, n_ - off));
    }
    bool be_ = false;

private:
    const uint8_t* d_;
    size_t n_;
};

struct Phdr { uint64_t type, flags, offset, vaddr, filesz; };

std::expected<ElfProps, std::string> parse(const uint8_t* d, size_t n, const std::string& name) {
    ElfProps p;
    p.path = name;
    if (n < EI_NIDENT || std::memcmp(d, ELFMAG, SELFMAG) != 0) return std::unexpected(name + ": not an ELF file");
    Reader r(d, n);
    bool is64 = d[EI_CLASS] == ELFCLASS64;
    if (d[EI_CLASS] != ELFCLASS64 && d[EI_CLASS] != ELFCLASS32) return std::unexpected(name + ": bad ELF class");
    r.be_ = d[EI_DATA] == ELFDATA2MSB;
    p.is_elf64 = is64;
    int w = is64 ? 8 : 4;
    uint16_t type = r.u(16, 2);
    p.machine = r.u(18, 2);
    uint64_t phoff = is64 ? r.u(32, 8) : r.u(28, 4);
    uint16_t phentsize = r.u(is64 ? 54 : 42, 2);
    uint16_t phnum = r.u(is64 ? 56 : 44, 2);
    if (!r.ok(phoff, uint64_t{phentsize} * phnum)) return std::unexpected(name + ": truncated program headers");
    std::vector<Phdr> ph;
    for (uint16_t i = 0; i < phnum; ++i) {
        uint64_t o = phoff + uint64_t{i} * phentsize;
        Phdr h{};
        h.type = r.u(o, 4);
        if (is64) {
            h.flags = r.u(o + 4, 4); h.offset = r.u(o + 8, 8); h.vaddr = r.u(o + 16, 8); h.filesz = r.u(o + 32, 8);
        } else {
            h.offset = r.u(o + 4, 4); h.vaddr = r.u(o + 8, 4); h.filesz = r.u(o + 16, 4); h.flags = r.u(o + 24, 4);
        }
        ph.push_back(h);
    }
    auto vaddr_to_off = [&](uint64_t va) -> uint64_t {
        for (const auto& h : ph)
            if (h.type == PT_LOAD && va >= h.vaddr && va < h.vaddr + h.filesz) return h.offset + (va - h.vaddr);
        return UINT64_MAX;
    };
    bool has_interp = false;
    bool saw_gnu_stack = false;
    for (const auto& h : ph) {
        switch (h.type) {
            case PT_INTERP: has_interp = true; p.interp = r.str(h.offset); break;
            case PT_GNU_RELRO: p.relro = true; break;
            case PT_GNU_STACK: saw_gnu_stack = true; p.nx_stack = !(h.flags & PF_X); break;
            case PT_DYNAMIC: p.dynamic = true; break;
            case PT_NOTE:
            case PT_GNU_PROPERTY: {
                // Notes: namesz, descsz, type, name (aligned), desc (aligned).
                uint64_t align = is64 ? 8 : 4;
                uint64_t o = h.offset, end = h.offset + h.filesz;
                if (!r.ok(h.offset, h.filesz)) break;
                while (o + 12 <= end) {
                    uint64_t namesz = r.u(o, 4), descsz = r.u(o + 4, 4), ntype = r.u(o + 8, 4);
                    // Property notes are aligned to the word size, other notes to 4.
                    uint64_t a = (h.type == PT_GNU_PROPERTY || ntype == NT_GNU_PROPERTY_TYPE_0) ? align : 4;
                    uint64_t nameoff = o + 12;
                    uint64_t descoff = o + ((12 + namesz + a - 1) & ~(a - 1));
                    if (descoff + descsz > end) break;
                    if (ntype == NT_GNU_PROPERTY_TYPE_0 && namesz == 4 && r.str(nameoff) == "GNU") {
                        uint64_t q = descoff, qend = descoff + descsz;
                        while (q + 8 <= qend) {
                            uint64_t pt = r.u(q, 4), psz = r.u(q + 4, 4);
                            uint64_t val = psz >= 4 ? r.u(q + 8, 4) : 0;
                            if (pt == kGnuPropX86Feature1) { p.cet_ibt = val & 1; p.cet_shstk = val & 2; }
                            if (pt == kGnuPropAarch64Feature1) { p.bti = val & 1; p.pac = val & 2; }
                            q += 8 + ((psz + align - 1) & ~(align - 1));
                        }
                    }
                    uint64_t next = descoff + ((descsz + a - 1) & ~(a - 1));
                    if (next <= o) break;
                    o = next;
                }
                break;
            }
        }
    }
    if (!saw_gnu_stack) p.nx_stack = false;  // no PT_GNU_STACK: executable stack on most arches
    // Dynamic section: flags, needed, strtab, symtab.
    uint64_t strtab = 0, symtab = 0, strsz = 0, syment = is64 ? 24 : 16, hash = 0, gnuhash = 0;
    std::vector<uint64_t> needed_off, runpath_off;
    bool df1_pie = false;
    for (const auto& h : ph) {
        if (h.type != PT_DYNAMIC) continue;
        for (uint64_t o = h.offset; o + 2 * w <= h.offset + h.filesz && r.ok(o, 2 * w); o += 2 * w) {
            int64_t tag = static_cast<int64_t>(r.u(o, w));
            uint64_t val = r.u(o + w, w);
            if (tag == DT_NULL) break;
            switch (tag) {
                case DT_NEEDED: needed_off.push_back(val); break;
                case DT_RUNPATH: case DT_RPATH: runpath_off.push_back(val); break;
                case DT_STRTAB: strtab = val; break;
                case DT_SYMTAB: symtab = val; break;
                case DT_STRSZ: strsz = val; break;
                case DT_SYMENT: syment = val; break;
                case DT_HASH: hash = val; break;
                case DT_GNU_HASH: gnuhash = val; break;
                case DT_BIND_NOW: p.bind_now = true; break;
                case DT_FLAGS: if (val & DF_BIND_NOW) p.bind_now = true; break;
                case DT_FLAGS_1:
                    if (val & DF_1_NOW) p.bind_now = true;
                    if (val & DF_1_PIE) df1_pie = true;
                    break;
            }
        }
    }
    p.pie = df1_pie || (type == ET_DYN && has_interp);
    uint64_t stroff = strtab ? vaddr_to_off(strtab) : UINT64_MAX;
    if (stroff != UINT64_MAX) {
        for (auto o : needed_off) p.needed.push_back(r.str(stroff + o));
        for (auto o : runpath_off) {
            std::string rp = r.str(stroff + o);
            size_t s = 0;
            while (s <= rp.size()) {
                size_t e = rp.find(':', s);
                if (e == std::string::npos) e = rp.size();
                if (e > s) p.runpath.push_back(rp.substr(s, e - s));
                s = e + 1;
            }
        }
    }
    // Undefined dynamic symbols. The symbol count: DT_HASH nchain, else the
    // symtab runs up to the string table (the usual layout).
    uint64_t symoff = symtab ? vaddr_to_off(symtab) : UINT64_MAX;
    if (symoff != UINT64_MAX && stroff != UINT64_MAX && syment) {
        uint64_t count = 0;
        if (hash && vaddr_to_off(hash) != UINT64_MAX) count = r.u(vaddr_to_off(hash) + 4, 4);
        else if (strtab > symtab) count = (strtab - symtab) / syment;
        (void)gnuhash;
        for (uint64_t i = 0; i < count && i < 200000; ++i) {
            uint64_t so = symoff + i * syment;
            if (!r.ok(so, syment)) break;
            uint64_t nameo = r.u(so, 4);
            uint16_t shndx = is64 ? r.u(so + 6, 2) : r.u(so + 14, 2);
            if (shndx != SHN_UNDEF || nameo == 0 || (strsz && nameo >= strsz)) continue;
            std::string s = r.str(stroff + nameo);
            if (s == "__stack_chk_fail" || s == "__stack_chk_guard") p.stack_protector = true;
            if (s.size() > 6 && s.starts_with("__") && s.ends_with("_chk") && s != "__stack_chk_fail")
                p.fortify = true;
        }
    }
    return p;
}

std::vector<std::string> ld_cache_dirs(const std::string& sysroot, policy::InputLog* inputs) {
    // Directories named in ld.so.conf (and its includes) rather than parsing the
    // binary cache format: the cache is built from exactly these.
    std::vector<std::string> dirs;
    std::vector<std::string> files = {sysroot + "/etc/ld.so.conf"};
    std::set<std::string> seen;
    while (!files.empty()) {
        std::string f = files.back();
        files.pop_back();
        if (!seen.insert(f).second) continue;
        if (inputs) inputs->look(policy::Look::Content, f);
        std::ifstream in(f);
        std::string line;
        while (std::getline(in, line)) {
            if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
            while (!line.empty() && isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
            size_t s = line.find_first_not_of(" \t");
            if (s == std::string::npos) continue;
            line = line.substr(s);
            if (line.starts_with("include")) {
                std::string pat = line.substr(7);
                pat = pat.substr(pat.find_first_not_of(" \t"));
                // Only the common "dir/*.conf" form.
                auto slash = pat.rfind('/');
                std::string dir = sysroot + pat.substr(0, slash);
                if (inputs) inputs->look(policy::Look::Listing, dir);
                if (auto* dp = ::opendir(dir.c_str())) {
                    while (auto* de = ::readdir(dp)) {
                        std::string n = de->d_name;
                        if (n.ends_with(".conf")) files.push_back(dir + "/" + n);
                    }
                    ::closedir(dp);
                }
            } else if (line[0] == '/') {
                dirs.push_back(line);
            }
        }
    }
    return dirs;
}

// Files parsed before, by identity (inode_stamp: device, inode, mode, size,
// mtime, ctime): a process that inspects the same binaries launch after
// launch (agentd, a warm microVM's guest agent, where a parse of libc costs
// milliseconds under emulation) parses each once. Only settled files are
// kept (inode_settled: the bundle cache's rule), whose stamp changes with
// their content.
class ParsedFiles {
public:
    std::optional<ElfProps> find(const std::string& stamp) {
        std::lock_guard lk(mu_);
        auto it = parsed_.find(stamp);
        return it == parsed_.end() ? std::nullopt : std::optional<ElfProps>(it->second);
    }
    void keep(const std::string& stamp, const ElfProps& p) {
        std::lock_guard lk(mu_);
        if (parsed_.size() >= 512) parsed_.clear();
        parsed_.emplace(stamp, p);
    }

private:
    std::mutex mu_;
    std::map<std::string, ElfProps> parsed_;
};

ParsedFiles& parsed_files() {
    static ParsedFiles files;
    return files;
}

}  // namespace

std::expected<ElfProps, std::string> read_elf_props_fd(int fd, const std::string& name) {
    struct stat st{};
    if (::fstat(fd, &st) != 0) return std::unexpected(name + ": fstat: " + std::strerror(errno));
    if (!S_ISREG(st.st_mode) || st.st_size == 0) return std::unexpected(name + ": not a regular file");
    const std::string key = policy::inode_settled(st) ? policy::inode_stamp(st) : std::string();
    if (!key.empty())
        if (auto seen = parsed_files().find(key)) {
            seen->path = name;
            return std::move(*seen);
        }
    void* m = ::mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) return std::unexpected(name + ": mmap: " + std::strerror(errno));
    auto r = parse(static_cast<const uint8_t*>(m), st.st_size, name);
    ::munmap(m, st.st_size);
    if (r && !key.empty()) parsed_files().keep(key, *r);
    return r;
}

std::expected<ElfProps, std::string> read_elf_props(const std::string& path, policy::InputLog* inputs) {
    if (inputs) inputs->look(policy::Look::Inode, path);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return std::unexpected(path + ": open: " + std::strerror(errno));
    auto r = read_elf_props_fd(fd, path);
    ::close(fd);
    return r;
}

LibraryClosure resolve_needed(const ElfProps& exe, const std::string& sysroot, policy::InputLog* inputs) {
    const char* triplet = exe.machine == EM_AARCH64 ? "aarch64-linux-gnu" : exe.machine == EM_X86_64 ? "x86_64-linux-gnu" : "";
    std::vector<std::pair<std::string, const char*>> common;  // after the naming object's RUNPATH
    for (const auto& d : ld_cache_dirs(sysroot, inputs)) common.emplace_back(d, "ld.so.conf");
    for (std::string base : {"/lib/", "/usr/lib/"}) common.emplace_back(base + triplet, "default directories");
    for (const char* d : {"/lib64", "/usr/lib64", "/lib", "/usr/lib"}) common.emplace_back(d, "default directories");

    struct Want {
        std::string name;
        std::string by;                    // the naming object's path
        std::vector<std::string> runpath;  // its RUNPATH, $ORIGIN expanded
    };
    std::vector<Want> todo;
    auto queue = [&](const ElfProps& by) {
        std::string origin = std::filesystem::path(by.path.substr(std::min(sysroot.size(), by.path.size())))
                                 .parent_path()
                                 .string();
        std::vector<std::string> runpath;
        for (std::string rp : by.runpath) {
            for (size_t at; (at = rp.find("$ORIGIN")) != std::string::npos;) rp.replace(at, 7, origin);
            runpath.push_back(std::move(rp));
        }
        for (auto it = by.needed.rbegin(); it != by.needed.rend(); ++it) todo.push_back({*it, by.path, runpath});
    };

    LibraryClosure out;
    std::set<std::string> done;
    queue(exe);
    while (!todo.empty()) {
        Want w = std::move(todo.back());
        todo.pop_back();
        if (!done.insert(w.name).second) continue;
        std::vector<std::pair<std::string, const char*>> dirs;
        if (w.name.find('/') != std::string::npos) {
            dirs.emplace_back("", "path in DT_NEEDED");
        } else {
            for (const auto& rp : w.runpath) dirs.emplace_back(rp, "RUNPATH");
            dirs.insert(dirs.end(), common.begin(), common.end());
        }
        bool found = false;
        for (const auto& [d, via] : dirs) {
            auto p = read_elf_props(d.empty() ? sysroot + w.name : sysroot + d + "/" + w.name, inputs);
            if (!p || p->machine != exe.machine || p->is_elf64 != exe.is_elf64) continue;
            queue(*p);
            out.found.push_back({std::move(*p), w.name, w.by, via});
            found = true;
            break;
        }
        if (!found) out.missing.push_back({w.name, w.by});
    }
    return out;
}

std::vector<ElfProps> read_needed_closure(const ElfProps& exe, const std::string& sysroot,
                                          std::vector<std::string>& missing) {
    auto closure = resolve_needed(exe, sysroot);
    std::vector<ElfProps> out;
    for (auto& l : closure.found) out.push_back(std::move(l.props));
    for (const auto& m : closure.missing) missing.push_back(m.name);
    return out;
}

std::pair<bool, bool> elf_property(const ElfProps& p, const std::string& name) {
    if (name == "pie") return {true, p.pie};
    if (name == "relro") return {true, p.relro};
    if (name == "bind-now") return {true, p.bind_now};
    if (name == "nx") return {true, p.nx_stack};
    if (name == "stack-protector") return {true, p.stack_protector};
    if (name == "fortify") return {true, p.fortify};
    if (name == "cet-ibt") return {true, p.cet_ibt};
    if (name == "cet-shstk") return {true, p.cet_shstk};
    if (name == "bti") return {true, p.bti};
    if (name == "pac") return {true, p.pac};
    return {false, false};
}

bool property_covers_libraries(const std::string& name) {
    return !(name == "pie" || name == "stack-protector" || name == "fortify");
}

}  // namespace bulwark
