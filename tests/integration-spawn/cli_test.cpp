// Black-box: `agentd run` as a user runs it.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {
int run_cli(const std::string& cmd, std::string& out) {
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Directories made with mkdtemp(3) from their templates, removed at the end of a case.
struct TempDirs {
    std::vector<std::string> dirs;
    explicit TempDirs(std::vector<std::string> templates) : dirs(std::move(templates)) {
        for (auto& d : dirs) REQUIRE(mkdtemp(d.data()));
    }
    ~TempDirs() {
        for (const auto& d : dirs) std::filesystem::remove_all(d);
    }
    const std::string& operator[](size_t i) const { return dirs[i]; }
};

// A rules directory holding the shipped base files and `tool`.yaml: one
// binary, allowed to run, with the given files: section.
void write_rules(const std::string& rules, const std::string& tool, const std::string& binary,
                 const std::string& files_yaml) {
    std::filesystem::copy(std::string(RULES_DIR) + "/base", rules + "/base",
                          std::filesystem::copy_options::recursive);
    std::ofstream(rules + "/" + tool + ".yaml") << "tool: " << tool << "\ndescription: a test tool\n"
                                                << "extends: base/minimal\nbinaries: [" << binary << "]\n"
                                                << "files:\n" << files_yaml << "exec:\n  allow: [" << binary << "]\n";
}
}  // namespace

TEST_CASE("agentd run without a compilable policy refuses with 125 and a JSON report") {
    std::string out;
    int rc = run_cli(std::string(AGENTD_BIN) + " run --rules /nonexistent --tool demo --json -- /bin/true", out);
    CHECK(rc == 125);
    auto j = nlohmann::json::parse(out);
    CHECK(j["outcome"] == "refused");
    CHECK(j["exit_status"] == 125);
    CHECK(j["tool"] == "demo");
    CHECK_FALSE(j["error"].get<std::string>().empty());
}

TEST_CASE("agentd run requires --rules, --tool and a command") {
    std::string out;
    CHECK(run_cli(std::string(AGENTD_BIN) + " run --tool demo -- /bin/true 2>&1", out) != 0);
}

TEST_CASE("agentd run warns, naming the rule, when a grant under /tmp is one the sandbox does not show") {
    namespace fs = std::filesystem;
    // A host file under /tmp, the rules, and a workdir outside /tmp.
    TempDirs tmp({"/tmp/bulwark-hidden-XXXXXX", "/var/tmp/bulwark-rules-XXXXXX", "/var/tmp/bulwark-wd-XXXXXX"});
    const std::string &host_dir = tmp[0], &rules = tmp[1], &wd = tmp[2];
    REQUIRE(::chmod(host_dir.c_str(), 0755) == 0);
    REQUIRE(::chown(wd.c_str(), 65534, 65534) == 0);
    const std::string data = host_dir + "/data.txt";
    std::ofstream(data) << "HOST\n";
    std::ofstream(wd + "/data.txt") << "WORKDIR\n";
    write_rules(rules, "peek", "/usr/bin/cat", "  read: [\"${workdir}\", " + data + ", \"${tmp}/scratch\"]\n");
    // Control: unconfined, the file is there to read.
    std::string out;
    REQUIRE(run_cli("cat " + data, out) == 0);
    REQUIRE(out == "HOST\n");

    const std::string run = std::string(AGENTD_BIN) + " run --json --rules " + rules +
                            " --tool peek --workdir " + wd + " -- /usr/bin/cat ";
    out.clear();
    int rc = run_cli(run + data, out);
    INFO(out);
    auto j = nlohmann::json::parse(out);
    CHECK(rc == 1);  // cat: no such file: the grant reaches nothing
    CHECK(j["stderr"]["data"].get<std::string>().find("No such file or directory") != std::string::npos);
    std::vector<std::string> tmp_warnings;
    for (const auto& w : j["warnings"])
        if (auto text = w.get<std::string>(); text.find("which the sandbox does not show") != std::string::npos)
            tmp_warnings.push_back(text);
    REQUIRE(tmp_warnings.size() == 1);  // not the ${tmp} grant, not the workdir
    CHECK(tmp_warnings[0].starts_with(rules + "/peek.yaml:6:"));
    CHECK(tmp_warnings[0].find("rule \"files.read: " + data + "\" grants " + data) != std::string::npos);
    CHECK(tmp_warnings[0].find("use ${tmp} for scratch files, or the workdir") != std::string::npos);

    // Control: the same tool reads the file from the workdir, which is shown.
    out.clear();
    rc = run_cli(run + "data.txt", out);
    INFO(out);
    auto ok = nlohmann::json::parse(out);
    CHECK(rc == 0);
    CHECK(ok["stdout"]["data"] == "WORKDIR\n");
}

