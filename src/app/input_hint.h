// What the user should pass instead, when an input the CLIs open is not what the command reads: a directory
// given to a command that takes one file, a config file (adapter_config.json, config.json, an index) given
// where its folder or the weights beside it belong. The rule for both CLIs: each gathers the facts (the path as
// given, whether it is a directory) and hands the error it met, with them, to ExplainInputError.
#pragma once

#include <string>

#include "core/error.h"

namespace pb::app {

enum class InputRole {
  kTensorFile,  // one .safetensors file: inspect, convert's IN
  kAdapter,     // an adapter folder or its weights: adapter-info, translate, merge --adapter
  kBase,        // a base model folder or its one file: merge/unmerge --base
};

// The path as the user gave it, and what the file system says of it.
struct InputProbe {
  std::string path;
  bool directory = false;
  bool exists = true;  // false: nothing at all is at `path` (lstat fails), so a Hub repo id may have been meant
};

// `error` (met opening or reading `probe`'s header) told as what happened, when the facts say: "`x` is a
// directory; pass a .safetensors file inside it", "`x/adapter_config.json` is an adapter's config, not its
// weights: pass its folder `x`", "cannot open `me/lora`: No such file or directory (did you mean `hf://me/lora`?)"
// for a path that does not exist and reads as a Hub repo id. Any other error is returned unchanged.
Error ExplainInputError(Error error, const InputProbe& probe, InputRole role);

}  // namespace pb::app
