// policyc new TOOL --binary PATH [-o FILE]: a starting rule file for a tool
// nobody shipped rules for. It names the binary (and the file a symlink to it
// resolves to), lets it execute, and grants read and exec on every shared
// library it loads: the DT_NEEDED closure resolved the way the loader does
// (RUNPATH, /etc/ld.so.cache, the standard directories), each library as the
// file the kernel will judge, with the name that pulled it in. The loader and
// libc come from base/minimal, which it extends. A library that cannot be
// resolved is an error naming it (the tool would not start). With -o the
// file is compiled at once, against --rules-dir or the directory it is
// written to, and the result said.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "bulwark/policy/elf_props.h"
#include "bulwark/policy/values.h"
#include "common.h"

namespace bulwark::policyc {
namespace {

namespace fs = std::filesystem;

// Files base/minimal already grants read and exec (rules/base/minimal.yaml).
bool in_base_minimal(const std::string& real) {
    return real.ends_with("/ld-linux-x86-64.so.2") || real.ends_with("/ld-linux-aarch64.so.1") ||
           real.ends_with("/libc.so.6");
}

struct Library {
    std::string path;    // the file the kernel judges (symlinks resolved)
    std::string needed;  // the DT_NEEDED name that pulled it in
};

struct Draft {
    std::vector<std::string> binaries;  // as given, then the file it resolves to
    std::vector<Library> libraries;
};

std::expected<Draft, std::string> draft_for(const std::string& binary) {
    if (!binary.starts_with("/")) return std::unexpected("--binary " + binary + ": not an absolute path");
    std::error_code ec;
    const fs::path real = fs::canonical(binary, ec);
    if (ec) return std::unexpected("--binary " + binary + ": " + ec.message());
    auto exe = read_elf_props(real.string());
    if (!exe)
        return std::unexpected("--binary " + binary + ": " + exe.error() +
                               " (a script: name its interpreter, e.g. /usr/bin/perl, and add the script to "
                               "files.read)");
    Draft d;
    d.binaries.push_back(binary);
    if (real.string() != binary) d.binaries.push_back(real.string());
    std::vector<std::string> missing;
    for (const auto& lib : read_needed_closure(*exe, "", missing)) {
        const std::string path = fs::canonical(lib.path, ec).string();
        if (ec || in_base_minimal(path)) continue;
        if (std::ranges::any_of(d.libraries, [&](const Library& l) { return l.path == path; })) continue;
        d.libraries.push_back({path, fs::path(lib.path).filename().string()});
    }
    if (!missing.empty()) {
        std::string names;
        for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m;
        return std::unexpected("--binary " + binary + ": shared libraries the loader would not find: " + names +
                               " (the tool would not start; install them, or write the rule file by hand)");
    }
    return d;
}

std::string yaml_text(const std::string& tool, const std::string& binary, const Draft& d) {
    std::ostringstream o;
    std::string list;
    for (const auto& b : d.binaries) list += (list.empty() ? "" : ", ") + b;
    o << "# " << tool << ": a starting rule file written by `policyc new " << tool << " --binary " << binary
      << "`.\n"
         "# It lets the binary start and load its shared libraries, nothing more: add\n"
         "# what the tool reads and writes (files:), its network (network:) and its\n"
         "# limits, then try it with `agentd run --rules DIR --tool "
      << tool << " -- ...` (docs/rule-language.md).\n"
      << "tool: " << tool << "\n"
      << "description: " << tool << " (say what the agent runs it for)\n"
      << "extends: base/minimal   # the loader, libc, locale data; credentials denied\n"
      << "binaries: [" << list << "]\n"
      << "exec:\n  allow: [" << list << "]\n"
      << "files:\n  read:\n    - \"${workdir}\"   # the task's work directory\n";
    for (const auto& l : d.libraries) o << "    - " << l.path << "   # " << l.needed << "\n";
    if (!d.libraries.empty()) {
        o << "  exec:   # shared libraries are mapped executable\n";
        for (const auto& l : d.libraries) o << "    - " << l.path << "\n";
    }
    o << "limits:\n  timeout: 5m\n";
    return o.str();
}

std::function<int()> setup_new(CLI::App& sub, CommonOptions& common) {
    auto tool = std::make_shared<std::string>();
    auto binary = std::make_shared<std::string>();
    auto out = std::make_shared<std::string>();
    sub.add_option("tool", *tool, "the tool's name (the rule file's tool:)")->required();
    sub.add_option("--binary", *binary, "absolute path of the tool's executable")->required();
    sub.add_option("-o,--output", *out, "write the rule file here (and compile it) instead of to stdout");
    return [tool, binary, out, &common] {
        if (!policy::valid_tool_name(*tool)) {
            std::cerr << "policyc new: tool name \"" << *tool << "\": it must match [a-z0-9][a-z0-9._+-]{0,63}\n";
            return 2;
        }
        auto d = draft_for(*binary);
        if (!d) {
            std::cerr << "policyc new: " << d.error() << "\n";
            return 1;
        }
        const std::string text = yaml_text(*tool, *binary, *d);
        if (out->empty()) {
            std::cout << text;
            return 0;
        }
        if (std::ofstream f(*out); !(f << text)) {
            std::cerr << "policyc new: cannot write " << *out << "\n";
            return 2;
        }
        auto opts = compile_options(common);
        if (opts.rules_dirs.empty()) opts.rules_dirs = {fs::absolute(*out).parent_path().string()};
        auto r = compile_file(*out, opts);
        std::cerr << render_diagnostics(r);
        if (!r.ok()) {
            std::cerr << "policyc new: " << *out << " does not compile here (base/minimal is looked up in "
                      << opts.rules_dirs.front() << "; --rules-dir names Bulwark's rules)\n";
            return 1;
        }
        std::cout << *out << ": " << d->libraries.size() << " shared librar"
                  << (d->libraries.size() == 1 ? "y" : "ies") << " beside base/minimal's; compiles ("
                  << r.bundle->hash << ")\n";
        return 0;
    };
}

const bool new_registered =
    register_command({"new", "write a starting rule file for a tool: its binary and its shared libraries", setup_new});

}  // namespace
}  // namespace bulwark::policyc
