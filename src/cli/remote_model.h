// `inspect` of a remote model: a Hub repo or folder (its listing chosen from by app/base_layout.h), or the URL of
// a model.safetensors.index.json. Every shard's header is read with Range requests, in the index's order.
#pragma once

#include <string>

#include "core/result.h"
#include "net/remote_address.h"

namespace pb::cli {

// The report of every file of the model (app/report.h's RenderInspectFiles*), text or JSON.
Result<std::string> InspectRemoteModel(const net::RemoteAddress& address, bool json);

}  // namespace pb::cli
