// The dtype vocabulary users write, one for both CLIs and every JS entry point (each `dtype` option of the JS API,
// read by the core): bf16 | bfloat16, f16 | fp16 | float16 | half, f32 | fp32 | float32 | float, in any case.
#pragma once

#include <optional>
#include <string_view>

#include "core/dtype.h"
#include "core/result.h"

namespace pb {

// The dtype of a name of the vocabulary; nullopt for anything else.
std::optional<Dtype> ParseFloatDtypeName(std::string_view name);
// ParseFloatDtypeName's answer, or InvalidArgument "unknown dtype `NAME` (expected bf16, f16 or f32)": the one
// refusal of a bad dtype, whichever interface passed it.
Result<Dtype> ParseFloatDtypeOption(std::string_view name);
// "bf16", "f16" or "f32" (BF16, F16, F32): the spelling the grammar hands the commands.
std::string_view FloatDtypeOptionName(Dtype dtype);

}  // namespace pb
