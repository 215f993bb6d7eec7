#include "api/dashboard.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/digest.h"
#include "common/fd.h"

namespace bulwark::dashboard {
namespace {

constexpr size_t kMaxAssetBytes = 16u << 20;

std::string content_type_of(const std::filesystem::path& p) {
    auto ext = p.extension().string();
    if (ext == ".html") return "text/html; charset=utf-8";
    if (ext == ".js" || ext == ".mjs") return "text/javascript; charset=utf-8";
    if (ext == ".css") return "text/css; charset=utf-8";
    if (ext == ".svg") return "image/svg+xml";
    if (ext == ".png") return "image/png";
    if (ext == ".ico") return "image/x-icon";
    if (ext == ".woff2") return "font/woff2";
    if (ext == ".json" || ext == ".map") return "application/json";
    if (ext == ".txt") return "text/plain; charset=utf-8";
    return "";
}

std::expected<std::string, std::string> read_regular(const std::filesystem::path& p) {
    Fd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) return std::unexpected("open(" + p.string() + "): " + std::strerror(errno));
    struct stat st{};
    if (fstat(fd.get(), &st) != 0) return std::unexpected("fstat(" + p.string() + "): " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) return std::unexpected(p.string() + ": not a regular file");
    if (size_t(st.st_size) > kMaxAssetBytes) return std::unexpected(p.string() + ": larger than 16 MiB");
    std::string out(size_t(st.st_size), '\0');
    size_t got = 0;
    while (got < out.size()) {
        ssize_t n = ::read(fd.get(), out.data() + got, out.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return std::unexpected("read(" + p.string() + "): " + std::strerror(errno));
        if (n == 0) break;
        got += size_t(n);
    }
    out.resize(got);
    return out;
}

void page_headers(http::ApiResponse& r) {
    r.headers.emplace_back("Content-Security-Policy", kContentSecurityPolicy);
    r.headers.emplace_back("X-Frame-Options", "DENY");
    r.headers.emplace_back("Referrer-Policy", "no-referrer");
    r.headers.emplace_back("Cross-Origin-Opener-Policy", "same-origin");
    r.headers.emplace_back("Cross-Origin-Resource-Policy", "same-origin");
}

http::ApiResponse serve(const Asset& a) {
    http::ApiResponse r;
    r.content_type = a.content_type;
    r.body = a.body;
    page_headers(r);
    // index.html names the hashed assets: revalidate it, keep those forever
    r.headers.emplace_back("Cache-Control", a.immutable ? "public, max-age=31536000, immutable" : "no-cache");
    return r;
}

}  // namespace

const char* const kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

std::expected<Assets, std::string> Assets::load(const std::filesystem::path& dir) {
    Assets a;
    a.dir_ = dir;
    auto index = read_regular(dir / "index.html");
    if (!index) return std::unexpected(index.error());
    a.files_["index.html"] = Asset{std::move(*index), "text/html; charset=utf-8", false};
    std::error_code ec;
    auto sub = dir / "assets";
    if (!std::filesystem::is_directory(sub, ec)) return a;
    for (const auto& e : std::filesystem::directory_iterator(sub, ec)) {
        auto name = e.path().filename().string();
        if (!e.is_regular_file() || e.is_symlink()) continue;
        auto type = content_type_of(e.path());
        if (type.empty()) return std::unexpected(e.path().string() + ": unknown file type; not served");
        auto body = read_regular(e.path());
        if (!body) return std::unexpected(body.error());
        a.files_["assets/" + name] = Asset{std::move(*body), type, true};
    }
    if (ec) return std::unexpected("reading " + sub.string() + ": " + ec.message());
    return a;
}

const Asset* Assets::find(const std::string& name) const {
    auto it = files_.find(name);
    return it == files_.end() ? nullptr : &it->second;
}

std::filesystem::path default_assets_dir() {
    std::error_code ec;
    std::filesystem::path installed = BULWARK_INSTALLED_DASHBOARD_DIR;
    if (std::filesystem::exists(installed / "index.html", ec)) return installed;
    return BULWARK_BUILD_DASHBOARD_DIR;
}

void register_routes(http::Router& r, std::shared_ptr<const Assets> assets) {
    http::RouteOptions pub{.public_asset = true};
    r.add(
        "GET", "/",
        [assets](const http::ApiRequest&) {
            if (!assets)
                return http::error_response(404, "dashboard_not_built",
                                            "the dashboard assets were not found; build the dashboard_web target");
            return serve(*assets->find("index.html"));
        },
        pub);
    r.add(
        "GET", "/assets/{file}",
        [assets](const http::ApiRequest& req) {
            const Asset* a = assets ? assets->find("assets/" + req.params.at("file")) : nullptr;
            if (!a) return http::error_response(404, "not_found", "no such asset");
            return serve(*a);
        },
        pub);
}

std::expected<std::string, std::string> create_token(const std::filesystem::path& state_dir) {
    auto made = random_hex(32);
    if (!made) return std::unexpected(made.error().message());
    std::string token = std::move(*made);
    auto final_path = state_dir / "dashboard.token";
    auto tmp = state_dir / ("dashboard.token." + std::to_string(getpid()) + ".tmp");
    ::unlink(tmp.c_str());
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) return std::unexpected("open(" + tmp.string() + "): " + std::strerror(errno));
    if (fchmod(fd.get(), 0600) != 0) return std::unexpected("fchmod(" + tmp.string() + "): " + std::strerror(errno));
    std::string line = token + "\n";
    if (::write(fd.get(), line.data(), line.size()) != ssize_t(line.size()) || fsync(fd.get()) != 0) {
        int e = errno;
        ::unlink(tmp.c_str());
        return std::unexpected("write(" + tmp.string() + "): " + std::strerror(e));
    }
    if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
        int e = errno;
        ::unlink(tmp.c_str());
        return std::unexpected("rename(" + tmp.string() + ", " + final_path.string() + "): " + std::strerror(e));
    }
    return token;
}

}  // namespace bulwark::dashboard
