// A structure-aware mutator for the JSON targets (LLVMFuzzerCustomMutator).
//
// Plain byte mutation rarely keeps JSON valid and never builds the inputs that break parsers: a random run
// kept configs under 1.1 KB and no nesting deeper than a few levels. This mutator picks one part of the input
// (fuzz_input.h) and either
//   - hands it to libFuzzer's own byte mutation (LLVMFuzzerMutate), or
//   - parses it as JSON (or as a safetensors file: 8-byte length + JSON header + data) and mutates the tree:
//     replace / insert / delete / copy / wrap nodes, field names and values from the target's vocabulary,
//     edge numbers, regex-ish and dotted strings, or
//   - rarely, puts a huge value in a node, written in the compact encoding so the input stays small: a long
//     name (10k-1M chars), deep nesting (1k-200k levels), many keys (10k-100k) or many elements, or
//   - changes the count of an existing repetition, or swaps / duplicates / drops parts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pb::fuzz {

struct MutatorVocabulary {
  std::vector<std::string> keys;     // object keys worth inserting (the format's field names)
  std::vector<std::string> strings;  // string values and name fragments
};

size_t MutateInput(uint8_t* data, size_t size, size_t max_size, unsigned seed, const MutatorVocabulary& vocab);

}  // namespace pb::fuzz

// Defines the target's LLVMFuzzerCustomMutator over MutateInput with the given vocabulary expression.
#define PB_FUZZ_DEFINE_MUTATOR(vocabulary)                                                                \
  extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) { \
    static const pb::fuzz::MutatorVocabulary vocab = (vocabulary);                                        \
    return pb::fuzz::MutateInput(data, size, max_size, seed, vocab);                                      \
  }
