#include "profiles/run_features.h"

#include <algorithm>
#include <cmath>

namespace bulwark::profiles {

namespace {

// The top-level `rights` of a file decision's detail (decision_from_event:
// {"dev": .., "ino": .., "rights": N}), 0 when absent or unreadable. Read
// without building the document: a live run's records come here one by one
// under the store's queue lock.
uint32_t detail_rights(const std::string& detail) {
    using json = nlohmann::json;
    struct Reader : nlohmann::json_sax<json> {
        int depth = 0;
        bool at_rights = false;
        uint32_t rights = 0;
        bool value() {
            at_rights = false;
            return true;
        }
        bool null() override { return value(); }
        bool boolean(bool) override { return value(); }
        bool number_integer(number_integer_t) override { return value(); }
        bool number_unsigned(number_unsigned_t v) override {
            if (!at_rights) return value();
            rights = uint32_t(v);
            return false;  // found: stop reading
        }
        bool number_float(number_float_t, const string_t&) override { return value(); }
        bool string(string_t&) override { return value(); }
        bool binary(binary_t&) override { return value(); }
        bool start_object(std::size_t) override {
            at_rights = false;
            ++depth;
            return true;
        }
        bool key(string_t& k) override {
            at_rights = depth == 1 && k == "rights";
            return true;
        }
        bool end_object() override { return --depth, true; }
        bool start_array(std::size_t) override { return value(); }
        bool end_array() override { return true; }
        bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
            return false;
        }
    } reader;
    if (detail.empty()) return 0;
    json::sax_parse(detail, &reader);
    return reader.rights;
}

// What a file operation does to its file, as an area's verb.
std::string_view file_verb(const audit::AuditRecord& r) {
    switch (r.op) {
    case BW_OP_FILE_OPEN:
        return detail_rights(r.detail) & (BW_FS_WRITE | BW_FS_CREATE | BW_FS_REMOVE) ? "write" : "read";
    case BW_OP_EXEC:
    case BW_OP_MMAP_EXEC: return "exec";
    case BW_OP_FILE_CREATE:
    case BW_OP_FILE_UNLINK:
    case BW_OP_FILE_RENAME:
    case BW_OP_FILE_LINK:
    case BW_OP_FILE_TRUNCATE:
    case BW_OP_MKDIR:
    case BW_OP_FILE_SETATTR: return "write";
    default: return {};
    }
}

// "a/./b", "a//b", "./a", "/w/t/../../etc" -> "a/b", "a/b", "a", "/etc".
// ".." takes the component before it away, by the letters: where a symlink
// stands before it the kernel went elsewhere, but a name that climbs out of
// the work directory is judged where it climbs to, not as the work
// directory's (a ".." above a relative name's start, or above /, stays or
// goes as at the root).
std::string fold_dots(std::string_view p) {
    const bool abs = p.starts_with('/');
    std::string out;
    for (size_t i = 0; i <= p.size();) {
        size_t j = p.find('/', i);
        if (j == std::string_view::npos) j = p.size();
        std::string_view part = p.substr(i, j - i);
        size_t last = out.rfind('/');
        std::string_view tail = last == std::string::npos ? std::string_view(out) : std::string_view(out).substr(last + 1);
        if (part == ".." && !tail.empty() && tail != "..") {
            out.erase(last == std::string::npos ? 0 : last);
        } else if (part == ".." && abs) {
            // above the root: the root
        } else if (!part.empty() && part != ".") {
            if (!out.empty() || abs) out += '/';
            out += part;
        }
        i = j + 1;
    }
    if (out.empty()) return abs ? "/" : ".";
    return out;
}

std::string workdir_of(const policy::TaskVars& vars) {
    auto it = vars.find("workdir");
    return it == vars.end() ? std::string(".") : it->second;
}

// The sandbox starts the tool from its verified binary's descriptor
// (execveat: "/dev/fd/N", N whatever number it had): the run's first exec is
// its launch. A later exec through a descriptor (a memfd, a deleted file) is
// named by the form, not the number, so that it is one item, first-time
// where it is unusual.
std::string fd_exec_form(std::string_view path) {
    constexpr std::string_view fd_dir = "/dev/fd/";
    if (!path.starts_with(fd_dir) || path.size() == fd_dir.size()) return {};
    for (char c : path.substr(fd_dir.size()))
        if (c < '0' || c > '9') return {};
    return "/dev/fd/N";
}

}  // namespace

