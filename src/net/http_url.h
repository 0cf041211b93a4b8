// The few URL rules the HTTP policy needs, written once so both CLIs and the JS API agree on them: a URL's
// origin (to scope the token), user info (refused: a password in a URL would be sent in clear and logged), and
// resolving a redirect's Location against the URL that answered it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace pb::net {

// The lower-case scheme of an absolute URL ("" when `url` has none).
std::string UrlScheme(std::string_view url);

// scheme://host[:port] in lower case, without user info and without the scheme's default port; "" when `url` is
// not absolute.
std::string UrlOrigin(std::string_view url);

// host[:port] of UrlOrigin (what a connection failure names); "" when `url` is not absolute.
std::string UrlHost(std::string_view url);

// True when the URL's authority carries user info (`user@` or `user:password@`).
bool UrlHasUserInfo(std::string_view url);

// `location` (absolute, scheme-relative `//host/…`, absolute-path `/…` or relative) resolved against `base`, without
// its fragment; std::nullopt when `base` is not absolute.
std::optional<std::string> ResolveUrl(std::string_view base, std::string_view location);

}  // namespace pb::net
