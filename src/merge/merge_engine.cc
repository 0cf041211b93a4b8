#include "merge/merge_engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>

#include "kernels/convert.h"
#include "kernels/lowrank.h"
#include "merge/quantize_stream.h"

namespace pb::merge {

namespace {

constexpr size_t kBlockBytes = 1 << 20;  // target size of one row block of source bytes

size_t Width(Dtype d) { return DtypeBits(d) / 8; }

std::vector<float> ToF32(const adapter::Tensor& t) {
  std::vector<float> out(t.element_count());
  kernels::ConvertElements(t.dtype, Dtype::F32, t.bytes.data(), out.data(), out.size());
  return out;
}


Error NonFinite(const PlannedTensor& p) {
  std::string module = p.module ? "module `" + p.module->path + "`" : "`" + p.name + "`";
  return MakeError(ErrorCode::InvalidArgument, "--safe: merging " + module + " produced NaN or Inf in `" + p.name + "`",
                   p.name);
}

// The adapter tensors a planned tensor uses, in the order they are requested (a module's A, B and magnitude
// are usually adjacent in the file, so they come in one read).
enum AdapterSlot { kSlotA, kSlotB, kSlotMagnitude, kSlotBias, kSlotReplacement, kSlotCount };

// Whether the tensor's left factor is fetched a block of rows at a time (MergeOptions::factor_block_bytes): B
// [out, r] of a weight stored [out, in] merged row by row, stored as it is used (no rearrangement, so a block of
// its rows is one contiguous range of the file) and larger than the bound.
bool LeftInBlocks(const PlannedTensor& p, const MergeOptions& o) {
  if (!p.module || p.replacement || o.factor_block_bytes == 0 || p.orientation != Orientation::kOutIn) return false;
  if (p.op != TensorOp::kLowRank && p.op != TensorOp::kLowRankEmbedding && p.op != TensorOp::kDoraRows) return false;
  const adapter::Tensor& b = p.module->b;
  if (b.held() || !b.ref->steps.empty() || b.ref->stored_gguf_type) return false;
  if (p.rows == 0 || b.element_count() != p.rows * p.module->rank() || b.ref->range.size() != b.byte_length())
    return false;
  return b.byte_length() > o.factor_block_bytes;
}

std::vector<const adapter::Tensor*> AdapterTensorsOf(const PlannedTensor& p, const MergeOptions& o) {
  std::vector<const adapter::Tensor*> t(kSlotCount, nullptr);
  if (p.module && p.op != TensorOp::kAddBias) {
    t[kSlotA] = &p.module->a;
    if (!LeftInBlocks(p, o)) t[kSlotB] = &p.module->b;  // else fetched by TensorState, a block at a time
    if (p.op == TensorOp::kDoraRows || p.op == TensorOp::kDoraColumns) t[kSlotMagnitude] = &*p.module->magnitude;
  }
  if (p.op == TensorOp::kAddBias) t[kSlotBias] = &*p.module->b_bias;
  if (p.replacement) t[kSlotReplacement] = &p.replacement->tensor;
  return t;
}

// A tensor the merge passes through byte for byte: an edge may forward its bytes itself (SourceRuns).
bool Forwardable(const PlannedTensor& p, const MergeOptions& o) {
  return p.source && p.op == TensorOp::kCopy && !(p.quantized && o.quantize);
}

}  // namespace

// Everything about the tensor being processed: its factors, a partial row carried between pushes, and the
// output staging buffer.
class ShardMerger::TensorState {
 public:
  TensorState(const PlannedTensor& p, adapter::TensorFetch& adapter, const MergeOptions& o, StreamingWriter& w)
      : p_(p), adapter_(adapter), options_(o), writer_(w) {
    in_width_ = Width(p.in_dtype);
    out_width_ = Width(p.out_dtype);
    split_ = LeftInBlocks(p, o);
    if (p.module && p.op != TensorOp::kAddBias) PrepareFactors();
    if (p.op == TensorOp::kDoraRows || p.op == TensorOp::kDoraColumns) {
      magnitude_ = ToF32(*adapter_.get(kSlotMagnitude));
      adapter_.ReleaseOne(kSlotMagnitude);
    }
    if (p.op == TensorOp::kDoraColumns) whole_.resize(p.rows * p.cols);
    if (p.op == TensorOp::kReplaceRows) PrepareRows();
    if (p.quantized && o.quantize) quant_ = std::make_unique<QuantizedTensorWriter>(p, *o.quantize, w);
  }

  // --quantize: the quantized weight's error, once it is written.
  const QuantizedTensorWriter* quantized() const { return quant_.get(); }

