// Text and JSON renderings for `adapter-info` and `translate`. In the core, so the native CLI and the npm
// CLI print the same bytes.
#pragma once

#include <string>

#include "adapter/translate.h"

namespace pb::adapter {

std::string RenderAdapterInfoText(const ReadResult& read);
std::string RenderAdapterInfoJson(const ReadResult& read);
// The whole summary, once the work is done ("translated ... wrote: ..."), or with `dry_run` what would be done.
std::string RenderTranslateText(const TranslateResult& result, AdapterFormat to, bool dry_run);
// What the CLIs print before the work starts ("translate a -> b: ...", the mapping and the notes), and the
// outcome line after it ("wrote: ..."), as merge prints its plan, then its outcome.
std::string RenderTranslatePlanText(const TranslateResult& result, AdapterFormat to);
std::string RenderTranslateOutcomeText(const TranslateResult& result);
std::string RenderTranslateJson(const TranslateResult& result, AdapterFormat to, bool dry_run);

}  // namespace pb::adapter
