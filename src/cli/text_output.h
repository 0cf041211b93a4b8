// Every text and JSON document the native CLI prints goes through WriteText: file-controlled names and messages
// reach the terminal with their control characters escaped (core/printable.h, the rule the npm CLI applies too).
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "core/printable.h"

namespace pb::cli {

inline void WriteText(std::FILE* to, std::string_view text) {
  const std::string safe = TerminalSafe(text);
  std::fwrite(safe.data(), 1, safe.size(), to);
}

}  // namespace pb::cli