  // Takes the tensor's next source bytes: all of them (`used`), unless its left factor is fetched in blocks
  // (split_) and the next whole row's block is not in yet: then it stops before that row, having asked the fetch
  // for the block (the caller supplies it and pushes the rest again; an empty push then merges a carried row).
  Status Push(std::span<const uint8_t> bytes, size_t& used) {
    used = bytes.size();
    if (p_.replacement && p_.module) return Status::Ok();  // merging into the adapter's saved copy instead
    switch (p_.op) {
      case TensorOp::kCopy: return quant_ ? PushRows(bytes, used) : writer_.Write(bytes);
      case TensorOp::kReplace: return Status::Ok();  // the base's bytes are dropped
      case TensorOp::kAddBias: held_.insert(held_.end(), bytes.begin(), bytes.end()); return Status::Ok();
      default: return PushRows(bytes, used);
    }
  }

  // A whole row is carried, waiting for its block of the left factor.
  bool stalled() const { return split_ && !carry_.empty() && carry_.size() == p_.cols * in_width_; }

  Status Finish() {
    if (!carry_.empty() && p_.op != TensorOp::kAddBias)
      return MakeError(ErrorCode::InvalidArgument, "tensor `" + p_.name + "` ended inside an element", p_.name);
    if (p_.replacement && p_.module) {
      // PEFT loads the saved weight into the base layer (rounding to its dtype), then merges into it.
      const adapter::Tensor& saved = *adapter_.get(kSlotReplacement);
      std::vector<uint8_t> as_base(saved.element_count() * in_width_);
      if (!kernels::ConvertElements(saved.dtype, p_.in_dtype, saved.bytes.data(), as_base.data(),
                                    saved.element_count()))
        return MakeError(ErrorCode::UnsupportedDtype, "cannot convert `" + p_.replacement->key + "`", p_.name);
      size_t used = 0;
      PB_RETURN_IF_ERROR(PushRows(as_base, used));  // never split (LeftInBlocks): all of it
    }
    Status s = Status::Ok();
    switch (p_.op) {
      case TensorOp::kReplace:
      case TensorOp::kAdd: s = WriteConverted(*adapter_.get(kSlotReplacement)); break;
      case TensorOp::kAddBias: s = AddBias(); break;
      case TensorOp::kDoraColumns: s = FinishDoraColumns(); break;
      default: break;
    }
    if (s.ok() && quant_) s = quant_->Finish();
    return s;
  }

 private:
  void PrepareFactors() {
    const adapter::LoraModule& m = *p_.module;
    factors_.rank = m.rank();
    factors_.scale = static_cast<float>(m.settings.scaling);
    factors_.sign = options_.unmerge ? -1.0f : 1.0f;
    const size_t r = m.rank();
    left_end_ = p_.rows;
    if (p_.orientation == Orientation::kOutIn && p_.op != TensorOp::kLowRankExperts) {
      // Used as they are: no copy of an fp32 factor (PEFT's default), else an fp32 copy and the fetched bytes freed.
      factors_.right = F32Of(kSlotA, right_);  // A [r, in * kernel]
      if (split_) {
        // B [out, r] (conv: [out, r, 1...]) a block of rows at a time, as the rows arrive (HeldRows).
        const uint64_t row_bytes = r * Width(p_.module->b.dtype);
        block_rows_ = std::max<uint64_t>(1, options_.factor_block_bytes / std::max<uint64_t>(1, row_bytes));
        left_end_ = 0;
      } else {
        left_base_ = F32Of(kSlotB, left_);
      }
      return;
    }
    // Each factor's fetched bytes go as soon as it is widened, so the fp32 copies do not add to them.
    std::vector<float> a = ToF32(*adapter_.get(kSlotA));
    adapter_.ReleaseOne(kSlotA);
    std::vector<float> b = ToF32(*adapter_.get(kSlotB));
    adapter_.ReleaseOne(kSlotB);
    if (p_.op == TensorOp::kLowRankExperts) {
      PrepareExpertFactors(a, b, r);
    } else {
      left_ = kernels::Transposed(a, r, a.size() / r);   // A^T [in, r]
      right_ = kernels::Transposed(b, b.size() / r, r);  // B^T [r, out]
    }
    left_base_ = left_.data();
    factors_.right = right_.data();
  }

