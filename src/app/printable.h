// Names and metadata come from untrusted files: before they reach a terminal, control bytes are shown as \xNN so
// that a header cannot send escape sequences to the user's screen.
#pragma once

#include <string>
#include <string_view>

namespace pb::app {

std::string Printable(std::string_view text);

}  // namespace pb::app
