#include "sandbox/posture.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

namespace bulwark {

std::string check_posture(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    if (!in) return "cannot read /proc/" + std::to_string(pid) + "/status";
    std::map<std::string, std::string> f;
    std::string line;
    while (std::getline(in, line)) {
        auto c = line.find(':');
        if (c == std::string::npos) continue;
        std::string v = line.substr(c + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        f[line.substr(0, c)] = v;
    }
    std::string bad;
    auto need = [&](const std::string& k, const std::string& want) {
        auto it = f.find(k);
        if (it == f.end()) bad += k + " missing; ";
        else if (it->second != want) bad += k + " is " + it->second + " (want " + want + "); ";
    };
    need("Seccomp", "2");
    need("NoNewPrivs", "1");
    for (const char* cap : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) need(cap, "0000000000000000");
    if (f.contains("Seccomp_filters") && std::atoi(f["Seccomp_filters"].c_str()) < 1) bad += "no seccomp filter; ";
    for (const char* ids : {"Uid", "Gid"}) {
        std::istringstream ss(f[ids]);
        long v;
        int n = 0;
        while (ss >> v) {
            ++n;
            if (v == 0) bad += std::string(ids) + " has 0; ";
        }
        if (n == 0) bad += std::string(ids) + " missing; ";
    }
    return bad;
}

}  // namespace bulwark