  // The slot's tensor as fp32: its own bytes when it is F32 (held by the fetch until the tensor is done), else
  // widened into `copy` and the fetched bytes released.
  const float* F32Of(size_t slot, std::vector<float>& copy) {
    const adapter::Tensor& t = *adapter_.get(slot);
    if (t.dtype == Dtype::F32 && reinterpret_cast<uintptr_t>(t.bytes.data()) % alignof(float) == 0)
      return reinterpret_cast<const float*>(t.bytes.data());
    copy = ToF32(t);
    adapter_.ReleaseOne(slot);
    return copy.data();
  }

  // split_: how many rows from next_row_ on have their left factor rows held. At the end of a block, the next
  // one: taken if it has arrived, else asked for (0 returned; the caller waits for the fetch to be ready).
  // Only one block is held at a time: the previous one is released before the next is asked for.
  uint64_t HeldRows() {
    if (!split_) return UINT64_MAX;
    if (next_row_ < left_end_) return left_end_ - next_row_;
    if (!block_slot_) {
      if (held_block_) adapter_.ReleaseOne(*held_block_);
      held_block_.reset();
      left_ = {};
      left_base_ = nullptr;
      const adapter::Tensor& b = p_.module->b;
      const uint64_t r = p_.module->rank(), row_bytes = r * Width(b.dtype);
      const uint64_t first = next_row_, end = std::min<uint64_t>(p_.rows, first + block_rows_);
      adapter::Tensor& block = blocks_.emplace_back();
      block.dtype = b.dtype;
      block.shape = {end - first, r};
      block.ref = adapter::TensorRef{
          {b.ref->range.begin + first * row_bytes, b.ref->range.begin + end * row_bytes}, block.shape, {}};
      block_slot_ = adapter_.Add(&block);
      block_first_ = first;
    }
    if (!adapter_.ready()) return 0;
    left_base_ = F32Of(*block_slot_, left_);
    if (left_base_ != left_.data()) held_block_ = block_slot_;  // its bytes are the factor itself
    left_first_ = block_first_;
    left_end_ = block_first_ + blocks_.back().shape[0];
    block_slot_.reset();
    return left_end_ - next_row_;
  }

  // PEFT's ParamWrapper layout (adapter/param_wrapper.h): expert e's factors are A's rows e·r + k and B's
  // columns k·E + e. left_ holds this tensor's rows of the per-expert left factors ([rows, r]: its row i is row
  // first_row + i of the parameter viewed as [E·expert_rows, cols]), right_ every expert's [r, cols] right factor
  // (expert e's from row e·r).
  void PrepareExpertFactors(std::vector<float>& a, const std::vector<float>& b, size_t r) {
    const size_t experts = p_.experts, per_expert = p_.expert_rows, cols = p_.cols;
    const size_t b_cols = r * experts, a_cols = a.size() / b_cols;  // A [r·E, in], B [out, r·E]
    left_.resize(p_.rows * r);
    for (size_t i = 0; i < p_.rows; ++i) {
      const size_t g = p_.first_row + i, e = g / per_expert, row = g % per_expert;
      for (size_t k = 0; k < r; ++k)
        left_[i * r + k] = p_.orientation == Orientation::kOutIn ? b[row * b_cols + k * experts + e]  // B_e [out, r]
                                                                 : a[(e * r + k) * a_cols + row];     // A_eᵀ [in, r]
    }
    if (p_.orientation == Orientation::kOutIn) {
      right_ = std::move(a);  // A_e [r, in] are A's rows e·r.. already
    } else {
      right_.resize(experts * r * cols);  // B_eᵀ [r, out]
      for (size_t e = 0; e < experts; ++e)
        for (size_t k = 0; k < r; ++k)
          for (size_t j = 0; j < cols; ++j) right_[(e * r + k) * cols + j] = b[j * b_cols + k * experts + e];
    }
  }

  // Rows [row0, row0 + n) of this tensor, in runs that stay inside one expert (each has its own right factor):
  // PEFT rounds each expert's scaled delta to the parameter's dtype, then adds it.
  bool MergeExpertRows(const uint8_t* in, uint64_t row0, size_t n) {
    const size_t per_expert = p_.expert_rows, cols = p_.cols;
    for (size_t done = 0; done < n;) {
      const uint64_t g = p_.first_row + row0 + done, e = g / per_expert;
      const size_t run = static_cast<size_t>(std::min<uint64_t>(n - done, (e + 1) * per_expert - g));
      kernels::LowRankFactors f = FactorsFrom(row0 + done);
      f.right = right_.data() + e * f.rank * cols;
      if (!kernels::MergeRowsRoundDeltaFirst(p_.in_dtype, in + done * cols * in_width_, p_.out_dtype,
                                             out_.data() + done * cols * out_width_, run, cols, f))
        return false;
      done += run;
    }
    return true;
  }

