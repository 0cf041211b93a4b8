// The one error a merge plan returns when the base and the adapter disagree: every problem found, each with its
// own code, summarised by a headline. An adapter of another model ("merged into the wrong base") is the common
// case and gets a headline of its own, naming both models, before the capped list.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace pb::merge {

// What the headline can say about the two models; each fact is optional.
struct ModelFacts {
  std::optional<std::string> adapter_base;  // adapter_config.json's base_model_name_or_path ("gpt2")
  std::optional<std::string> adapter_arch;  // the class of the naming table its module names match ("GPT2LMHeadModel")
  std::optional<std::string> base_arch;     // the base config.json's architectures[0], else its model_type
  size_t adapter_modules = 0;               // the adapter's LoRA modules
};

// The most lines the message lists; the rest are counted ("and 12 more"). Error::problems keeps them all.
inline constexpr size_t kListedProblems = 20;

// ModulesNotFound when any adapter module is missing from the base (the headline then counts the modules found);
// otherwise UnsupportedBase when every problem is a base the merge cannot change (a quantized weight),
// UnsupportedAdapter when every problem is a refusal, else ShapeMismatch. `problems` is not empty.
Error PlanProblemsError(std::vector<Problem> problems, const ModelFacts& facts);

// The headline for `missing` of facts.adapter_modules modules absent from the base:
// "adapter trained on gpt2 (GPT2LMHeadModel); base is LlamaForCausalLM: 0 of 36 modules found".
std::string MissingModulesHeadline(const ModelFacts& facts, size_t missing);

}  // namespace pb::merge
