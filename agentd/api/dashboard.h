#pragma once
// The live audit dashboard agentd serves on its HTTP listener: the built page
// (dashboards/web, installed under share/bulwark/dashboard) and the browser's
// token.
//
// Assets are public and hold no data: GET / and GET /assets/<file> answer
// without a token on TCP (Host and Origin are still checked), with a strict
// Content-Security-Policy (no inline script or style, connect-src 'self').
// Everything the page shows comes from the API, which still needs the token.
//
// The browser token: at start agentd draws 32 random bytes, writes them as
// hex to <state_dir>/dashboard.token (mode 0600, replaced each start) and
// accepts their SHA-256 like a configured token. The page is opened as
// http://127.0.0.1:7878/#token=<hex>: a URL fragment never reaches a server,
// the page sends it as "Authorization: Bearer" and as the WebSocket
// subprotocol "bulwark.token.<hex>".
#include <expected>
#include <filesystem>
#include <map>
#include <string>

#include "api/http_api.h"

namespace bulwark::dashboard {

struct Asset {
    std::string body;
    std::string content_type;
    bool immutable = false;  // content-hashed name: cached for a year
};

class Assets {
public:
    // Reads index.html and assets/* (regular files only, no symlinks).
    static std::expected<Assets, std::string> load(const std::filesystem::path& dir);
    const std::filesystem::path& dir() const { return dir_; }
    const Asset* find(const std::string& name) const;  // "index.html", "assets/x.js"
    size_t size() const { return files_.size(); }

private:
    std::filesystem::path dir_;
    std::map<std::string, Asset> files_;
};

// Where the built page is: the installed copy, else the build tree's.
std::filesystem::path default_assets_dir();

// The header every page response carries.
extern const char* const kContentSecurityPolicy;

// GET / and GET /assets/{file}. assets may be null (not built): / then says so.
void register_routes(http::Router& r, std::shared_ptr<const Assets> assets);

// Creates (replacing) <state_dir>/dashboard.token with a fresh random token;
// returns the token.
std::expected<std::string, std::string> create_token(const std::filesystem::path& state_dir);

}  // namespace bulwark::dashboard