  // Trainable tokens: the adapter's rows rounded to the weight's dtype first, as PEFT's `rows.to(W)` does
  // before index_copy, then (like every other row) converted to the output dtype.
  void PrepareRows() {
    const adapter::Tensor& rows = *adapter_.get(kSlotReplacement);
    replaced_rows_.resize(rows.element_count() * in_width_);
    rows_ok_ = kernels::ConvertElements(rows.dtype, p_.in_dtype, rows.bytes.data(), replaced_rows_.data(),
                                        rows.element_count());
    adapter_.ReleaseOne(kSlotReplacement);
    const auto& indices = p_.replacement->token_indices;
    for (size_t i = 0; i < indices.size(); ++i) row_of_token_[indices[i]] = i;
  }

  kernels::LowRankFactors FactorsFrom(uint64_t row) const {
    kernels::LowRankFactors f = factors_;
    f.left = left_base_ + (row - left_first_) * f.rank;
    return f;
  }

  // Collects whole rows (or, for plain conversions, whole elements) and processes them block by block,
  // straight from the caller's span when no partial row is pending.
  // Stops early (`used` < bytes.size()) only at a row whose block of the left factor is not in (split_).
  Status PushRows(std::span<const uint8_t> bytes, size_t& used) {
    used = 0;
    const bool elements = (p_.op == TensorOp::kConvert || p_.op == TensorOp::kCopy) && !quant_;
    const size_t unit = elements ? in_width_ : p_.cols * in_width_;
    if (unit == 0) {
      used = bytes.size();
      return Status::Ok();
    }
    if (!carry_.empty()) {
      size_t take = std::min(bytes.size(), unit - carry_.size());
      carry_.insert(carry_.end(), bytes.begin(), bytes.begin() + take);
      bytes = bytes.subspan(take);
      used += take;
      if (carry_.size() < unit) return Status::Ok();
      if (HeldRows() == 0) return Status::Ok();  // the whole row stays carried
      std::vector<uint8_t> one = std::move(carry_);
      carry_.clear();
      PB_RETURN_IF_ERROR(ProcessUnits(one, 1));
    }
    const size_t per_block = std::max<size_t>(1, kBlockBytes / unit);
    while (bytes.size() >= unit) {
      const uint64_t held = HeldRows();
      if (held == 0) return Status::Ok();
      size_t n = static_cast<size_t>(std::min<uint64_t>(std::min(bytes.size() / unit, per_block), held));
      PB_RETURN_IF_ERROR(ProcessUnits(bytes.first(n * unit), n));
      bytes = bytes.subspan(n * unit);
      used += n * unit;
    }
    carry_.assign(bytes.begin(), bytes.end());
    used += bytes.size();
    return Status::Ok();
  }

