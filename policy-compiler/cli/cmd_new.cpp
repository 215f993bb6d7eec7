// policyc new TOOL --binary PATH [-o FILE]: a starting rule file for a tool
// nobody shipped rules for. It names the binary (and the file a symlink to it
// resolves to), lets it execute, and asks for its shared libraries with
// `libraries: auto`: the compiler grants read and exec on the binary's
// DT_NEEDED closure, resolved the way the loader does (RUNPATH, ld.so.conf,
// the standard directories) each time it compiles, so the file follows
// library upgrades. The libraries found now are listed in a comment, with the
// name that pulled each in. A library that cannot be resolved is an error
// naming it (the tool would not start). With -o the file is compiled at once,
// against --rules-dir or the directory it is written to, and the result said.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "bulwark/policy/libraries.h"
#include "bulwark/policy/values.h"
#include "common.h"

namespace bulwark::policyc {
namespace {

namespace fs = std::filesystem;

struct Draft {
    std::vector<std::string> binaries;  // as given, then the file it resolves to
    std::vector<policy::BinaryLibrary> libraries;
};

std::expected<Draft, std::string> draft_for(const std::string& binary) {
    if (!binary.starts_with("/")) return std::unexpected("--binary " + binary + ": not an absolute path");
    std::error_code ec;
    const fs::path real = fs::canonical(binary, ec);
    if (ec) return std::unexpected("--binary " + binary + ": " + ec.message());
    auto libs = policy::binary_libraries(binary, "");
    if (!libs) return std::unexpected("--binary " + binary + ": " + libs.error());
    Draft d;
    d.binaries.push_back(binary);
    if (real.string() != binary) d.binaries.push_back(real.string());
    d.libraries = std::move(*libs);
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
      << "binaries:\n";
    for (size_t i = 0; i + 1 < d.binaries.size(); ++i) o << "  - " << d.binaries[i] << "\n";
    o << "  # read and exec of " << d.binaries.back()
      << "'s shared libraries, resolved each time the file compiles;\n"
         "  # here and now:";
    if (d.libraries.empty()) o << " none (statically linked)";
    o << "\n";
    for (const auto& l : d.libraries) o << "  #   " << l.path << "   (" << l.needed_as << ")\n";
    o << "  - path: " << d.binaries.back() << "\n    libraries: auto\n"
      << "exec:\n  allow: [" << list << "]\n"
      << "files:\n  read:\n    - \"${workdir}\"   # the task's work directory\n"
      << "limits:\n  timeout: 5m\n";
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
                  << (d->libraries.size() == 1 ? "y" : "ies") << " with the loader (libraries: auto); compiles ("
                  << r.bundle->hash << ")\n";
        return 0;
    };
}

const bool new_registered =
    register_command({"new", "write a starting rule file for a tool: its binary and its shared libraries", setup_new});

}  // namespace
}  // namespace bulwark::policyc
