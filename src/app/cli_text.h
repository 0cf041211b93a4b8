// The CLI's help texts and version, shared by the native CLI and the npm package's CLI (which reads
// them from the WASM module) so that both print the same bytes.
#pragma once

#include <string_view>

namespace pb {

inline constexpr std::string_view kVersion = "0.1.0";

// Help for "" (the top level), "inspect" or "convert"; empty for an unknown command.
std::string_view CliHelp(std::string_view command);

}  // namespace pb
