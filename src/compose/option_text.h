// The option values the adapter commands take as text (both CLIs and the JS API pass strings), read one way for
// all of them: create's --r / --alpha, extract's --rank / --max-rank / --energy (a dtype: core/dtype.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/dtype.h"

namespace pb::compose {

// Decimal digits only, 1 to 2^31.
std::optional<uint64_t> PositiveInteger(std::string_view text);
// A positive finite decimal number: digits, one point, an optional exponent (no hex, inf or nan, which strtod
// takes).
std::optional<double> PositiveDecimal(std::string_view text);

}  // namespace pb::compose
