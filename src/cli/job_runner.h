// The native executor of jobs (job/job.h, docs/jobs.md): every command that is a job runs through RunJob.
// Reads are pread on the input files, writes pwrite at the job's offsets, forwarded ranges are copied inside the
// kernel where it can (copy_file_range, then splice; read and write otherwise), messages go to stdout (warnings to
// stderr), progress to
// the stderr meter, and the outputs are committed all at once when the job is done (the output transaction).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cli/base_model.h"
#include "cli/file_io.h"
#include "cli/output_transaction.h"
#include "cli/stderr_progress.h"
#include "job/job.h"

namespace pb::cli {

// An input file read with pread, bytes in memory, or a model's shard (local or remote: cli/base_model.h) read with
// one Stream per read step, its chunks supplied as they come (the job asks for the rest of the range between them).
struct JobInput {
  const InputFile* file = nullptr;
  std::string name;                // how the progress line names it (the file's name, not its path)
  std::span<const uint8_t> bytes;  // without a file: the input's bytes in memory (a remote adapter fetched whole)
  ShardBytes* shard = nullptr;     // instead of `file` and `bytes`
};

// The job's outputs, opened at their first write and committed together at kDone.
class JobOutputs {
 public:
  virtual ~JobOutputs() = default;
  virtual Result<AtomicOutputFile*> Open(size_t output) = 0;
  virtual Status Commit() = 0;
};

// Outputs in an OutputTransaction begun (by `begin`) at the first write, so a job refused before it writes
// leaves nothing; output i is the transaction's file `names[i]`. A job with no outputs (a dry run) commits nothing.
class TransactionOutputs final : public JobOutputs {
 public:
  using Begin = std::function<Result<std::unique_ptr<OutputTransaction>>()>;
  TransactionOutputs(Begin begin, std::vector<std::string> names)
      : begin_(std::move(begin)), names_(std::move(names)) {}
  Result<AtomicOutputFile*> Open(size_t output) override;
  Status Commit() override;

 private:
  Begin begin_;
  std::vector<std::string> names_;
  std::unique_ptr<OutputTransaction> transaction_;
  std::vector<AtomicOutputFile*> files_;
};

// Runs `job` to its end. An error (the job's, or reading and writing) is returned as it is; the outputs are then
// not committed, and the progress line is abandoned. A job's progress steps give the meter its total; a job that
// tells no progress draws no line.
Status RunJob(job::Job& job, std::span<const JobInput> inputs, JobOutputs& outputs, StderrProgress& progress);

}  // namespace pb::cli
