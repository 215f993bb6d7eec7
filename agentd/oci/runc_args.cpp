#include "oci/runc_args.h"

#include <algorithm>
#include <map>
#include <set>

namespace bulwark::oci {

namespace {

const std::set<std::string>& global_values() {
    static const std::set<std::string> s{"root", "log", "log-format", "criu", "rootless", "bulwark-config"};
    return s;
}

const std::set<std::string>& command_values(const std::string& cmd) {
    static const std::map<std::string, std::set<std::string>> m{
        {"create", {"bundle", "b", "console-socket", "pid-file", "preserve-fds", "pidfd-socket"}},
        {"run", {"bundle", "b", "console-socket", "pid-file", "preserve-fds", "pidfd-socket"}},
        {"exec",
         {"console-socket", "pidfd-socket", "cwd", "env", "e", "user", "u", "additional-gids", "g", "process", "p",
          "process-label", "apparmor", "cap", "c", "pid-file", "preserve-fds", "cgroup"}},
        {"kill", {}},
        {"delete", {}},
        {"ps", {"format", "f"}},
        {"update", {"resources", "r", "blkio-weight", "cpu-period", "cpu-quota", "cpu-rt-period", "cpu-rt-runtime",
                    "cpu-share", "cpuset-cpus", "cpuset-mems", "kernel-memory", "kernel-memory-tcp", "memory",
                    "memory-reservation", "memory-swap", "pids-limit", "l3-cache-schema", "mem-bw-schema"}},
        {"events", {"interval"}},
        {"checkpoint", {"image-path", "work-path", "parent-path", "page-server", "manage-cgroups-mode",
                        "empty-ns", "status-fd", "lsm-profile", "lsm-mount-context"}},
        {"restore", {"console-socket", "image-path", "work-path", "manage-cgroups-mode", "bundle", "b",
                     "pid-file", "empty-ns", "lsm-profile", "lsm-mount-context"}},
        {"list", {"format", "f"}},
        {"spec", {"bundle", "b"}},
    };
    static const std::set<std::string> none;
    auto it = m.find(cmd);
    return it == m.end() ? none : it->second;
}

// Reads options from words[i...] until the first non-option; returns the index after them.
size_t read_options(const std::vector<std::string>& w, size_t i, const std::set<std::string>& takes_value,
                    std::vector<Option>& out, bool& dashdash) {
    while (i < w.size()) {
        const std::string& s = w[i];
        if (s == "--") {
            dashdash = true;
            return i + 1;
        }
        if (s.size() < 2 || s[0] != '-') return i;
        std::string name = s.substr(s[1] == '-' ? 2 : 1);
        Option o;
        if (auto eq = name.find('='); eq != std::string::npos) {
            o.name = name.substr(0, eq);
            o.value = name.substr(eq + 1);
            o.inline_value = true;
        } else {
            o.name = name;
            if (takes_value.contains(name) && i + 1 < w.size()) o.value = w[++i];
        }
        out.push_back(std::move(o));
        ++i;
    }
    return i;
}

void emit(const std::vector<Option>& opts, std::vector<std::string>& out) {
    for (const auto& o : opts) {
        if (o.value && o.inline_value) {
            out.push_back("--" + o.name + "=" + *o.value);
        } else {
            out.push_back("--" + o.name);
            if (o.value) out.push_back(*o.value);
        }
    }
}

bool named(const Option& o, std::initializer_list<const char*> names) {
    return std::any_of(names.begin(), names.end(), [&](const char* n) { return o.name == n; });
}

}  // namespace

RuncArgs parse_runc_args(const std::vector<std::string>& words) {
    RuncArgs a;
    bool dd = false;
    size_t i = read_options(words, 0, global_values(), a.global, dd);
    if (dd || i >= words.size()) return a;
    a.command = words[i++];
    i = read_options(words, i, command_values(a.command), a.options, a.dashdash);
    a.args.assign(words.begin() + static_cast<long>(i), words.end());
    return a;
}

std::optional<std::string> RuncArgs::option(std::initializer_list<const char*> names) const {
    std::optional<std::string> v;
    for (const auto& o : options)
        if (named(o, names)) v = o.value;  // the last one wins, as in Go's flag package
    return v;
}

bool RuncArgs::flag(std::initializer_list<const char*> names) const {
    for (const auto& o : options)
        if (named(o, names) && (!o.value || *o.value != "false")) return true;
    return false;
}

std::optional<std::string> RuncArgs::global_option(const char* name) const {
    std::optional<std::string> v;
    for (const auto& o : global)
        if (o.name == name) v = o.value;
    return v;
}

void RuncArgs::set_option(std::initializer_list<const char*> names, const std::string& value) {
    remove_option(names);
    options.push_back(Option{*names.begin(), value, false});
}

void RuncArgs::remove_option(std::initializer_list<const char*> names) {
    std::erase_if(options, [&](const Option& o) { return named(o, names); });
}

std::vector<std::string> RuncArgs::argv(const std::string& delegate) const {
    std::vector<std::string> out{delegate};
    emit(global, out);
    if (command.empty()) return out;
    out.push_back(command);
    emit(options, out);
    if (dashdash) out.push_back("--");
    out.insert(out.end(), args.begin(), args.end());
    return out;
}

}  // namespace bulwark::oci
