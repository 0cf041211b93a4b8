#include "net/remote_address.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "core/json.h"
#include "core/utf8.h"
#include "net/http_url.h"

namespace pb::net {
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
  return a.endpoint + "/" + EncodeSegments(a.repo) + "/resolve/" + EncodeUriComponent(revision) + "/" +
         EncodeSegments(path);
}

bool NamesFile(std::string_view path) {
  std::string_view last = path.substr(path.rfind('/') == std::string_view::npos ? 0 : path.rfind('/') + 1);
  for (std::string_view ext :
       {".safetensors", ".gguf", ".json", ".bin", ".pt", ".pth"})  // pickles too, to be refused by name
    if (last.ends_with(ext)) return true;
  return false;
}

// The revisions huggingface_hub reads with their '/' after '@': refs/pr/N and refs/convert/NAME (NAME of word
// characters, '.' and '-'). Their length at the start of `s`, else 0.
size_t SpecialRefLength(std::string_view s) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  if (s.starts_with("refs/pr/")) {
    size_t n = 8;
    while (n < s.size() && s[n] >= '0' && s[n] <= '9') ++n;
    return n > 8 ? n : 0;
  }
  if (s.starts_with("refs/convert/")) {
    size_t n = 13;
    while (n < s.size() && (word(s[n]) || s[n] == '.' || s[n] == '-')) ++n;
    return n > 13 ? n : 0;
  }
  return 0;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX sequences decoded, as Python's unquote does for a revision (`feature%2Fx` is the branch feature/x); a '%'
// not followed by two hex digits stays as it is.
std::string PercentDecoded(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// A revision as huggingface_hub writes it before a path: its '/' as %2F, but for refs/pr/N and refs/convert/NAME.
std::string RevisionAsWritten(const std::string& revision) {
  if (SpecialRefLength(revision) == revision.size()) return revision;
  std::string out;
  for (char c : revision) out += c == '/' ? std::string("%2F") : std::string(1, c);
  return out;
}

// The rest of ParseRemoteAddress, once the revision is known: `rest` is owner/repo[/path].
Result<RemoteAddress> Finish(RemoteAddress a, std::string_view rest) {
  std::vector<std::string> parts = Split(rest, '/');
  if (parts.size() < 2 || parts[1].empty())
    return Invalid("`" + a.label +
                   "` must look like hf://owner/repo[/path][@revision] or hf://owner/repo[@revision][/path]");
  a.repo = parts[0] + "/" + parts[1];
  for (size_t i = 2; i < parts.size(); ++i) a.path += (i > 2 ? "/" : "") + parts[i];
  PB_RETURN_IF_ERROR(CheckSegments("repo", a.repo));
  if (!a.path.empty()) PB_RETURN_IF_ERROR(CheckSegments("path", a.path));
  a.folder = a.path.empty() || !NamesFile(a.path);
  if (a.folder) {
    a.url = a.endpoint + "/api/models/" + EncodeSegments(a.repo) + "/tree/" + EncodeUriComponent(a.revision) +
            (a.path.empty() ? "" : "/" + EncodeSegments(a.path));
  } else {
    a.url = HubFileUrl(a, a.path, a.revision);
  }
  return a;
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
  // huggingface_hub's type prefix: models/ is the default; the other repo kinds hold no model to read.
  if (rest.starts_with("models/")) rest.remove_prefix(7);
  for (std::string_view kind : {"datasets", "spaces", "kernels", "buckets"})
    if (rest.starts_with(kind) && rest.size() > kind.size() && rest[kind.size()] == '/')
      return Invalid("`" + a.label + "` names a Hub " + std::string(kind.substr(0, kind.size() - 1)) +
                     ", not a model repo: peft-bridge reads model repos (hf://owner/repo[@revision][/path])");
  a.revision = "main";
  size_t first_at = rest.find('@');
  size_t slashes = 0;
  for (size_t i = 0; i < std::min(first_at, rest.size()); ++i) slashes += rest[i] == '/';
  if (first_at != std::string_view::npos && slashes == 1) {
    // huggingface_hub's form: hf://owner/repo@revision[/path], a '/' in the revision written %2F (refs/pr/N and
    // refs/convert/NAME need none).
    std::string_view after = rest.substr(first_at + 1);
    size_t end = SpecialRefLength(after);
    if (end == 0) end = std::min(after.find('/'), after.size());
    a.revision = PercentDecoded(after.substr(0, end));
    a.explicit_revision = a.revision_first = true;
    std::string_view path = end < after.size() ? after.substr(end + 1) : std::string_view();
    if (a.revision.empty()) return Invalid("`" + a.label + "` has an empty revision");
    std::string joined = std::string(rest.substr(0, first_at)) + (path.empty() ? "" : "/" + std::string(path));
    return Finish(std::move(a), joined);
  }
  // Ours: hf://owner/repo[/path][@revision], the revision after the last '@' (it may hold '/', as refs/pr/1).
  if (size_t at = rest.rfind('@'); at != std::string_view::npos) {
    a.revision = PercentDecoded(rest.substr(at + 1));
    a.explicit_revision = true;
    rest = rest.substr(0, at);
    if (a.revision.empty()) return Invalid("`" + a.label + "` has an empty revision");
  }
  return Finish(std::move(a), rest);
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
  std::string dir = a.folder ? a.path
                             : a.path.substr(0, a.path.rfind('/') == std::string::npos ? 0 : a.path.rfind('/'));
  std::string path = dir.empty() ? std::string(name) : dir + "/" + std::string(name);
  std::string label = a.revision_first ? "hf://" + a.repo + "@" + RevisionAsWritten(a.revision) + "/" + path
                                       : "hf://" + a.repo + "/" + path + (a.explicit_revision ? "@" + a.revision : "");
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

Result<std::vector<std::string>> ParseHubListing(std::string_view json_text, std::string_view label) {
  auto bad = [&] {
    return MakeError(ErrorCode::IoError,
                     "the file list of `" + std::string(label) + "` is not a JSON array of entries");
  };
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

}  // namespace pb::net
