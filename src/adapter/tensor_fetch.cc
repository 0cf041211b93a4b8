#include "adapter/tensor_fetch.h"

#include <algorithm>

#include "adapter/tensor_ops.h"

namespace pb::adapter {

void TensorFetch::Recount(uint64_t transient) {
  held_ = 0;
  for (const auto& b : stored_) held_ += b.capacity();
  for (const auto& t : made_) held_ += t.bytes.capacity();
  peak_ = std::max(peak_, held_ + transient);
}

void TensorFetch::Release() {
  requested_.clear();
  lazy_.clear();
  stored_.clear();
  made_.clear();
  needs_.clear();
  filling_ = 0;
  held_ = 0;
}

void TensorFetch::Request(std::vector<const Tensor*> tensors) {
  Release();
  requested_ = std::move(tensors);
  for (size_t i = 0; i < requested_.size(); ++i) {
    const Tensor* t = requested_[i];
    if (!t || t->held()) continue;
    lazy_.push_back(i);
    const ByteRange r = t->ref->range;
    if (r.size() == 0) continue;
    if (!needs_.empty() && needs_.back().end == r.begin) needs_.back().end = r.end;
    else needs_.push_back(r);
  }
  stored_.resize(lazy_.size());
  made_.resize(lazy_.size());
  pending_status_ = CompleteEmpty();
}

size_t TensorFetch::Add(const Tensor* t) {
  // Every earlier tensor is complete (ready()), so the next byte supplied belongs to this one: filling_ already
  // points past the last lazy tensor, where this one goes.
  const size_t i = requested_.size();
  requested_.push_back(t);
  if (!t || t->held()) return i;
  lazy_.push_back(i);
  stored_.emplace_back();
  made_.emplace_back();
  if (t->ref->range.size() > 0) needs_.push_back(t->ref->range);
  pending_status_ = CompleteEmpty();
  return i;
}

const TensorRef& TensorFetch::RefOf(size_t k) const { return *requested_[lazy_[k]]->ref; }

// Completes the lazy tensors from filling_ on that need no bytes (empty tensors).
Status TensorFetch::CompleteEmpty() {
  while (filling_ < lazy_.size() && RefOf(filling_).range.size() == 0) PB_RETURN_IF_ERROR(Complete(filling_++));
  if (filling_ == lazy_.size()) needs_.clear();
  return Status::Ok();
}

Status TensorFetch::Complete(size_t k) {
  // A rearranged (or decoded) copy exists alongside the stored bytes for a moment: counted in the peak.
  const bool copies = !RefOf(k).steps.empty() || RefOf(k).stored_gguf_type.has_value();
  Recount(copies ? requested_[lazy_[k]]->byte_length() : 0);
  auto made = Materialize(*requested_[lazy_[k]], std::move(stored_[k]));
  std::vector<uint8_t>().swap(stored_[k]);
  if (!made.ok()) return made.error();
  made_[k] = std::move(made.value());
  Recount(0);
  return Status::Ok();
}

Status TensorFetch::Supply(std::span<const uint8_t> bytes) {
  if (!pending_status_.ok()) return pending_status_;
  while (!bytes.empty()) {
    if (filling_ >= lazy_.size())
      return MakeError(ErrorCode::InvalidArgument, "more adapter bytes than were asked for");
    const uint64_t want = RefOf(filling_).range.size();
    std::vector<uint8_t>& dst = stored_[filling_];
    if (dst.capacity() < want) {  // reserved on the first byte, so the count is what is really held
      dst.reserve(want);
      Recount(0);
    }
    const size_t take = static_cast<size_t>(std::min<uint64_t>(bytes.size(), want - dst.size()));
    dst.insert(dst.end(), bytes.begin(), bytes.begin() + take);
    bytes = bytes.subspan(take);
    if (dst.size() < want) break;
    PB_RETURN_IF_ERROR(Complete(filling_++));
    PB_RETURN_IF_ERROR(CompleteEmpty());
  }
  return Status::Ok();
}

void TensorFetch::ReleaseOne(size_t i) {
  const Tensor* t = requested_[i];
  if (!t || t->held()) return;
  size_t k = std::lower_bound(lazy_.begin(), lazy_.end(), i) - lazy_.begin();
  std::vector<uint8_t>().swap(made_[k].bytes);  // released, capacity included (assigning {} keeps it)
  Recount(0);
}

const Tensor* TensorFetch::get(size_t i) const {
  const Tensor* t = requested_[i];
  if (!t || t->held()) return t;
  size_t k = std::lower_bound(lazy_.begin(), lazy_.end(), i) - lazy_.begin();
  return &made_[k];
}

std::vector<size_t> InlineTensorIndices(const Header& header) {
  std::vector<size_t> out;
  for (size_t i = 0; i < header.tensor_count(); ++i)
    if (header.tensor(i).byte_length() <= kInlineTensorBytes) out.push_back(i);
  return out;
}

std::vector<ByteRange> InlineTensorRanges(const Header& header) {
  std::vector<ByteRange> out;
  for (size_t i : InlineTensorIndices(header)) {
    TensorInfo info = header.tensor(i);
    out.push_back({header.data_start() + info.begin, header.data_start() + info.end});
  }
  return out;
}

}  // namespace pb::adapter
