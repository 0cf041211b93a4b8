#include "net/http_url.h"

namespace pb::net {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// The part after "scheme://" up to the path, query or fragment; nullopt when `url` has no "scheme://".
std::optional<std::string_view> Authority(std::string_view url) {
  size_t p = url.find("://");
  if (p == std::string_view::npos || p == 0) return std::nullopt;
  for (char c : url.substr(0, p))
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' || c == '-' ||
          c == '.'))
      return std::nullopt;
  std::string_view rest = url.substr(p + 3);
  return rest.substr(0, rest.find_first_of("/?#\\"));
}

}  // namespace

std::string UrlScheme(std::string_view url) {
  size_t p = url.find(':');
  if (p == std::string_view::npos || p == 0) return "";
  for (char c : url.substr(0, p))
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' || c == '-' ||
          c == '.'))
      return "";
  return Lower(url.substr(0, p));
}

std::string UrlOrigin(std::string_view url) {
  auto authority = Authority(url);
  if (!authority) return "";
  std::string scheme = UrlScheme(url);
  std::string_view a = *authority;
  if (size_t at = a.rfind('@'); at != std::string_view::npos) a.remove_prefix(at + 1);
  std::string host = Lower(a);
  if ((scheme == "https" && host.ends_with(":443")) || (scheme == "http" && host.ends_with(":80")))
    host.resize(host.rfind(':'));
  return scheme + "://" + host;
}

std::string UrlHost(std::string_view url) {
  std::string origin = UrlOrigin(url);
  size_t scheme_end = origin.find("://");
  return scheme_end == std::string::npos ? origin : origin.substr(scheme_end + 3);
}

bool UrlHasUserInfo(std::string_view url) {
  auto authority = Authority(url);
  return authority && authority->find('@') != std::string_view::npos;
}

std::optional<std::string> ResolveUrl(std::string_view base, std::string_view location) {
  std::string_view loc = location.substr(0, location.find('#'));
  std::string origin = UrlOrigin(base);
  if (origin.empty()) return std::nullopt;
  if (!UrlScheme(loc).empty()) return std::string(loc);
  if (loc.empty()) return std::string(base.substr(0, base.find('#')));
  if (loc.starts_with("//")) return UrlScheme(base) + ":" + std::string(loc);
  // The base's authority as written (user info included: a redirect keeps it, and it is refused afterwards).
  std::string_view rest = base.substr(base.find("://") + 3);
  size_t path_at = rest.find_first_of("/?#");
  std::string prefix(
      base.substr(0, base.size() - rest.size() + (path_at == std::string_view::npos ? rest.size() : path_at)));
  if (loc.starts_with("/")) return prefix + std::string(loc);
  std::string_view path = path_at == std::string_view::npos ? std::string_view("/") : rest.substr(path_at);
  path = path.substr(0, path.find_first_of("?#"));
  if (path.empty()) path = "/";
  if (loc.starts_with("?")) return prefix + std::string(path) + std::string(loc);
  // A relative path replaces the last segment; '.' and '..' segments are resolved as RFC 3986 says.
  std::string merged = std::string(path.substr(0, path.rfind('/') + 1)) + std::string(loc.substr(0, loc.find('?')));
  std::string query = loc.find('?') == std::string_view::npos ? "" : std::string(loc.substr(loc.find('?')));
  std::string out;
  size_t i = 0;
  while (i < merged.size()) {
    size_t next = merged.find('/', i + 1);
    std::string_view seg = std::string_view(merged).substr(i, next == std::string::npos ? std::string::npos : next - i);
    if (seg == "/.") {
      if (next == std::string::npos) out += '/';
    } else if (seg == "/..") {
      size_t cut = out.rfind('/');
      out.resize(cut == std::string::npos ? 0 : cut);
      if (next == std::string::npos) out += '/';
    } else {
      out += seg;
    }
    i = next == std::string::npos ? merged.size() : next;
  }
  if (out.empty()) out = "/";
  return prefix + out + query;
}

}  // namespace pb::net
