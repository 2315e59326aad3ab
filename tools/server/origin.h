// Which browsers' requests a server without an API key answers (docs/server.md §Browsers).
// Any web page the user visits can send requests to a server on the user's machine: by a
// plain cross-site POST (Origin is the page's), or by DNS rebinding, where the attacker's own
// name resolves to 127.0.0.1 (Host is then that name). Without a key the server answers only
//   - Host: an IP address, `localhost` (or *.localhost), this machine's name, the --host
//     value, or the host of an --allowed-origins entry;
//   - Origin (when sent): the server's own page (the origin of the Host), a loopback origin
//     (http://localhost:*, http://127.0.0.1:*, http://[::1]:*), or an --allowed-origins entry.
// CORS headers are sent for --allowed-origins entries only (they may read the answers).
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ocular::server {

class OriginPolicy {
 public:
  // `allowed`: origins such as "https://app.example.com" (scheme, host and port; compared
  // case-insensitively, a trailing '/' ignored).
  explicit OriginPolicy(const std::vector<std::string>& allowed);
  void SetBindHost(const std::string& host);
  // "" if a request with these headers may be answered, else why not (for the 403).
  std::string Check(std::string_view host_header, std::string_view origin) const;
  // True if `origin` is an --allowed-origins entry.
  bool Cors(std::string_view origin) const;
  // The CORS headers for `origin` (none unless Cors(origin)); `preflight`: the answer to an
  // OPTIONS request.
  std::vector<std::pair<std::string, std::string>> CorsHeaders(std::string_view origin,
                                                               bool preflight) const;

 private:
  std::set<std::string> origins_;  // normalized
  std::set<std::string> hosts_;    // names a Host header may carry (no port)
};

// "scheme://host[:port]" lowercased, without a trailing '/'; "" if `origin` is not of that
// form.
std::string NormalizeOrigin(std::string_view origin);

}  // namespace ocular::server