TEST_CASE("agentd run names a write rule whose file does not exist when the sandbox is built") {
    namespace fs = std::filesystem;
    TempDirs tmp({"/var/tmp/bulwark-rules-XXXXXX", "/var/tmp/bulwark-wd-XXXXXX"});
    const std::string &rules = tmp[0], &wd = tmp[1];
    REQUIRE(::chown(wd.c_str(), 65534, 65534) == 0);
    write_rules(rules, "mk", "/usr/bin/touch", "  read: [\"${workdir}\"]\n  write: [\"${workdir}/out.txt\"]\n");
    const std::string run = std::string(AGENTD_BIN) + " run --json --rules " + rules + " --tool mk --workdir " + wd +
                            " -- /usr/bin/touch out.txt";
    auto said = [](const nlohmann::json& j) {
        std::vector<std::string> out;
        for (const auto& w : j["warnings"])
            if (auto text = w.get<std::string>(); text.find("does not exist as the sandbox is built") != std::string::npos)
                out.push_back(text);
        return out;
    };
    std::string out;
    int rc = run_cli(run, out);
    INFO(out);
    auto j = nlohmann::json::parse(out);
    CHECK(rc != 0);  // Landlock: no rule grants making out.txt
    CHECK_FALSE(fs::exists(wd + "/out.txt"));
    auto w = said(j);
    REQUIRE(w.size() == 1);
    CHECK(w[0].find(wd + "/out.txt (" + rules + "/mk.yaml:7:") != std::string::npos);
    CHECK(w[0].find("grant files.create on its directory") != std::string::npos);

    // Control: the file exists before the run; the same rule grants writing it, and nothing is said.
    std::ofstream(wd + "/out.txt") << "";
    REQUIRE(::chown((wd + "/out.txt").c_str(), 65534, 65534) == 0);
    out.clear();
    rc = run_cli(run, out);
    INFO(out);
    auto ok = nlohmann::json::parse(out);
    CHECK(rc == 0);
    CHECK(said(ok).empty());
}

TEST_CASE("agentd run reuses a compiled rule file only until it changes, then enforces what it says now") {
    namespace fs = std::filesystem;
    TempDirs tmp({"/var/tmp/bulwark-rules-XXXXXX", "/var/tmp/bulwark-wd-XXXXXX", "/var/tmp/bulwark-host-XXXXXX",
                  "/var/tmp/bulwark-cache-XXXXXX"});
    const std::string &rules = tmp[0], &wd = tmp[1], &host_dir = tmp[2], cache = tmp[3] + "/bundles";
    REQUIRE(::chmod(host_dir.c_str(), 0755) == 0);
    REQUIRE(::chown(wd.c_str(), 65534, 65534) == 0);
    std::ofstream(host_dir + "/data.txt") << "HOST\n";
    write_rules(rules, "rd", "/usr/bin/cat", "  read: [\"${workdir}\", " + host_dir + "/data.txt]\n");
    const std::string run = "BULWARK_BUNDLE_CACHE=" + cache + " " + AGENTD_BIN + " run --json --rules " + rules +
                            " --tool rd --workdir " + wd + " -- /usr/bin/cat " + host_dir + "/data.txt";
    auto report = [&](int want_rc) {
        std::string out;
        int rc = run_cli(run, out);
        INFO(out);
        CHECK(rc == want_rc);
        return nlohmann::json::parse(out);
    };
    // Control: the grant as written reads the file, compiled and then reused.
    auto j = report(0);
    CHECK(j["compile_cache"] == "stored (no entry)");
    CHECK(j["stdout"]["data"] == "HOST\n");
    j = report(0);
    CHECK(j["compile_cache"] == "hit");
    CHECK(j["stdout"]["data"] == "HOST\n");

    // The grant now names another file: same size, same mtime, so only its
    // bytes tell. The next run compiles again and the read is refused.
    const std::string file = rules + "/rd.yaml";
    struct stat st{};
    REQUIRE(::stat(file.c_str(), &st) == 0);
    std::string text;
    {
        std::ifstream in(file);
        text.assign(std::istreambuf_iterator<char>(in), {});
    }
    text.replace(text.find("/data.txt"), 9, "/datb.txt");
    std::ofstream(file, std::ios::trunc) << text;
    struct timespec times[2] = {st.st_atim, st.st_mtim};
    REQUIRE(::utimensat(AT_FDCWD, file.c_str(), times, 0) == 0);
    j = report(1);
    CHECK(j["compile_cache"] == "stored (content " + file + " changed)");
    CHECK(j["stdout"]["data"] == "");
    CHECK(j["stderr"]["data"].get<std::string>().find(host_dir + "/data.txt") != std::string::npos);
    j = report(1);
    CHECK(j["compile_cache"] == "hit");

    // Without the cache every run compiles.
    std::string out;
    run_cli("BULWARK_BUNDLE_CACHE=off " + std::string(AGENTD_BIN) + " run --json --rules " + rules + " --tool rd -- /bin/true", out);
    INFO(out);
    CHECK(nlohmann::json::parse(out)["compile_cache"] == "off (BULWARK_BUNDLE_CACHE=off)");
}
