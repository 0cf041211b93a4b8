// Which server an edge worker may read an address from, when a request names one (an adapter registration's
// `endpoint`). The worker's own Hub endpoint (HF_ENDPOINT) is the only one its Hub token goes to; another origin
// is allowed only when the deployment lists it (ALLOWED_ENDPOINTS), so a request cannot make the worker read from,
// and send credentials to, a server of its choosing. Origins are compared as the adapter cache compares them when
// it decides where its token goes (UrlOrigin), so the two decisions cannot disagree.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace pb::net {

struct WorkerEndpoint {
  std::string endpoint;  // the worker's endpoint as configured, or the allowed origin
  bool own = false;      // true for the worker's own endpoint: the only one its Hub token may go to
};

// The origin of an http(s) URL without user info; "" for anything else (another scheme, no host, a password).
std::string HttpOrigin(std::string_view url);

// `requested` (none or empty: the worker's own) against the worker's `home` endpoint and the `allowed` origins
// (separated by commas or white space). InvalidArgument when `home` is no http(s) URL, or when `requested` is
// neither the worker's origin nor a listed one.
Result<WorkerEndpoint> ChooseWorkerEndpoint(std::optional<std::string_view> requested, std::string_view home,
                                            std::string_view allowed);

}  // namespace pb::net