  // `n` whole units (elements for kConvert, rows otherwise, and rows of a weight written quantized) starting at the
  // tensor's next unit.
  Status ProcessUnits(std::span<const uint8_t> in, size_t n) {
    if (p_.op == TensorOp::kConvert && !quant_) {
      out_.resize(n * out_width_);
      kernels::ConvertElements(p_.in_dtype, p_.out_dtype, in.data(), out_.data(), n);
      return writer_.Write(out_);
    }
    if (p_.op == TensorOp::kConvert || p_.op == TensorOp::kCopy) {  // rows of a weight written quantized
      next_row_ += n;
      out_.resize(n * p_.cols * out_width_);
      if (!kernels::ConvertElements(p_.in_dtype, p_.out_dtype, in.data(), out_.data(), n * p_.cols))
        return KernelFailed();
      return Emit(n);
    }
    const uint64_t row0 = next_row_;
    next_row_ += n;
    const size_t cols = p_.cols;
    switch (p_.op) {
      case TensorOp::kLowRank:
      case TensorOp::kLowRankEmbedding: {
        std::span<uint8_t> out = OutRows(n);
        auto f = FactorsFrom(row0);
        // PEFT rounds the delta to the weight's dtype first for embeddings, and for every unmerge
        // (`W -= delta.to(W.dtype)`); a merge of Linear/Conv adds the fp32 delta and rounds once.
        const bool round_delta_first = p_.op == TensorOp::kLowRankEmbedding || options_.unmerge;
        bool ok = !round_delta_first
                      ? kernels::MergeRows(p_.in_dtype, in.data(), p_.out_dtype, out.data(), n, cols, f)
                      : kernels::MergeRowsRoundDeltaFirst(p_.in_dtype, in.data(), p_.out_dtype, out.data(), n, cols, f);
        if (!ok) return KernelFailed();
        if (options_.safe && !OutputFinite(n * cols, out.data())) return NonFinite(p_);
        return EmitRows(n, out);
      }
      case TensorOp::kLowRankExperts: {
        out_.resize(n * cols * out_width_);
        if (!MergeExpertRows(in.data(), row0, n)) return KernelFailed();
        if (options_.safe && !OutputFinite(n * cols, out_.data())) return NonFinite(p_);
        return Emit(n);
      }
      case TensorOp::kDoraRows: {
        // In float64 (kernels::DoraRowsF64): DoRA's norm and factor make a float32 evaluation less accurate than a
        // plain merge's, and ours must be at least as accurate as PEFT's.
        std::span<uint8_t> out = OutRows(n);
        if (!kernels::DoraRowsF64(p_.in_dtype, in.data(), p_.out_dtype, out.data(), n, cols, FactorsFrom(row0),
                                  magnitude_.data() + row0))
          return KernelFailed();
        if (options_.safe && !OutputFinite(n * cols, out.data())) return NonFinite(p_);
        return EmitRows(n, out);
      }
      case TensorOp::kReplaceRows: {
        if (!rows_ok_) return KernelFailed();
        std::span<uint8_t> out = OutRows(n);
        for (size_t i = 0; i < n; ++i) {
          auto it = row_of_token_.find(row0 + i);
          const uint8_t* src = it == row_of_token_.end() ? in.data() + i * cols * in_width_
                                                         : replaced_rows_.data() + it->second * cols * in_width_;
          if (!kernels::ConvertElements(p_.in_dtype, p_.out_dtype, src, out.data() + i * cols * out_width_, cols))
            return KernelFailed();
        }
        if (options_.safe && !OutputFinite(n * cols, out.data())) return NonFinite(p_);
        return EmitRows(n, out);
      }
      case TensorOp::kDoraColumns:
        if (!kernels::MergeRowsF32(p_.in_dtype, in.data(), whole_.data() + row0 * cols, n, cols, FactorsFrom(row0)))
          return KernelFailed();
        return Status::Ok();
      default: return MakeError(ErrorCode::InvalidArgument, "internal: unexpected row operation");
    }
  }

  // A kernel that returned false: a dtype it cannot merge (the planner refuses those first), else no memory for
  // its staging buffer.
  Error KernelFailed() const {
    if (!IsConvertibleFloat(p_.in_dtype) || !IsConvertibleFloat(p_.out_dtype))
      return MakeError(ErrorCode::UnsupportedDtype, "cannot merge `" + p_.name + "`", p_.name);
    return MakeError(ErrorCode::OutOfMemory, "cannot merge `" + p_.name + "`: no memory for a working buffer", p_.name);
  }

  // DoRA whose norms run down the columns (Conv1D's output features, an embedding's dimensions).
  Status FinishDoraColumns() {
    const size_t rows = p_.rows, cols = p_.cols;
    std::vector<double> sums(cols, 0.0);
    for (size_t i = 0; i < rows; ++i)
      for (size_t j = 0; j < cols; ++j) sums[j] += static_cast<double>(whole_[i * cols + j]) * whole_[i * cols + j];
    std::vector<float> factor(cols);
    for (size_t j = 0; j < cols; ++j) factor[j] = magnitude_[j] / static_cast<float>(std::sqrt(sums[j]));
    out_.resize(rows * cols * out_width_);
    if (!kernels::ScaleRowsTo(whole_.data(), rows, cols, factor.data(), /*per_column=*/true, p_.out_dtype, out_.data()))
      return KernelFailed();
    if (options_.safe && !OutputFinite(rows * cols, out_.data())) return NonFinite(p_);
    return Emit(rows);
  }

  // --safe checks what is written, as PEFT's safe_merge checks the final weight: the output block widened
  // back to fp32 (exact), so an overflow in the final rounding (e.g. into F16) is caught too.
  bool OutputFinite(size_t n, const uint8_t* out) {
    check_.resize(n);
    kernels::ConvertElements(p_.out_dtype, Dtype::F32, out, check_.data(), n);
    return kernels::AllFinite(check_.data(), n);
  }

  Status AddBias() {
    const adapter::LoraModule& m = *p_.module;
    std::vector<float> b(p_.cols), lb = ToF32(*adapter_.get(kSlotBias));
    kernels::ConvertElements(p_.in_dtype, Dtype::F32, held_.data(), b.data(), b.size());
    const float s = static_cast<float>(m.settings.scaling);
    const float sign = options_.unmerge ? -1.0f : 1.0f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = b[i] + sign * (lb[i] * s);
    out_.resize(b.size() * out_width_);
    kernels::ConvertElements(Dtype::F32, p_.out_dtype, b.data(), out_.data(), b.size());
    if (options_.safe && !OutputFinite(b.size(), out_.data())) return NonFinite(p_);
    return writer_.Write(out_);
  }

