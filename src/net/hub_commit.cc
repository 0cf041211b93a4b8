#include "net/hub_commit.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace pb::net {
namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Percent-encodes everything but RFC 3986's unreserved characters (encodeURIComponent minus its extras).
std::string EncodeComponent(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
        c == '.' || c == '~')
      out.push_back(static_cast<char>(c));
    else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

Error Malformed(std::string_view what) {
  return MakeError(ErrorCode::IoError, "the Hub's answer to " + std::string(what) + " is malformed");
}

}  // namespace

HubCommitUrls MakeHubCommitUrls(std::string_view endpoint, std::string_view repo, std::string_view branch,
                                bool create_pr) {
  std::string base(endpoint);
  std::string rev = EncodeComponent(branch);
  std::string pr = create_pr ? "?create_pr=1" : "";
  return {base + "/api/repos/create",
          base + "/api/models/" + std::string(repo),
          base + "/api/models/" + std::string(repo) + "/branch/" + rev,
          base + "/api/models/" + std::string(repo) + "/preupload/" + rev + pr,
          base + "/" + std::string(repo) + ".git/info/lfs/objects/batch",
          base + "/api/models/" + std::string(repo) + "/commit/" + rev + pr};
}

std::string Base64(std::string_view bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8 | uint8_t(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out.push_back(kAlphabet[(v >> s) & 63]);
  }
  if (size_t rest = bytes.size() - i) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | (rest == 2 ? uint32_t(uint8_t(bytes[i + 1])) << 8 : 0);
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(rest == 2 ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

std::string PreuploadRequestJson(const std::vector<PreuploadFile>& files) {
  json list = json::array();
  for (const auto& f : files) list.push_back({{"path", f.path}, {"size", f.size}, {"sample", Base64(f.sample)}});
  return Dump({{"files", list}});
}

Result<std::vector<std::string>> ParsePreuploadLfsPaths(std::string_view answer) {
  auto j = json::parse(answer, nullptr, false);
  if (!j.is_object() || !j.contains("files") || !j["files"].is_array()) return Malformed("preupload");
  std::vector<std::string> lfs;
  for (const auto& f : j["files"]) {
    if (!f.is_object() || !f.contains("path") || !f["path"].is_string()) return Malformed("preupload");
    if (f.contains("uploadMode") && f["uploadMode"] == "lfs") lfs.push_back(f["path"].get<std::string>());
  }
  return lfs;
}

std::string LfsBatchRequestJson(const std::vector<LfsObject>& objects, std::optional<std::string_view> ref) {
  json list = json::array();
  for (const auto& o : objects) list.push_back({{"oid", o.oid}, {"size", o.size}});
  json j = {
      {"operation", "upload"}, {"transfers", {"basic", "multipart"}}, {"hash_algo", "sha_256"}, {"objects", list}};
  if (ref) j["ref"] = {{"name", std::string(*ref)}};
  return Dump(j);
}

Result<std::vector<LfsUpload>> ParseLfsBatch(std::string_view answer) {
  auto j = json::parse(answer, nullptr, false);
  if (!j.is_object() || !j.contains("objects") || !j["objects"].is_array()) return Malformed("the LFS batch call");
  std::vector<LfsUpload> out;
  for (const auto& o : j["objects"]) {
    if (!o.is_object() || !o.contains("oid") || !o["oid"].is_string()) return Malformed("the LFS batch call");
    LfsUpload u;
    u.oid = o["oid"].get<std::string>();
    if (o.contains("error") && o["error"].is_object()) {
      std::string message = o["error"].contains("message") && o["error"]["message"].is_string()
                                ? o["error"]["message"].get<std::string>()
                                : "refused";
      return MakeError(ErrorCode::IoError, "the Hub refused LFS object " + u.oid + ": " + message);
    }
    const json* upload = nullptr;
    if (o.contains("actions") && o["actions"].is_object() && o["actions"].contains("upload"))
      upload = &o["actions"]["upload"];
    if (upload) {
      if (!upload->is_object() || !upload->contains("href") || !(*upload)["href"].is_string())
        return Malformed("the LFS batch call");
      u.needed = true;
      u.href = (*upload)["href"].get<std::string>();
      if (upload->contains("header") && (*upload)["header"].is_object()) {
        const json& h = (*upload)["header"];
        if (h.contains("chunk_size") && h["chunk_size"].is_string()) {
          u.chunk_size = std::stoull("0" + h["chunk_size"].get<std::string>());
          if (u.chunk_size == 0) return Malformed("the LFS batch call");
          // parts are the header's all-digit keys, '00001' ... in order
          std::vector<std::pair<uint64_t, std::string>> parts;
          for (auto it = h.begin(); it != h.end(); ++it) {
            const std::string& key = it.key();
            if (key.empty() || key.find_first_not_of("0123456789") != std::string::npos || !it->is_string()) continue;
            parts.emplace_back(std::stoull(key), it->get<std::string>());
          }
          std::sort(parts.begin(), parts.end());
          for (size_t i = 0; i < parts.size(); ++i) {
            if (parts[i].first != i + 1) return Malformed("the LFS batch call");
            u.part_urls.push_back(parts[i].second);
          }
        }
      }
    }
    out.push_back(std::move(u));
  }
  return out;
}

std::string MultipartCompletionJson(std::string_view oid, const std::vector<std::string>& etags) {
  json parts = json::array();
  for (size_t i = 0; i < etags.size(); ++i) parts.push_back({{"partNumber", i + 1}, {"etag", etags[i]}});
  return Dump({{"oid", std::string(oid)}, {"parts", parts}});
}

std::string CommitNdjson(std::string_view summary, std::string_view description,
                         const std::vector<CommitEntry>& entries) {
  json header = {{"summary", std::string(summary)}};
  if (!description.empty()) header["description"] = std::string(description);
  std::string out = Dump({{"key", "header"}, {"value", header}});
  for (const auto& e : entries) {
    json line = e.lfs ? json{{"key", "lfsFile"},
                             {"value", {{"path", e.path}, {"algo", "sha256"}, {"size", e.size}, {"oid", e.oid}}}}
                      : json{{"key", "file"},
                             {"value", {{"content", Base64(e.content)}, {"path", e.path}, {"encoding", "base64"}}}};
    out += "\n" + Dump(line);
  }
  return out;
}

Result<CommitAnswer> ParseCommitAnswer(std::string_view answer) {
  auto j = json::parse(answer, nullptr, false);
  if (!j.is_object() || !j.contains("commitOid") || !j["commitOid"].is_string()) return Malformed("the commit");
  CommitAnswer a;
  a.commit_oid = j["commitOid"].get<std::string>();
  if (j.contains("commitUrl") && j["commitUrl"].is_string()) a.commit_url = j["commitUrl"].get<std::string>();
  if (j.contains("pullRequestUrl") && j["pullRequestUrl"].is_string())
    a.pull_request_url = j["pullRequestUrl"].get<std::string>();
  return a;
}

std::string HubErrorText(int status, std::string_view body, std::string_view x_error_message) {
  auto j = json::parse(body, nullptr, false);
  std::string message;
  if (j.is_object() && j.contains("error") && j["error"].is_string()) message = j["error"].get<std::string>();
  else if (!x_error_message.empty()) message = std::string(x_error_message);
  if (message.empty()) return "HTTP " + std::to_string(status);
  return message + " (HTTP " + std::to_string(status) + ")";
}

}  // namespace pb::net
