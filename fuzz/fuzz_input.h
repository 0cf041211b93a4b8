// How a fuzz input is laid out, shared by every target and the mutator.
//
// Parts: an input is one or more parts separated by kPartSeparator, "\n--\n". Valid JSON never holds it
// (a string may not contain a raw newline and "--" is no token), so a JSON part is never split.
//
// Compact encoding: before a target reads its parts it expands repetitions, so an input of a few hundred
// bytes can stand for a 1 MB name, 200,000 levels of nesting or 100,000 keys (the random byte fuzzer never
// builds those, and -max_len stays small). The control bytes cannot occur in valid JSON text:
//   \x01 R <decimal count> \x02 <body> \x03   the body repeated count times (count <= 1,000,000)
//   \x01 #                                   inside a body: the index of the current repetition
// Bodies may nest (up to 3 levels); the expansion stops at kMaxExpandedSize bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pb::fuzz {

inline constexpr std::string_view kPartSeparator = "\n--\n";
inline constexpr size_t kMaxExpandedSize = 4u << 20;  // room for a 1M-char name or 100k keys

std::string Expand(std::string_view input);

// At most max_parts parts; the last one takes the rest of the input.
std::vector<std::string_view> SplitParts(std::string_view input, size_t max_parts);
std::string JoinParts(const std::vector<std::string>& parts);


}  // namespace pb::fuzz
