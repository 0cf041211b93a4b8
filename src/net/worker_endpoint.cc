#include "net/worker_endpoint.h"

#include <vector>

#include "core/error.h"
#include "core/utf8.h"
#include "net/http_url.h"

namespace pb::net {

std::string HttpOrigin(std::string_view url) {
  const std::string scheme = UrlScheme(url);
  if ((scheme != "http" && scheme != "https") || UrlHasUserInfo(url)) return "";
  std::string origin = UrlOrigin(url);
  return origin.size() > scheme.size() + 3 ? origin : "";  // a host after "scheme://"
}

Result<WorkerEndpoint> ChooseWorkerEndpoint(std::optional<std::string_view> requested, std::string_view home,
                                            std::string_view allowed) {
  const std::string home_origin = HttpOrigin(home);
  if (home_origin.empty())
    return MakeError(ErrorCode::InvalidArgument,
                     "the worker's Hub endpoint `" + ClipForMessage(home) + "` is not an http(s) URL");
  if (!requested || requested->empty()) return WorkerEndpoint{std::string(home), true};
  const std::string origin = HttpOrigin(*requested);
  if (origin == home_origin) return WorkerEndpoint{std::string(home), true};
  std::vector<std::string> list, unusable;  // the listed origins; entries that are no http(s) URL
  for (size_t i = 0; i < allowed.size();) {
    size_t end = allowed.find_first_of(", \t\r\n", i);
    if (end == std::string_view::npos) end = allowed.size();
    if (end > i) {
      const std::string_view entry = allowed.substr(i, end - i);
      std::string o = HttpOrigin(entry);
      if (o.empty()) unusable.push_back(ClipForMessage(entry));
      else if (o == origin) return WorkerEndpoint{std::move(o), false};
      else list.push_back(std::move(o));
    }
    i = end + 1;
  }
  // The message names what the deployment allows, each origin clipped and at most kNamed of each kind, so that a
  // long configuration cannot make a long message.
  constexpr size_t kNamed = 8;
  auto more = [](size_t n) { return n > kNamed ? " and " + std::to_string(n - kNamed) + " more" : std::string(); };
  std::string others, ignored;
  for (size_t i = 0; i < list.size() && i < kNamed; ++i) others += (i == 0 ? " and " : ", ") + ClipForMessage(list[i]);
  others += more(list.size());
  for (size_t i = 0; i < unusable.size() && i < kNamed; ++i) ignored += (i == 0 ? "`" : ", `") + unusable[i] + "`";
  ignored += more(unusable.size());
  if (unusable.size() == 1) ignored = "; its entry " + ignored + " is not an http(s) URL";
  if (unusable.size() > 1) ignored = "; its entries " + ignored + " are not http(s) URLs";
  return MakeError(ErrorCode::InvalidArgument, "`endpoint` `" + ClipForMessage(*requested) +
                                                   "` is not allowed: this worker reads from its Hub (" +
                                                   ClipForMessage(home_origin) + ")" + others +
                                                   " only (ALLOWED_ENDPOINTS lists other servers" + ignored + ")");
}

}  // namespace pb::net
