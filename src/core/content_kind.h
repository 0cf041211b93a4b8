// What a file that fails the safetensors length prefix looks like instead, from its first bytes: so that a JSON
// file, a saved HTML page or a PyTorch checkpoint is reported as what it is, not as "header length
// 8387236825053623156 exceeds the limit". Only strong signs count (magic numbers, bytes that are all text); a
// prefix that could be a safetensors length stays unclassified.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace pb {

enum class ContentKind {
  kUnknown,        // nothing recognised (or possibly safetensors)
  kJson,           // text starting with '{' or '['
  kHtml,           // text starting with '<' (HTML, XML: often an error page saved in place of the file)
  kGitLfsPointer,  // "version https://git-lfs...": the pointer file, not its content
  kText,           // other text (ASCII or UTF-8)
  kZip,            // "PK\3\4": PyTorch .bin/.pt since 1.6 (torch.save), .npz, any zip
  kGzip,           // 1f 8b
  kPickle,         // 80 02..05: a pickle (PyTorch checkpoints before 1.6)
  kGguf,           // "GGUF": llama.cpp's format
};

// Classifies the start of a file (any length; the length prefix's 8 bytes are enough for every kind).
ContentKind ClassifyContent(std::span<const uint8_t> head);

// "not a safetensors file, it looks like JSON" and the like; empty for kUnknown.
std::string ContentHeadline(ContentKind kind);

}  // namespace pb