bool path_under(std::string_view path, std::string_view dir) {
    if (dir.empty() || !path.starts_with(dir)) return false;
    return path.size() == dir.size() || path[dir.size()] == '/' || dir.back() == '/';
}

std::string with_vars(std::string_view raw, const policy::TaskVars& vars) {
    const std::string folded = fold_dots(raw);
    std::string_view path = folded;
    std::string_view best_dir, best_name;
    for (std::string_view name : {"workdir", "tmp", "home"}) {
        auto it = vars.find(name);
        if (it == vars.end() || !path_under(path, it->second) || it->second.size() <= best_dir.size()) continue;
        best_dir = it->second;
        best_name = name;
    }
    if (best_dir.empty()) return std::string(path);
    std::string_view rest = path.substr(best_dir.size());
    std::string out = "${" + std::string(best_name) + "}";
    if (!rest.empty() && rest.front() != '/') out += '/';
    return out + std::string(rest);
}

std::string area_of(std::string_view path) {
    // Below the task's own directories the names are the task's data, not
    // the tool's behaviour: the area is the variable.
    if (path.starts_with("${")) {
        auto close = path.find('}');
        return std::string(path.substr(0, close == std::string_view::npos ? path.size() : close + 1));
    }
    // The directory the file is in, cut to kAreaDepth components.
    auto slash = path.rfind('/');
    std::string_view dir = slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
    if (dir.empty()) return path.starts_with('/') ? "/" : std::string(path);
    size_t depth = 0, end = 0;
    for (size_t i = 0; i <= dir.size(); ++i) {
        if (i == dir.size() || (dir[i] == '/' && i > 0)) {
            ++depth;
            end = i;
            if (depth == kAreaDepth) break;
        }
    }
    return std::string(dir.substr(0, end));
}

bool credential_like(std::string_view path) {
    auto slash = path.rfind('/');
    std::string name(slash == std::string_view::npos ? path : path.substr(slash + 1));
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    static constexpr std::string_view exact[] = {".env",        ".netrc",         ".pgpass",  ".git-credentials",
                                                 "credentials", ".npmrc",         ".pypirc",  "id_rsa",
                                                 "id_ed25519",  "id_ecdsa",       "id_dsa",   "authorized_keys",
                                                 "known_hosts", ".htpasswd",      "shadow",   ".dockercfg",
                                                 "config.json", "kubeconfig",     "token",    "secrets.yaml"};
    for (auto e : exact)
        if (name == e) return e != "config.json" || path.find("/.docker/") != std::string_view::npos;
    static constexpr std::string_view suffix[] = {".pem", ".key", ".p12", ".pfx", ".kdbx", ".gpg", ".asc", ".jks"};
    for (auto s : suffix)
        if (name.size() > s.size() && name.ends_with(s)) return true;
    if (name.starts_with(".env.")) return true;
    for (std::string_view dir : {"/.ssh/", "/.aws/", "/.gnupg/", "/.kube/", "/.config/gcloud/"})
        if (path.find(dir) != std::string_view::npos) return true;
    return false;
}

std::string RunFeatures::exec_item(std::string_view path, const policy::TaskVars& vars) {
    std::string fd_form = fd_exec_form(path);
    if (fd_form.empty()) return with_vars(path, vars);
    if (!launched_) {
        launched_ = true;
        return std::string(kLaunch);
    }
    return fd_form;
}

