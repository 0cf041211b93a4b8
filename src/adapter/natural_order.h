// Module paths in natural layer order: `layers.2` before `layers.10`. Paths are compared segment by segment
// (segments split at '.'); two all-digit segments compare as numbers, anything else byte-wise; a path that is a
// prefix of another comes first. Used where modules are listed for people (adapter-info).
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace pb::adapter {

bool NaturalPathLess(std::string_view a, std::string_view b);

// The positions 0..paths.size()-1 in natural order of `paths` (stable for equal paths).
std::vector<size_t> NaturalOrder(const std::vector<std::string_view>& paths);

}  // namespace pb::adapter
