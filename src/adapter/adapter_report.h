// Text and JSON renderings for `adapter-info` and `translate`. In the core, so the native CLI and the npm
// CLI print the same bytes.
#pragma once

#include <string>

#include "adapter/translate.h"

namespace pb::adapter {

std::string RenderAdapterInfoText(const ReadResult& read);
std::string RenderAdapterInfoJson(const ReadResult& read);
// `dry_run`: nothing was written; the plan says what would be.
std::string RenderTranslateText(const TranslateResult& result, AdapterFormat to, bool dry_run);
std::string RenderTranslateJson(const TranslateResult& result, AdapterFormat to, bool dry_run);

}  // namespace pb::adapter
