// Where an adapter tensor's bytes are when the core does not hold them: a range of the adapter's weights file,
// plus the rearrangements format translation applies once they are fetched. Readers work from the header
// alone (names, dtypes, shapes, offsets) and record transposes, row reorders and folded scales here instead of
// applying them; the bytes are fetched by range when a consumer needs them (tensor_fetch.h) and rearranged
// then, so nothing holds a whole adapter, however large its file.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "gguf/gguf_format.h"

namespace pb::adapter {

// [begin, end) in the adapter's weights file, absolute offsets.
struct ByteRange {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t size() const { return end - begin; }
  bool operator==(const ByteRange&) const = default;
};

// One step of tensor_ops.h applied to a tensor whose bytes are still in the file.
struct Rearrangement {
  enum class Kind { kTranspose2D, kPermuteRows, kScale };
  Kind kind = Kind::kTranspose2D;
  std::vector<uint64_t> shape;                         // the tensor's shape before this step
  std::shared_ptr<const std::vector<uint64_t>> order;  // kPermuteRows: row i of the result is row order[i]
  double scale = 1;                                    // kScale
};

struct TensorRef {
  ByteRange range;                     // the stored tensor's bytes
  std::vector<uint64_t> stored_shape;  // its shape in the file
  std::vector<Rearrangement> steps;    // applied in order after fetching; then the shape is the Tensor's
  // Set when the stored bytes are a ggml type (a .gguf adapter's tensor) other than the Tensor's dtype: they are
  // decoded to F32 (exactly: Q8_0 is q · fp16(d), F16/BF16 widen) before the steps; the Tensor's dtype is F32.
  std::optional<gguf::TensorType> stored_gguf_type;
};

}  // namespace pb::adapter