  Status WriteConverted(const adapter::Tensor& t) {
    if (t.dtype == p_.out_dtype && !quant_) return writer_.Write(t.bytes);
    out_.resize(t.element_count() * out_width_);
    if (!kernels::ConvertElements(t.dtype, p_.out_dtype, t.bytes.data(), out_.data(), t.element_count()))
      return MakeError(ErrorCode::UnsupportedDtype, "cannot convert `" + p_.name + "`", p_.name);
    return quant_ ? quant_->Rows(out_.data(), p_.rows) : writer_.Write(out_);
  }

  // `n` finished rows in out_: written, or quantized (--quantize) and written.
  Status Emit(size_t n) { return quant_ ? quant_->Rows(out_.data(), n) : writer_.Write(out_); }

  // Where the next `n` rows of output go: straight into the sink's own buffer when it lends one (the WASM chunk
  // table: no copy of every merged byte out of out_), else out_. EmitRows then commits or writes them.
  std::span<uint8_t> OutRows(size_t n) {
    const size_t bytes = n * p_.cols * out_width_;
    std::span<uint8_t> lent = quant_ || bytes == 0 ? std::span<uint8_t>() : writer_.Lend(bytes);
    if (lent.size() >= bytes && bytes > 0) return lent.first(bytes);
    out_.resize(bytes);
    return out_;
  }
  Status EmitRows(size_t n, std::span<uint8_t> out) {
    return out.data() == out_.data() ? Emit(n) : writer_.Commit(out.size());
  }

