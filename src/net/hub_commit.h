// The Hub's commit API as the native CLI's --push-to speaks it (src/cli/push_command.cc does the I/O): the
// requests' bodies, the answers' parsing and the URLs, as @huggingface/hub's commit sends them (docs/push.md).
// Sans-I/O: JSON in, JSON out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace pb::net {

struct HubCommitUrls {
  std::string create_repo;  // POST {name, organization, type}
  std::string repo_info;    // GET: whether the repo exists (after a refused creation)
  std::string branch;       // POST: create BRANCH from main
  std::string preupload;    // POST {files: [{path, size, sample}]}
  std::string lfs_batch;    // POST git-lfs batch
  std::string commit;       // POST NDJSON
};
// `endpoint` without a trailing '/'; the branch URL-encoded as one segment (refs/pr/1 → refs%2Fpr%2F1).
HubCommitUrls MakeHubCommitUrls(std::string_view endpoint, std::string_view repo, std::string_view branch,
                                bool create_pr);

std::string Base64(std::string_view bytes);

struct PreuploadFile {
  std::string path;
  uint64_t size = 0;
  std::string sample;  // the first 512 bytes (or fewer)
};
std::string PreuploadRequestJson(const std::vector<PreuploadFile>& files);
// The paths the answer says go through LFS (uploadMode "lfs"); InvalidArgument on a malformed answer.
Result<std::vector<std::string>> ParsePreuploadLfsPaths(std::string_view answer);

struct LfsObject {
  std::string oid;  // sha256, hex
  uint64_t size = 0;
};
// {operation: upload, transfers: [basic, multipart], hash_algo: sha_256, ref?: {name}, objects}
std::string LfsBatchRequestJson(const std::vector<LfsObject>& objects, std::optional<std::string_view> ref);

struct LfsUpload {
  std::string oid;
  bool needed = false;                 // false: the Hub has the object already
  std::string href;                    // basic: the PUT URL; multipart: the completion URL
  uint64_t chunk_size = 0;             // multipart when > 0
  std::vector<std::string> part_urls;  // multipart: part 1, 2, ... in order
};
// One entry per requested object, in the answer's order; an object's error or a malformed answer is an IoError
// naming it.
Result<std::vector<LfsUpload>> ParseLfsBatch(std::string_view answer);

// {oid, parts: [{partNumber, etag}]}
std::string MultipartCompletionJson(std::string_view oid, const std::vector<std::string>& etags);

struct CommitEntry {
  std::string path;
  bool lfs = false;
  std::string oid;      // lfs
  uint64_t size = 0;    // lfs
  std::string content;  // regular files: the bytes, sent base64
};
// The NDJSON body: a header line {summary, description}, then one `lfsFile` or `file` line per entry.
std::string CommitNdjson(std::string_view summary, std::string_view description,
                         const std::vector<CommitEntry>& entries);

struct CommitAnswer {
  std::string commit_oid;
  std::string commit_url;
  std::string pull_request_url;
};
Result<CommitAnswer> ParseCommitAnswer(std::string_view answer);

// The Hub's error message in a failed answer's body ({"error": ...}) or X-Error-Message, else "HTTP <status>".
std::string HubErrorText(int status, std::string_view body, std::string_view x_error_message);

}  // namespace pb::net
