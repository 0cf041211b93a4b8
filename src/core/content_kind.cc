#include "core/content_kind.h"

#include <string_view>

namespace pb {
namespace {

bool StartsWith(std::span<const uint8_t> head, std::string_view magic) {
  if (head.size() < magic.size()) return false;
  for (size_t i = 0; i < magic.size(); ++i)
    if (head[i] != static_cast<uint8_t>(magic[i])) return false;
  return true;
}

// Printable ASCII, whitespace, or well-formed UTF-8 (a sequence cut by the end of `head` counts as text).
bool LooksLikeText(std::span<const uint8_t> head) {
  for (size_t i = 0; i < head.size();) {
    const uint8_t c = head[i];
    if (c == '\t' || c == '\n' || c == '\r' || (c >= 0x20 && c < 0x7f)) {
      ++i;
      continue;
    }
    size_t extra = c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : 0;
    if (extra == 0) return false;  // a control byte, NUL, 0x7f, a stray continuation or an invalid lead byte
    for (size_t k = 1; k <= extra && i + k < head.size(); ++k)
      if ((head[i + k] & 0xc0) != 0x80) return false;
    i += extra + 1;
  }
  return !head.empty();
}

}  // namespace

ContentKind ClassifyContent(std::span<const uint8_t> head) {
  if (StartsWith(head, "GGUF")) return ContentKind::kGguf;
  if (StartsWith(head, "PK\x03\x04")) return ContentKind::kZip;
  if (StartsWith(head, "\x1f\x8b")) return ContentKind::kGzip;
  if (head.size() >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5) return ContentKind::kPickle;
  if (!LooksLikeText(head)) return ContentKind::kUnknown;
  std::span<const uint8_t> text = head;
  if (StartsWith(text, "\xef\xbb\xbf")) text = text.subspan(3);  // a byte-order mark
  while (!text.empty() && (text[0] == ' ' || text[0] == '\t' || text[0] == '\n' || text[0] == '\r'))
    text = text.subspan(1);
  if (StartsWith(text, "version ")) return ContentKind::kGitLfsPointer;  // "version https://git-lfs.github.com/spec/v1"
  if (!text.empty() && (text[0] == '{' || text[0] == '[')) return ContentKind::kJson;
  if (!text.empty() && text[0] == '<') return ContentKind::kHtml;
  return ContentKind::kText;
}

std::string ContentHeadline(ContentKind kind) {
  switch (kind) {
    case ContentKind::kUnknown: return "";
    case ContentKind::kJson: return "not a safetensors file, it looks like JSON";
    case ContentKind::kHtml:
      return "not a safetensors file, it looks like HTML or XML (a web page saved in its place?)";
    case ContentKind::kGitLfsPointer:
      return "not a safetensors file, it looks like a Git LFS pointer (run `git lfs pull` to fetch the file itself)";
    case ContentKind::kText: return "not a safetensors file, it looks like text";
    case ContentKind::kZip:
      return "not a safetensors file, it looks like a zip archive (PyTorch's .bin/.pt checkpoints are zip files; "
             "convert them to safetensors first)";
    case ContentKind::kGzip: return "not a safetensors file, it looks like gzip-compressed data (decompress it first)";
    case ContentKind::kPickle:
      return "not a safetensors file, it looks like a Python pickle (an old PyTorch checkpoint; convert it to "
             "safetensors first)";
    case ContentKind::kGguf: return "not a safetensors file, it looks like a GGUF file (llama.cpp's format)";
  }
  return "";
}

}  // namespace pb