std::vector<std::pair<std::string_view, std::string>> RunFeatures::add(const audit::AuditRecord& r,
                                                                       const policy::TaskVars& vars) {
    std::vector<std::pair<std::string_view, std::string>> added;
    auto put = [&](std::string_view feature, std::string item) {
        auto [it, fresh] = sets[std::string(feature)].insert(std::move(item));
        if (fresh) added.emplace_back(feature, *it);
    };
    if (r.kind != audit::RecordKind::Decision) return added;
    numbers["decisions"] += 1;
    if (r.decision == BW_DECISION_DENY || r.decision == BW_DECISION_AUDIT) numbers["denials"] += 1;
    switch (r.op) {
    case BW_OP_PROC_FORK: numbers["processes"] += 1; return added;
    case BW_OP_PROC_EXIT: return added;
    case BW_OP_PROC_EXEC: put(kExec, exec_item(r.object, vars)); return added;
    case BW_OP_CONNECT:
    case BW_OP_BIND:
    case BW_OP_SENDMSG:
        if (!r.object.empty()) put(kDestination, std::string(audit::op_name(r.op)) + " " + r.object);
        return added;
    case BW_OP_SYSCALL:
        if (r.layer != BW_LAYER_MONITOR && !r.object.empty()) put(kSyscall, r.object);
        return added;
    default: break;
    }
    std::string_view verb = file_verb(r);
    // A file named by its inode only (the kernel could not give its path)
    // has no area to put it in.
    if (verb.empty() || r.object.empty() || r.object.starts_with("inode ")) return added;
    // The monitor records a relative name with the directory it is relative
    // to in front; one it could not resolve is taken relative to the work
    // directory, where the tool starts.
    const std::string path = with_vars(r.object.front() == '/' ? r.object : workdir_of(vars) + "/" + r.object, vars);
    if (verb == "exec" && r.op == BW_OP_EXEC) put(kExec, path);
    put(kFileArea, std::string(verb) + " " + area_of(path));
    if (credential_like(path)) put(kSecret, std::string(verb) + " " + path);
    return added;
}

void RunFeatures::add_exit(const nlohmann::json& d) {
    if (!d.is_object()) return;
    auto num = [&](const char* k) { return d.contains(k) && d[k].is_number() ? d[k].get<double>() : 0.0; };
    // Sizes to a thousandth of their unit: no finding turns on less, and a
    // profile's recent values stay short in its snapshots.
    auto thousandths = [](double v) { return std::round(v * 1000) / 1000; };
    numbers["wall_ms"] = num("wall_us") / 1000.0;
    numbers["cpu_ms"] = (num("cpu_user_us") + num("cpu_system_us")) / 1000.0;
    numbers["memory_mib"] = thousandths(num("peak_memory_bytes") / double(1 << 20));
    numbers["output_kib"] = thousandths(num("output_bytes") / 1024.0);
    // The tool's own process and every one it forked (the monitor's count).
    numbers["processes"] += 1;
    // Supervisor denials (limits, posture) have no decision record.
    if (d.contains("denials") && d["denials"].is_array()) numbers["denials"] += double(d["denials"].size());
    // What the monitor counted: the system calls made, files opened, bytes sent.
    if (auto c = d.find("counted"); c != d.end() && c->is_object()) {
        double opens = 0;
        if (auto calls = c->find("syscalls"); calls != c->end() && calls->is_object())
            for (const auto& [name, n] : calls->items()) {
                sets[std::string(kSyscall)].insert(name);
                if (name == "open" || name == "openat" || name == "openat2" || name == "creat")
                    opens += n.is_number() ? n.get<double>() : 0;
            }
        if (c->value("compat_syscalls", uint64_t(0))) sets[std::string(kSyscall)].insert("(a 32-bit system call ABI)");
        numbers["file_opens"] = opens;
        numbers["sent_kib"] = thousandths(c->value("sent_bytes", 0.0) / 1024.0);
    }
    for (const auto& f : kNumberFeatures)
        if (!f.counted) numbers.try_emplace(std::string(f.name), 0.0);
}

nlohmann::json RunFeatures::to_json() const {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [k, v] : sets) j[k] = v;
    for (const auto& [k, v] : numbers) j[k] = v;
    return j;
}

RunFeatures RunFeatures::from_json(const nlohmann::json& j) {
    RunFeatures f;
    for (const auto& [k, v] : j.items()) {
        if (v.is_array()) f.sets[k] = v.get<std::set<std::string>>();
        else if (v.is_number()) f.numbers[k] = v.get<double>();
    }
    return f;
}

}  // namespace bulwark::profiles
