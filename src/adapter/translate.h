// translate = read an adapter in one convention, write it in another, and account for every tensor.
#pragma once

#include "adapter/adapter_io.h"

namespace pb::adapter {

struct TranslateResult {
  ReadResult read;
  AdapterOutput output;
  // Every input tensor: its output name and the composed action, or why it was rejected (read or write).
  std::vector<TensorMapping> plan;
  // With write_options.allow_partial: one "warning: dropped ..." line per input tensor the output does not hold.
  std::string warnings;
};

// Refuses (UnresolvedTensor, every dropped tensor listed) when an input tensor would not reach the output, unless
// write_options.allow_partial: the rule of adapter::CheckDropped, for both CLIs and the JS API alike.
Result<TranslateResult> Translate(const AdapterSource& source, AdapterFormat to, const ReadOptions& read_options,
                                  const WriteOptions& write_options);

}  // namespace pb::adapter