  const PlannedTensor& p_;
  adapter::TensorFetch& adapter_;
  const MergeOptions& options_;
  StreamingWriter& writer_;
  size_t in_width_ = 0, out_width_ = 0;
  std::vector<float> left_, right_, magnitude_, whole_, check_;
  kernels::LowRankFactors factors_{};
  // The left factor's rows [left_first_, left_end_) are held, from left_base_ (left_'s data, or the fetched bytes).
  const float* left_base_ = nullptr;
  uint64_t left_first_ = 0, left_end_ = 0;
  // split_ (LeftInBlocks): B fetched block_rows_ rows at a time; blocks_ are the requested ranges (the fetch keeps
  // pointers to them), block_slot_ the fetch slot of the block asked for, held_block_ that of the block in use
  // when its fetched bytes are the factor itself.
  bool split_ = false;
  uint64_t block_rows_ = 0, block_first_ = 0;
  std::deque<adapter::Tensor> blocks_;
  std::optional<size_t> block_slot_, held_block_;
  std::vector<uint8_t> carry_, out_, held_;
  uint64_t next_row_ = 0;
  std::vector<uint8_t> replaced_rows_;       // kReplaceRows: the adapter's rows in the weight's dtype
  std::map<uint64_t, size_t> row_of_token_;  // kReplaceRows: weight row -> row of replaced_rows_
  bool rows_ok_ = true;
  std::unique_ptr<QuantizedTensorWriter> quant_;  // --quantize, for a weight written quantized
};

ShardMerger::ShardMerger(const ShardPlan& plan, const MergeOptions& options, ByteSink& sink)
    : plan_(plan), options_(options), sink_(sink), writer_(plan.write, sink), last_(plan.tensors.size()) {}

ShardMerger::ShardMerger(const ShardPlan& plan, const MergeOptions& options, ByteSink& sink, TensorRange range)
    : plan_(plan),
      options_(options),
      sink_(sink),
      writer_(RegionWritePlan(plan, range), sink),
      last_(std::min(range.last, plan.tensors.size())) {
  first_ = current_ = std::min(range.first, last_);
}

ShardMerger::~ShardMerger() = default;

static uint64_t SourceBytes(const PlannedTensor& p) {
  if (!p.source) return 0;
  uint64_t n = 1;
  for (uint64_t d : p.shape) n *= d;
  return n * DtypeBits(p.in_dtype) / 8;
}

uint64_t ShardMerger::source_bytes() const {
  uint64_t total = 0;
  for (size_t i = first_; i < last_; ++i) total += SourceBytes(plan_.tensors[i]);
  return total;
}

Status ShardMerger::Begin() {
  started_ = true;
  PB_RETURN_IF_ERROR(writer_.Begin());
  return StartNext();
}

// Opens plan_.tensors[current_], completing in passing every tensor that takes no source bytes. Stops (state_
// empty) while the tensor's adapter bytes are awaited.
Status ShardMerger::StartNext() {
  while (current_ < last_) {
    const PlannedTensor& p = plan_.tensors[current_];
    if (!fetch_requested_) {
      fetch_.Request(AdapterTensorsOf(p, options_));
      fetch_requested_ = true;
    }
    if (!fetch_.ready()) return Status::Ok();
    state_ = std::make_unique<TensorState>(p, fetch_, options_, writer_);
    if (SourceBytes(p) > 0) return Status::Ok();
    PB_RETURN_IF_ERROR(FinishCurrent());
  }
  state_.reset();
  return Status::Ok();
}

Status ShardMerger::FinishCurrent() {
  Status s = state_->Finish();
  if (s.ok() && state_->quantized()) quant_errors_.push_back(state_->quantized()->error());
  state_.reset();
  fetch_.Release();
  fetch_requested_ = false;
  ++current_;
  return s;
}

Status ShardMerger::SupplyAdapter(std::span<const uint8_t> bytes) {
  if (!waiting()) return MakeError(ErrorCode::InvalidArgument, "adapter bytes that were not asked for");
  PB_RETURN_IF_ERROR(fetch_.Supply(bytes));
  if (!fetch_.ready()) return Status::Ok();
  if (!state_) PB_RETURN_IF_ERROR(StartNext());  // else a block of the current tensor's factor came in
  // The kept bytes, taken in place: if the merger waits again part way (the next block), the rest stays where it is.
  size_t used = 0;
  PB_RETURN_IF_ERROR(PushNow(std::span<const uint8_t>(pending_).subspan(pending_at_), used));
  pending_at_ += used;
  if (pending_at_ == pending_.size()) {
    std::vector<uint8_t>().swap(pending_);
    pending_at_ = 0;
  }
  return Status::Ok();
}

Status ShardMerger::Push(std::span<const uint8_t> bytes) {
  if (!started_) return MakeError(ErrorCode::InvalidArgument, "Push before Begin");
  size_t used = 0;
  if (pending_at_ == pending_.size()) PB_RETURN_IF_ERROR(PushNow(bytes, used));
  // The rest is kept until the adapter bytes are in (after earlier kept bytes, if the edge pushed before supplying).
  pending_.insert(pending_.end(), bytes.begin() + static_cast<std::ptrdiff_t>(used), bytes.end());
  return Status::Ok();
}

// Takes bytes until the merger waits for adapter bytes (`used`: how many; the caller keeps the rest). Also called
// with no bytes once a block of the current tensor's factor is in (SupplyAdapter): a whole row the tensor carried
// while waiting for it is merged then, and the tensor finished if that row was its last.
Status ShardMerger::PushNow(std::span<const uint8_t> bytes, size_t& used) {
  const size_t total = bytes.size();
  for (;;) {
    used = total - bytes.size();
    if (waiting()) return Status::Ok();
    if (current_ >= last_) {
      if (bytes.empty()) return Status::Ok();
      return MakeError(ErrorCode::InvalidArgument, "more source bytes than the plan expects");
    }
    const uint64_t need = SourceBytes(plan_.tensors[current_]);
    const size_t take = static_cast<size_t>(std::min<uint64_t>(bytes.size(), need - consumed_in_tensor_));
    if (take == 0 && !state_->stalled()) return Status::Ok();
    size_t took = 0;
    PB_RETURN_IF_ERROR(state_->Push(bytes.first(take), took));
    consumed_in_tensor_ += took;
    consumed_total_ += took;
    bytes = bytes.subspan(took);
    if (!fetch_.ready()) continue;  // the tensor asked for the next block of its factor: the rest waits
    if (took < take)
      return MakeError(ErrorCode::InvalidArgument,
                       "internal: the merge stopped inside `" + plan_.tensors[current_].name + "`");
    if (consumed_in_tensor_ == need) {
      consumed_in_tensor_ = 0;
      PB_RETURN_IF_ERROR(FinishCurrent());
      PB_RETURN_IF_ERROR(StartNext());
    }
    if (bytes.empty()) {
      used = total;
      return Status::Ok();
    }
  }
}

Status ShardMerger::Forwarded(uint64_t n) {
  if (!started_) return MakeError(ErrorCode::InvalidArgument, "Forwarded before Begin");
  while (n > 0) {
    if (current_ >= last_) return MakeError(ErrorCode::InvalidArgument, "more source bytes than the plan expects");
    const PlannedTensor& p = plan_.tensors[current_];
    if (waiting() || !Forwardable(p, options_))
      return MakeError(ErrorCode::InvalidArgument, "forwarded bytes of `" + p.name + "`, which the merge changes",
                       p.name);
    const uint64_t take = std::min<uint64_t>(n, SourceBytes(p) - consumed_in_tensor_);
    PB_RETURN_IF_ERROR(writer_.Forwarded(take));
    consumed_in_tensor_ += take;
    consumed_total_ += take;
    n -= take;
    if (consumed_in_tensor_ == SourceBytes(p)) {
      consumed_in_tensor_ = 0;
      PB_RETURN_IF_ERROR(FinishCurrent());
      PB_RETURN_IF_ERROR(StartNext());
    }
  }
  return Status::Ok();
}

std::vector<SourceRun> SourceRuns(const ShardPlan& plan, const Header& header, const MergeOptions& options,
                                  TensorRange range) {
  std::vector<SourceRun> runs;
  for (size_t i = range.first; i < std::min(range.last, plan.tensors.size()); ++i) {
    const PlannedTensor& t = plan.tensors[i];
    if (!t.source) continue;
    const TensorInfo info = header.tensor(*t.source);
    const uint64_t begin = header.data_start() + info.begin, end = header.data_start() + info.end;
    if (begin == end) continue;
    const bool forward = Forwardable(t, options);
    if (!runs.empty() && runs.back().end == begin && runs.back().forward == forward) runs.back().end = end;
    else runs.push_back({begin, end, forward});
  }
  return runs;
}

Status ShardMerger::Finish() {
  if (waiting() && !fetch_.ready())
    return MakeError(ErrorCode::InvalidArgument,
                     "the adapter bytes for `" + plan_.tensors[current_].name + "` were not supplied",
                     plan_.tensors[current_].name);
  if (current_ < last_)
    return MakeError(ErrorCode::InvalidArgument,
                     "the source ended before tensor `" + plan_.tensors[current_].name + "`",
                     plan_.tensors[current_].name);
  return writer_.Finish();
}

StreamingMerger::StreamingMerger(const adapter::Adapter& adapter, std::optional<std::string> base_config,
                                 MergeOptions options, ByteSink& sink, ReaderOptions reader_options)
    : adapter_(adapter),
      base_config_(std::move(base_config)),
      options_(std::move(options)),
      sink_(sink),
      reader_(reader_options) {}

StreamingMerger::~StreamingMerger() = default;

Status StreamingMerger::OnHeader(const Header& header) {
  PB_ASSIGN_OR_RETURN(auto plan, PlanMerge({{"model.safetensors", &header}}, adapter_, base_config_, options_));
  plan_ = std::make_unique<MergePlan>(std::move(plan));
  merger_ = std::make_unique<ShardMerger>(plan_->shards[0], options_, sink_);
  runs_ = SourceRuns(plan_->shards[0], header, options_);
  return merger_->Begin();
}

SourceRun StreamingMerger::NextRun() const {
  const uint64_t pos = reader_.bytes_fed();
  if (!merger_) {
    const uint64_t rest = reader_.bytes_until_header();
    return {pos, rest == 0 ? UINT64_MAX : pos + rest, false};
  }
  // The runs are few (they alternate), so a scan costs nothing next to the bytes they describe.
  for (const SourceRun& r : runs_)
    if (pos < r.end) return {pos, r.end, r.forward};
  return {pos, pos, false};
}

Status StreamingMerger::Forwarded(uint64_t n) {
  if (!merger_) return MakeError(ErrorCode::InvalidArgument, "forwarded bytes before the header");
  const SourceRun run = NextRun();
  if (!run.forward || n > run.end - run.begin)
    return MakeError(ErrorCode::InvalidArgument, "forwarded bytes outside a run of unchanged tensors");
  PB_RETURN_IF_ERROR(reader_.Skip(n));
  return merger_->Forwarded(n);
}

Status StreamingMerger::OnTensorData(size_t, uint64_t, std::span<const uint8_t> bytes) { return merger_->Push(bytes); }

std::span<const adapter::ByteRange> StreamingMerger::adapter_needs() const {
  return merger_ ? merger_->adapter_needs() : std::span<const adapter::ByteRange>();
}

Status StreamingMerger::SupplyAdapter(std::span<const uint8_t> bytes) {
  if (!merger_) return MakeError(ErrorCode::InvalidArgument, "adapter bytes before the header");
  return merger_->SupplyAdapter(bytes);
}

Status StreamingMerger::Finish() {
  PB_RETURN_IF_ERROR(reader_.Finish(*this));
  if (!merger_) return MakeError(ErrorCode::HeaderTooSmall, "the stream ended before the header");
  return merger_->Finish();
}

}  // namespace pb::merge
