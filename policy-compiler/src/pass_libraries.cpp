// binaries[].libraries: auto -> read and exec of the binary's shared
// libraries and its program interpreter (libraries.h), resolved now, under
// CompileOptions::library_root. Each library becomes a rule of its own in
// the rule table, placed at the `libraries` key and saying which name pulled
// it in, from which object, found where; so explain, coverage and decision
// records name it like a written rule. A library an allow of the file (or a
// base) already grants read and exec is not granted twice. One that cannot
// be resolved is an error at the key: the tool would not start.
#include "bulwark/policy/libraries.h"
#include "passes.h"

namespace bulwark::policy {
namespace {

constexpr uint32_t kLibraryRights = BW_FS_READ | BW_FS_EXEC;  // read, then mmap PROT_EXEC

bool granted(const std::vector<FileRule>& files, const std::string& path) {
    uint32_t allow = 0;
    for (const auto& f : files)
        if (f.allow && path_covers(f.path, path)) allow |= f.allow;
    return (allow & kLibraryRights) == kLibraryRights;
}

// "files.library: /usr/lib/x86_64-linux-gnu/libcrypt.so.1 (read, exec; libcrypt.so.1
// needed by /usr/lib/x86_64-linux-gnu/libperl.so.5.36, found via ld.so.conf; for /usr/bin/perl)"
std::string rule_text(const BinaryLibrary& lib, const std::string& binary) {
    std::string text = "files.library: " + lib.path + " (read, exec; " + lib.needed_as + " needed by " +
                       lib.needed_by + ", found via " + lib.found_via + "; for " + binary + ")";
    if (text.size() > 240) text = text.substr(0, 237) + "...";
    return text;
}

void run_libraries(CompileContext& ctx) {
    for (const auto& bin : ctx.ast.binaries) {
        if (!bin.libraries || bin.libraries->value != "auto") continue;  // values checked by the metadata pass
        const ast::Scalar& key = *bin.libraries;
        auto binary = normalise_path(bin.path.value);
        if (!binary) continue;  // said by the metadata pass
        auto libs = binary_libraries(*binary, ctx.opts.library_root, ctx.opts.inputs);
        if (!libs) {
            ctx.error(key.span, "unresolved-library", libs.error(),
                      {"install what is missing, or list the libraries under files.read and files.exec and "
                       "drop `libraries: auto`"});
            continue;
        }
        for (const auto& lib : *libs) {
            if (granted(ctx.bundle.files, lib.path)) continue;
            uint32_t id = uint32_t(ctx.bundle.rules.size());
            ctx.bundle.rules.push_back(RuleRef{id, key.span.loc, rule_text(lib, *binary), "files",
                                               ctx.bundle.rules.at(bin.rule_id).unenforceable_run});
            ctx.bundle.files.push_back(FileRule{lib.path, kLibraryRights, 0, id});
        }
    }
}

}  // namespace

Pass libraries_pass() { return {"libraries", run_libraries, true}; }

}  // namespace bulwark::policy
