// policyc compile FILE -o bundle.json: the bundle as JSON (stdout without -o).
#include <fstream>
#include <iostream>

#include "common.h"

namespace bulwark::policyc {
namespace {

std::function<int()> setup_compile(CLI::App& sub, CommonOptions& common) {
    auto file = std::make_shared<std::string>();
    auto output = std::make_shared<std::string>();
    sub.add_option("file", *file, "rule file")->required();
    sub.add_option("-o,--output", *output, "write the bundle here (default: stdout)");
    return [file, output, &common] {
        auto r = compile_file(*file, compile_options(common));
        if (!common.json || !r.ok()) std::cerr << render_diagnostics(r);
        if (!r.ok()) {
            if (common.json)
                std::cout << nlohmann::json{{"ok", false}, {"diagnostics", policy::diagnostics_to_json(r.diagnostics)}}
                                 .dump(2)
                          << "\n";
            return 1;
        }
        std::string text = policy::bundle_to_json(*r.bundle).dump(2) + "\n";
        if (output->empty()) {
            std::cout << text;
            return 0;
        }
        std::string tmp = *output + ".tmp";
        {
            std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
            out << text;
            out.flush();
            if (!out) {
                std::cerr << "policyc compile: cannot write " << tmp << "\n";
                return 2;
            }
        }
        if (std::rename(tmp.c_str(), output->c_str()) != 0) {
            std::cerr << "policyc compile: cannot rename " << tmp << " to " << *output << "\n";
            return 2;
        }
        if (common.json)
            std::cout << nlohmann::json{{"ok", true}, {"output", *output}, {"hash", r.bundle->hash},
                                        {"diagnostics", policy::diagnostics_to_json(r.diagnostics)}}
                             .dump(2)
                      << "\n";
        else
            std::cout << *output << ": " << r.bundle->hash << "\n";
        return 0;
    };
}

const bool compile_registered = register_command({"compile", "compile a rule file into a policy bundle (JSON)", setup_compile});

}  // namespace
}  // namespace bulwark::policyc
