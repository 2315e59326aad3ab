#include "origin.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "ocular/status.h"

namespace ocular::server {

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The host of "host", "host:port", "[v6]" or "[v6]:port", lowercased; brackets kept off.
std::string HostOf(std::string_view authority) {
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    return close == std::string_view::npos ? "" : Lower(authority.substr(1, close - 1));
  }
  const size_t colon = authority.find(':');
  return Lower(authority.substr(0, colon));
}

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

bool IsLoopbackName(const std::string& host) {
  unsigned char v4[4];
  if (inet_pton(AF_INET, host.c_str(), v4) == 1) return v4[0] == 127;
  return host == "localhost" || host == "::1" ||
         (host.size() > 10 && host.compare(host.size() - 10, 10, ".localhost") == 0);
}

}  // namespace

std::string NormalizeOrigin(std::string_view origin) {
  std::string o = Lower(origin);
  while (!o.empty() && o.back() == '/') o.pop_back();
  const size_t sep = o.find("://");
  if (sep == std::string::npos || sep == 0 || o.size() == sep + 3 ||
      o.find('/', sep + 3) != std::string::npos) {
    return "";
  }
  return o;
}

OriginPolicy::OriginPolicy(const std::vector<std::string>& allowed) {
  for (const std::string& a : allowed) {
    const std::string o = NormalizeOrigin(a);
    if (o.empty()) continue;  // the CLI refuses these before
    origins_.insert(o);
    hosts_.insert(HostOf(std::string_view(o).substr(o.find("://") + 3)));
  }
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) == 0 && name[0] != '\0') hosts_.insert(Lower(name));
}

void OriginPolicy::SetBindHost(const std::string& host) { hosts_.insert(HostOf(host)); }

std::string OriginPolicy::Check(std::string_view host_header, std::string_view origin) const {
  const std::string host = HostOf(host_header);
  if (!host_header.empty() && !IsIpLiteral(host) && !IsLoopbackName(host) && !hosts_.count(host)) {
    return StrCat("Host '", host_header,
                  "' is not a name this server answers to without an API key (an IP address, "
                  "localhost, this machine's name, --host, or the host of --allowed-origins)");
  }
  if (origin.empty()) return "";
  const std::string o = NormalizeOrigin(origin);
  if (!o.empty()) {
    const std::string_view authority = std::string_view(o).substr(o.find("://") + 3);
    const bool web = o.rfind("http://", 0) == 0 || o.rfind("https://", 0) == 0;
    if (origins_.count(o) || (web && IsLoopbackName(HostOf(authority))) ||
        (web && authority == Lower(host_header))) {
      return "";
    }
  }
  return StrCat("Origin '", origin,
                "' may not use this server (its own page, loopback origins and "
                "--allowed-origins may; or set --api-key)");
}

bool OriginPolicy::Cors(std::string_view origin) const {
  return !origin.empty() && origins_.count(NormalizeOrigin(origin)) > 0;
}

std::vector<std::pair<std::string, std::string>> OriginPolicy::CorsHeaders(std::string_view origin,
                                                                           bool preflight) const {
  std::vector<std::pair<std::string, std::string>> h;
  if (!Cors(origin)) return h;
  h = {{"Access-Control-Allow-Origin", std::string(origin)},
       {"Vary", "Origin"},
       {"Access-Control-Expose-Headers", "X-Request-Id"}};
  if (preflight) {
    h.emplace_back("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    h.emplace_back("Access-Control-Allow-Headers", "Authorization, Content-Type");
    h.emplace_back("Access-Control-Max-Age", "600");
  }
  return h;
}

}  // namespace ocular::server
