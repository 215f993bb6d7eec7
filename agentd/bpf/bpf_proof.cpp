// The truth check's record: <pin_root>/bw_proof, an array map of one entry
// holding a JSON document (bpf_loader.h, steps 4 and 5).
//
// A verdict of the truth check is a fact about a link (a program attached at
// a hook) and the maps that program reads: while the same link of the same
// program stays attached to the same sandbox parent, and the same maps are
// pinned, a canary run again would see what the recorded one saw. So the
// record names, for every program, its verdict and (when it has one) its
// link's and program's ids, and the id of every pinned map; a start that
// finds every one of them as recorded takes the verdicts. Link and map ids
// are unique for the life of the kernel (bpffs does not outlive a boot), a
// detached cgroup link reports no cgroup, and an unpinned or replaced link
// or map is missing or has another id: each fails the comparison, and the
// start proves everything again. Only a process holding the pin root's
// exclusive lock writes or reads the record (BpfRuntime::start).
#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "bpf/bpf_loader.h"

namespace bulwark::bpf {
namespace {

namespace fs = std::filesystem;

constexpr const char* kProofName = "bw_proof";
constexpr uint32_t kProofBytes = 32u << 10;  // one JSON document, NUL-terminated
constexpr int kProofVersion = 1;

struct ProofValue {
    char text[kProofBytes];
};

std::optional<ProgState> state_of(const std::string& s) {
    for (ProgState st : {ProgState::Enforcing, ProgState::Observing, ProgState::Attached, ProgState::Unavailable})
        if (s == to_string(st)) return st;
    return std::nullopt;
}

template <class Info>
bool info_of(int fd, Info& info) {
    uint32_t len = sizeof info;
    info = Info{};
    return bpf_obj_get_info_by_fd(fd, &info, &len) == 0;
}

// name -> map id of every map pinned at the top of the pin root but the
// record itself and the build marker (whose identity settle_pinned_build
// already compared).
std::map<std::string, uint32_t> pinned_map_ids(const std::string& pin_root) {
    std::map<std::string, uint32_t> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(pin_root, ec)) {
        const std::string name = e.path().filename().string();
        if (name == kProofName || name == "bw_build" || e.is_directory(ec)) continue;
        Fd fd(bpf_obj_get(e.path().c_str()));
        bpf_map_info info{};
        out[name] = fd && info_of(fd.get(), info) ? info.id : 0;
    }
    return out;
}

std::string utc_text(int64_t unix_s) {
    std::time_t t = static_cast<std::time_t>(unix_s);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

}  // namespace

std::string BpfLoader::proof_options() const {
    const LoaderOptions& o = opts_;
    return std::string("lsm=") + (o.lsm ? "1" : "0") + " sock=" + (o.sock ? "1" : "0") + " monitor=" +
           (o.monitor ? "1" : "0") + " sys_enter=" + (o.trace_syscalls ? "1" : "0") + " full_probe=" +
           (o.full_probe ? "1" : "0") + " canary_exec=" + o.canary_exec;
}

void BpfLoader::record_proof() {
    const std::string links_dir = opts_.pin_root + "/links";
    nlohmann::json progs = nlohmann::json::array();
    for (const auto& p : programs_) {
        nlohmann::json j{{"object", p.object}, {"name", p.name}, {"section", p.section},
                         {"state", to_string(p.state)}, {"reason", p.reason}};
        if (p.state != ProgState::Unavailable) {
            Fd fd(bpf_obj_get((links_dir + "/" + p.name).c_str()));
            bpf_link_info info{};
            if (fd && info_of(fd.get(), info)) {
                j["link_id"] = info.id;
                j["prog_id"] = info.prog_id;
            }
        }
        progs.push_back(std::move(j));
    }
    nlohmann::json maps = nlohmann::json::object();
    for (const auto& [name, id] : pinned_map_ids(opts_.pin_root)) maps[name] = id;
    const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    nlohmann::json doc{{"version", kProofVersion},
                       {"pid", static_cast<int64_t>(::getpid())},
                       {"at", now},
                       {"parent_cgroup_id", parent_id_},
                       {"options", proof_options()},
                       {"maps", std::move(maps)},
                       {"programs", std::move(progs)}};
    const std::string text = doc.dump();
    auto value = std::make_unique<ProofValue>();
    if (text.size() >= sizeof value->text) {
        spdlog::warn("bpf: the truth check's record ({} bytes) does not fit {}; later starts prove again",
                     text.size(), kProofName);
        return;
    }
    std::memcpy(value->text, text.data(), text.size());
    const std::string path = opts_.pin_root + "/" + kProofName;
    Fd fd(bpf_obj_get(path.c_str()));
    if (!fd) {
        fd = Fd(bpf_map_create(BPF_MAP_TYPE_ARRAY, kProofName, sizeof(uint32_t), sizeof(ProofValue), 1, nullptr));
        if (!fd || bpf_obj_pin(fd.get(), path.c_str()) != 0) {
            spdlog::warn("bpf: cannot pin the truth check's record at {}: {}; later starts prove again", path,
                         std::strerror(errno));
            return;
        }
    }
    uint32_t k = 0;
    if (bpf_map_update_elem(fd.get(), &k, value.get(), BPF_ANY) != 0)
        spdlog::warn("bpf: cannot write the truth check's record: {}", std::strerror(errno));
}

bool BpfLoader::adopt_recorded_proof() {
    const std::string path = opts_.pin_root + "/" + kProofName;
    Fd fd(bpf_obj_get(path.c_str()));
    if (!fd) return false;
    auto value = std::make_unique<ProofValue>();
    uint32_t k = 0;
    if (bpf_map_lookup_elem(fd.get(), &k, value.get()) != 0) return false;
    value->text[sizeof value->text - 1] = '\0';
    auto doc = nlohmann::json::parse(value->text, nullptr, false);
    auto stale = [&](const std::string& why) {
        spdlog::info("bpf: the recorded truth check does not hold ({}): proving again", why);
        return false;
    };
    if (!doc.is_object() || doc.value("version", 0) != kProofVersion) return stale("no record of this version");
    if (doc.value("options", std::string()) != proof_options()) return stale("made with other loader options");
    if (doc.value("parent_cgroup_id", uint64_t{0}) != parent_id_) return stale("made for another sandbox parent");
    std::map<std::string, uint32_t> maps_then;
    if (auto it = doc.find("maps"); it != doc.end() && it->is_object())
        for (const auto& [name, id] : it->items())
            if (id.is_number_unsigned()) maps_then[name] = id.get<uint32_t>();
    if (maps_then.empty() || maps_then != pinned_map_ids(opts_.pin_root))
        return stale("the pinned maps are not the ones it was made with");

    const std::string links_dir = opts_.pin_root + "/links";
    std::vector<ProgramStatus> progs;
    std::vector<Fd> links;
    auto recorded = doc.find("programs");
    if (recorded == doc.end() || !recorded->is_array() || recorded->empty()) return stale("no programs");
    for (const auto& j : *recorded) {
        if (!j.is_object()) return stale("an unreadable entry");
        ProgramStatus ps{j.value("object", std::string()), j.value("name", std::string()),
                         j.value("section", std::string())};
        auto st = state_of(j.value("state", std::string()));
        if (ps.name.empty() || !st) return stale("an unreadable entry");
        ps.state = *st;
        ps.reason = j.value("reason", std::string());
        Fd link(bpf_obj_get((links_dir + "/" + ps.name).c_str()));
        if (ps.state == ProgState::Unavailable) {
            // Something attached since: its verdict is not in the record.
            if (link) return stale(ps.name + " is pinned now");
        } else {
            bpf_link_info info{};
            if (!link || !info_of(link.get(), info)) return stale(ps.name + "'s link is gone");
            if (info.id != j.value("link_id", 0u) || info.prog_id != j.value("prog_id", 0u))
                return stale(ps.name + "'s link or program is another");
            if (info.type == BPF_LINK_TYPE_CGROUP && info.cgroup.cgroup_id != parent_id_)
                return stale(ps.name + " is no longer attached to the sandbox parent");
            ps.adopted = true;
            links.push_back(std::move(link));
        }
        progs.push_back(std::move(ps));
    }
    programs_ = std::move(progs);
    proven_links_ = std::move(links);
    proof_reused_ = true;
    proof_ = "truth check by pid " + std::to_string(doc.value("pid", int64_t{0})) + " at " +
             utc_text(doc.value("at", int64_t{0})) + ", reused: the same links and maps are in place";
    return true;
}

}  // namespace bulwark::bpf
