#include "app/remote_address.h"

#include <cstring>

#include "app/base_layout.h"
#include "app/http_url.h"
#include "core/json.h"
#include "core/utf8.h"

namespace pb::app {
namespace {

Error Invalid(std::string message) { return MakeError(ErrorCode::InvalidArgument, std::move(message)); }

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != prefix[i]) return false;
  }
  return true;
}

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      parts.emplace_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

// '.' and '..' segments would be resolved away by URL parsing and address another file.
Status CheckSegments(std::string_view what, const std::string& value) {
  if (value.empty()) return Invalid(std::string(what) + " must be a non-empty string");
  for (const std::string& s : Split(value, '/'))
    if (s.empty() || s == "." || s == "..")
      return Invalid(std::string(what) + " `" + value + "` has an empty, '.' or '..' segment");
  return Status::Ok();
}

std::string EncodeSegments(std::string_view path) {
  std::string out;
  for (const std::string& s : Split(path, '/')) out += (out.empty() ? "" : "/") + EncodeUriComponent(s);
  return out;
}

std::string HubFileUrl(const RemoteAddress& a, std::string_view path, std::string_view revision) {
  return a.endpoint + "/" + EncodeSegments(a.repo) + "/resolve/" + EncodeUriComponent(revision) + "/" + EncodeSegments(path);
}

bool NamesFile(std::string_view path) {
  std::string_view last = path.substr(path.rfind('/') == std::string_view::npos ? 0 : path.rfind('/') + 1);
  for (std::string_view ext : {".safetensors", ".gguf", ".json", ".bin", ".pt", ".pth"})  // pickles too, to be refused by name
    if (last.ends_with(ext)) return true;
  return false;
}

}  // namespace

bool IsRemoteArgument(std::string_view arg) {
  return StartsWithNoCase(arg, "http://") || StartsWithNoCase(arg, "https://") || StartsWithNoCase(arg, "hf://");
}

std::string EncodeUriComponent(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                (c != 0 && std::strchr("-_.!~*'()", c) != nullptr);
    if (keep) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

Result<RemoteAddress> ParseRemoteAddress(std::string_view arg, std::string_view endpoint) {
  RemoteAddress a;
  a.label = ClipForMessage(arg, 1000);
  if (!StartsWithNoCase(arg, "hf://")) {
    a.url = std::string(arg);
    return a;
  }
  a.hub = true;
  a.endpoint = std::string(endpoint.empty() ? kDefaultHubEndpoint : endpoint);
  while (!a.endpoint.empty() && a.endpoint.back() == '/') a.endpoint.pop_back();
  std::string_view rest = arg.substr(5);
  a.revision = "main";
  if (size_t at = rest.rfind('@'); at != std::string_view::npos) {
    a.revision = std::string(rest.substr(at + 1));
    a.explicit_revision = true;
    rest = rest.substr(0, at);
    if (a.revision.empty()) return Invalid("`" + a.label + "` has an empty revision");
  }
  std::vector<std::string> parts = Split(rest, '/');
  if (parts.size() < 2 || parts[1].empty())
    return Invalid("`" + a.label + "` must look like hf://owner/repo[/path][@revision]");
  a.repo = parts[0] + "/" + parts[1];
  for (size_t i = 2; i < parts.size(); ++i) a.path += (i > 2 ? "/" : "") + parts[i];
  PB_RETURN_IF_ERROR(CheckSegments("repo", a.repo));
  if (!a.path.empty())
    PB_RETURN_IF_ERROR(CheckSegments("path", a.path));
  a.folder = a.path.empty() || !NamesFile(a.path);
  if (a.folder) {
    a.url = a.endpoint + "/api/models/" + EncodeSegments(a.repo) + "/tree/" + EncodeUriComponent(a.revision) +
            (a.path.empty() ? "" : "/" + EncodeSegments(a.path));
  } else {
    a.url = HubFileUrl(a, a.path, a.revision);
  }
  return a;
}

Result<RemoteFile> RemoteFileAddress(std::string_view arg, std::string_view endpoint) {
  PB_ASSIGN_OR_RETURN(auto a, ParseRemoteAddress(arg, endpoint));
  if (!a.hub) return RemoteFile{a.url, a.label};
  if (a.path.empty()) return Invalid("`" + a.label + "` names a repo, not a file: hf://owner/repo/path[@revision]");
  return RemoteFile{HubFileUrl(a, a.path, a.revision), a.label};
}

RemoteFile RemoteEntry(const RemoteAddress& a, std::string_view name, const std::optional<std::string>& commit) {
  if (!a.hub) {
    // Beside the URL: its last segment replaced (its query and fragment dropped).
    auto url = net::ResolveUrl(a.url, EncodeUriComponent(name));
    std::string resolved = url.value_or(std::string(name));
    return {resolved, resolved};
  }
  std::string dir = a.folder ? a.path : a.path.substr(0, a.path.rfind('/') == std::string::npos ? 0 : a.path.rfind('/'));
  std::string path = dir.empty() ? std::string(name) : dir + "/" + std::string(name);
  std::string label = "hf://" + a.repo + "/" + path + (a.explicit_revision ? "@" + a.revision : "");
  return {HubFileUrl(a, path, commit.value_or(a.revision)), label};
}

RemoteFile RemoteSelf(const RemoteAddress& address) { return {address.url, address.label}; }

std::string RemoteFileName(const RemoteAddress& a) {
  std::string_view path = a.hub ? std::string_view(a.path) : std::string_view(a.url);
  if (!a.hub) {
    path = path.substr(0, path.find_first_of("?#"));
    if (size_t scheme = path.find("://"); scheme != std::string_view::npos) path.remove_prefix(scheme + 3);
  }
  size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? (a.hub ? path : std::string_view()) : path.substr(slash + 1));
}

bool NamesRemoteModel(const RemoteAddress& address) {
  return address.folder || IsModelIndexName(RemoteFileName(address));
}

Result<std::vector<std::string>> ParseHubListing(std::string_view json_text, std::string_view label) {
  auto bad = [&] { return MakeError(ErrorCode::IoError, "the file list of `" + std::string(label) + "` is not a JSON array of entries"); };
  auto parsed = ParseJson(json_text, "the tree listing");
  if (!parsed.ok() || !parsed->is_array()) return bad();
  std::vector<std::string> names;
  for (const Json& entry : parsed.value()) {
    if (!entry.is_object()) return bad();
    auto type = entry.find("type");
    auto path = entry.find("path");
    if (type == entry.end() || path == entry.end() || !type->is_string() || !path->is_string()) continue;
    if (type->get_ref<const std::string&>() != "file") continue;
    const std::string& p = path->get_ref<const std::string&>();
    names.push_back(p.substr(p.rfind('/') == std::string::npos ? 0 : p.rfind('/') + 1));
  }
  return names;
}

}  // namespace pb::app
