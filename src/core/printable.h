// Names, metadata and messages come from untrusted files: before they reach a terminal, control characters are
// shown as escapes so that a file cannot send escape sequences to the user's screen (ESC ] 52 writes the
// clipboard, ESC ] 0 the window title, ESC [ 2J clears the screen).
#pragma once

#include <string>
#include <string_view>

namespace pb {

// One name or value on a line of its own: every C0 control character and DEL as \xNN (newlines included).
std::string Printable(std::string_view text);

// A whole text or JSON document a CLI prints: lines and tabs are kept; every other C0 control character as \xNN
// (JSON escapes them itself, so none stands raw in a JSON document), and DEL and the C1 controls (U+0080 to
// U+009F, which some terminals take as ESC sequences) as \u007f to \u009f, which read the same in a text and
// are valid escapes inside a JSON string. The one rule every CLI output passes through.
std::string TerminalSafe(std::string_view text);

}  // namespace pb
