// libFuzzer target for the commit journal a killed run leaves in its output directory (app/output_policy.h): the
// next run reads it before anything else and renames or removes the files it names, so a hostile or corrupt
// journal must never name anything but plain names in that directory.
//
// Input: the journal's text. Oracles (abort() on failure):
//   - a refused journal carries a message;
//   - an accepted one names only plain names (no '/', not "." or "..", not empty, no NUL), every temporary and
//     every file moved aside is one of our own temporaries (IsOwnTemporary);
//   - rendering an accepted journal and parsing it again gives the same journal.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "app/output_policy.h"

namespace {

[[noreturn]] void Fail(const std::string& what, const std::string& detail = "") {
  std::fprintf(stderr, "fuzz_commit_journal: %s\n%s\n", what.c_str(), detail.substr(0, 2000).c_str());
  std::abort();
}

bool Plain(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto journal = pb::app::ParseCommitJournal(text, "OUT/.peft-bridge-commit");
  if (!journal.ok()) {
    if (journal.error().message.empty()) Fail("a refusal without a message", text);
    return 0;
  }
  const auto& j = journal.value();
  for (const auto& r : j.renames) {
    if (!Plain(r.temp) || !Plain(r.final)) Fail("a rename names a path", r.temp + " -> " + r.final);
    if (!pb::app::IsOwnTemporary(r.temp)) Fail("a rename's source is not our temporary", r.temp);
  }
  for (const auto& n : j.remove)
    if (!Plain(n)) Fail("a removal names a path", n);
  for (const auto& n : j.asides)
    if (!Plain(n) || !pb::app::IsOwnTemporary(n)) Fail("a file moved aside is not our temporary", n);
  auto again = pb::app::ParseCommitJournal(pb::app::RenderCommitJournal(j), "again");
  if (!again.ok()) Fail("a rendered journal is refused", again.error().message);
  const auto& k = again.value();
  bool same = k.remove == j.remove && k.asides == j.asides && k.renames.size() == j.renames.size();
  for (size_t i = 0; same && i < k.renames.size(); ++i)
    same = k.renames[i].temp == j.renames[i].temp && k.renames[i].final == j.renames[i].final;
  if (!same) Fail("render then parse changes the journal", text);
  return 0;
}
