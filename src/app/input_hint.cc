#include "app/input_hint.h"

#include <string_view>

#include "app/push_target.h"

namespace pb::app {
namespace {

std::string_view BaseName(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string Folder(std::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  return slash == 0 ? "/" : std::string(path.substr(0, slash));
}

// The file opened but is not safetensors: the length prefix or the header JSON failed.
bool IsFormatError(ErrorCode code) {
  return code == ErrorCode::HeaderTooSmall || code == ErrorCode::HeaderTooLarge ||
         code == ErrorCode::InvalidHeaderLength || code == ErrorCode::InvalidHeader ||
         code == ErrorCode::InvalidHeaderDeserialization;
}

// The files that travel beside weights and are easily passed instead of them (or of their folder).
struct CompanionFile {
  std::string_view name;
  std::string_view what;     // "an adapter's config"
  std::string_view weights;  // the file beside it that a one-file command takes
  bool folder_is_adapter;    // its folder is an adapter (else a base model)
};
constexpr CompanionFile kCompanions[] = {
    {"adapter_config.json", "an adapter's config", "adapter_model.safetensors", true},
    {"config.json", "a model's config", "model.safetensors", false},
    {"model.safetensors.index.json", "a sharded model's index", "one of the shards it lists", false},
};

// A missing `dir/x.safetensors` is a file the user meant, not a repo id.
bool NamesAFile(std::string_view path) {
  for (std::string_view ext : {".safetensors", ".json", ".gguf", ".bin", ".pt", ".pth"})
    if (path.ends_with(ext)) return true;
  return false;
}

}  // namespace

Error ExplainInputError(Error error, const InputProbe& probe, InputRole role) {
  const std::string quoted = "`" + probe.path + "`";
  // `owner/repo` as huggingface_hub and transformers take it: here a local path, so the Hub needs hf://.
  if (!probe.exists && error.code == ErrorCode::IoError && !RepoIdProblem(probe.path) && !NamesAFile(probe.path)) {
    error.message += " (did you mean `hf://" + probe.path + "`?)";
    return error;
  }
  if (probe.directory) {
    // Only a one-file command refuses a directory; the others take folders (their own errors say what is missing).
    if (role == InputRole::kTensorFile && error.code == ErrorCode::IoError)
      error.message = quoted + " is a directory, not a safetensors file; pass a .safetensors file inside it";
    return error;
  }
  if (!IsFormatError(error.code)) return error;
  for (const CompanionFile& c : kCompanions) {
    if (BaseName(probe.path) != c.name) continue;
    const bool takes_folder = (role == InputRole::kAdapter && c.folder_is_adapter) ||
                              (role == InputRole::kBase && !c.folder_is_adapter);
    std::string hint;
    if (takes_folder) hint = "pass its folder `" + Folder(probe.path) + "`";
    else if (role == InputRole::kTensorFile) hint = "pass " + std::string(c.weights) + " beside it";
    else if (role == InputRole::kAdapter) hint = "pass an adapter's folder or its weights file";
    else hint = "pass the base model's folder or its .safetensors file";
    // A caller's mistake, not a damaged file: the format check's detail would only mislead.
    return MakeError(ErrorCode::InvalidArgument,
                     quoted + " is " + std::string(c.what) + ", not safetensors weights: " + hint);
  }
  return error;
}

}  // namespace pb::app
