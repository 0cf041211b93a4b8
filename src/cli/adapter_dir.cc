#include "cli/adapter_dir.h"

#include <dirent.h>

#include <algorithm>

#include "app/adapter_files.h"
#include "cli/file_io.h"
#include "cli/http_source.h"

namespace pb::cli {

std::string WeightsNameOf(const AdapterDir& dir) {
  if (!dir.weights_name.empty()) return dir.weights_name;
  const size_t slash = dir.weights_path.rfind('/');
  return dir.weights_path.substr(slash == std::string::npos ? 0 : slash + 1);
}

std::string Join(const std::string& dir, const std::string& name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

Result<std::string> ReadText(const std::string& path) {
  PB_ASSIGN_OR_RETURN(auto bytes, ReadWholeFile(path));
  return std::string(bytes.begin(), bytes.end());
}

Result<AdapterDir> LoadAdapterDir(const std::string& path, const std::optional<std::string>& base_config_path) {
  PB_ASSIGN_OR_RETURN(auto dir, OpenAdapterDir(path, base_config_path));
  PB_RETURN_IF_ERROR(ReadAdapterHeader(dir));
  return dir;
}

// An adapter directory (or a .safetensors file with its directory's adapter_config.json).
Result<AdapterDir> OpenAdapterDir(const std::string& path, const std::optional<std::string>& base_config_path) {
  if (IsRemoteAddress(path)) return OpenRemoteAdapter(path, base_config_path);
  AdapterDir dir;
  std::string folder = path;
  if (IsDirectory(path)) {
    // Which file is which is the core's rule (app/adapter_files.h), shared with the npm CLI and the JS API.
    PB_ASSIGN_OR_RETURN(auto chosen, app::ChooseAdapterFiles(path, RegularFiles(path)));
    dir.weights_path = Join(path, chosen.weights);
  } else {
    PB_RETURN_IF_ERROR(app::CheckAdapterWeightsPath(path));
    dir.weights_path = path;
    size_t slash = path.rfind('/');
    folder = slash == std::string::npos ? "." : path.substr(0, slash);
  }
  PB_ASSIGN_OR_RETURN(auto weights, InputFile::Open(dir.weights_path));
  dir.weights.emplace(std::move(weights));
  if (std::string config = Join(folder, std::string(app::kAdapterConfigName)); IsRegularFile(config)) {
    PB_ASSIGN_OR_RETURN(auto text, ReadText(config));
    dir.config = std::move(text);
  }
  if (base_config_path) {
    PB_ASSIGN_OR_RETURN(auto text, ReadText(*base_config_path));
    dir.base_config = std::move(text);
  }
  return dir;
}

Status ReadWeightsAt(const AdapterDir& dir, uint64_t offset, std::span<uint8_t> out) {
  if (dir.weights) return dir.weights->ReadAt(offset, out);
  if (offset > dir.weights_bytes.size() || out.size() > dir.weights_bytes.size() - offset)
    return MakeError(ErrorCode::IoError,
                     "`" + dir.weights_path + "` ended before byte " + std::to_string(offset + out.size()));
  std::copy_n(dir.weights_bytes.begin() + static_cast<std::ptrdiff_t>(offset), out.size(), out.begin());
  return Status::Ok();
}

namespace {

// A .gguf adapter's header: the file's first bytes, and more while the parse asks for more.
Result<gguf::GgufFile> ReadGgufHeader(const AdapterDir& dir, uint64_t size) {
  std::vector<uint8_t> bytes;
  for (uint64_t want = std::min(size, gguf::kFirstReadBytes);;) {
    bytes.resize(static_cast<size_t>(want));
    PB_RETURN_IF_ERROR(ReadWeightsAt(dir, 0, bytes));
    PB_ASSIGN_OR_RETURN(auto parse, gguf::ParseGgufHeader(bytes, size));
    if (parse.file) return std::move(*parse.file);
    want = parse.need;  // more than we have, at most the file's size
  }
}

}  // namespace

Status ReadAdapterHeader(AdapterDir& dir) {
  const uint64_t size = dir.weights ? dir.weights->size() : dir.weights_bytes.size();
  uint8_t magic[4] = {};
  if (size >= 4) PB_RETURN_IF_ERROR(ReadWeightsAt(dir, 0, magic));
  if (gguf::LooksLikeGguf(magic)) {
    auto file = ReadGgufHeader(dir, size);
    if (!file.ok()) {
      Error e = file.error();
      e.message = WeightsNameOf(dir) + ": " + e.message;
      return e;
    }
    dir.gguf = std::move(file.value());
    return Status::Ok();
  }
  // The header last, as the core reported it when it was given the whole file after the configs.
  auto header = [&]() -> Result<Header> {
    if (dir.weights) return dir.weights->ReadHeader();
    const std::vector<uint8_t>& bytes = dir.weights_bytes;
    PB_ASSIGN_OR_RETURN(
        auto n,
        ReadHeaderLength(std::span<const uint8_t>(bytes.data(), std::min<size_t>(bytes.size(), 8)), bytes.size()));
    return ParseHeader(std::string(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n)),
                       bytes.size());
  }();
  if (!header.ok()) {
    Error e = header.error();
    e.message = WeightsNameOf(dir) + ": " + e.message;
    return e;
  }
  dir.header = std::move(header.value());
  for (const adapter::ByteRange& r : adapter::InlineTensorRanges(dir.header)) {
    const size_t at = dir.inline_bytes.size();
    dir.inline_bytes.resize(at + r.size());
    PB_RETURN_IF_ERROR(ReadWeightsAt(dir, r.begin, std::span<uint8_t>(dir.inline_bytes.data() + at, r.size())));
  }
  return Status::Ok();
}

adapter::AdapterSource SourceOf(const AdapterDir& dir) {
  return {WeightsNameOf(dir),
          {},
          dir.config,
          dir.base_config,
          &dir.header,
          dir.inline_bytes,
          dir.gguf ? &*dir.gguf : nullptr};
}

Status SupplyAdapterBytes(adapter::AdapterBytesConsumer& consumer, const AdapterDir& dir,
                          const std::function<void(uint64_t)>& on_read) {
  // The bounce buffer's size: it is held next to the consumer's copy of the bytes (e.g. a module's whole A), and
  // pread or a copy from memory costs the same in any piece size, so 1 MiB rather than 4 (docs/benchmarks.md,
  // "Native merge with a 1 GB adapter").
  constexpr uint64_t kPiece = 1 << 20;
  std::vector<uint8_t> buffer;
  uint64_t supplied = 0;
  for (;;) {
    // Copied: the list changes once its last byte is supplied.
    const std::vector<adapter::ByteRange> needs(consumer.adapter_needs().begin(), consumer.adapter_needs().end());
    if (needs.empty()) return Status::Ok();
    for (const adapter::ByteRange& r : needs) {
      for (uint64_t pos = r.begin; pos < r.end;) {
        const size_t n = static_cast<size_t>(std::min(kPiece, r.end - pos));
        buffer.resize(n);
        PB_RETURN_IF_ERROR(ReadWeightsAt(dir, pos, buffer));
        PB_RETURN_IF_ERROR(consumer.SupplyAdapter(buffer));
        pos += n;
        supplied += n;
        if (on_read) on_read(supplied);
      }
    }
  }
}

}  // namespace pb::cli
