// What a front end asks of a command's job besides its steps (job/job.h): the plan its output policy made, the
// names and size of what it writes, and the summary to print once the outputs are in place. The WASM handle runs
// any command's job through this one interface (wasm/job_bindings.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/output_policy.h"
#include "job/job.h"

namespace pb::app {

class CommandJob : public job::Job {
 public:
  // Once planned (before the first write): the output policy's plan (empty without a check).
  virtual const OutputPlan& output_plan() const = 0;
  // Once planned: the outputs' names, in output order (empty when the command's front end names them itself).
  virtual std::vector<std::string> output_names() const { return {}; }
  // Once planned: the size of output 0, when the job knows it before writing it.
  virtual std::optional<uint64_t> output_size() const { return std::nullopt; }
  // At kDone: what the command prints once its outputs are in place.
  virtual const std::string& summary() const = 0;
};

}  // namespace pb::app
