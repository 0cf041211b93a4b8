// The facts the output policy (app/output_policy.h) decides on, gathered from the file system: canonical paths,
// identities, the output directory's listing. The npm CLI gathers the same facts with Node's fs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "app/output_policy.h"

namespace pb::cli {

// The directory part of a path as the commands take it ("." when there is none).
std::string DirectoryOf(const std::string& path);

// A directory the user named (IN_DIR, --adapter DIR, --base DIR).
app::InputFact DirectoryFact(const std::string& label, const std::string& path);
// A file the command reads. `within`: the directory the command found it in (its real path must stay inside
// unless --follow-links); none for a file the user named directly.
app::InputFact FileFact(const std::string& label, const std::string& path, const std::optional<std::string>& within);

// An adapter given as DIR (or as its weights file): the directory, the weights file, adapter_config.json beside.
void AddAdapterFacts(const std::string& label, const std::string& given, const std::string& weights_path,
                     std::vector<app::InputFact>& facts);

// Every path the command line names as an input (app::NamedInputs: --naming-table, --base-config, ... whatever
// the flag), as a directory or a file fact, added to `facts`.
void AddNamedInputFacts(const app::CommandLine& line, std::vector<app::InputFact>& facts);

// The output directory `path` (which may not exist yet) and the names the command writes into it. A commit an
// earlier run was killed in is completed first (RecoverOutputDirectory); its failure is the request's `failure`.
app::OutputRequest DescribeOutputDirectory(const std::string& label, const std::string& path,
                                           std::vector<std::string> writes);
// convert's OUT: one file in a directory the command shares with others.
app::OutputRequest DescribeOutputFile(const std::string& path);

}  // namespace pb::cli
