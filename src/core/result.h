// Result<T>: a value or an Error, for functions that produce something.
#pragma once

#include <optional>
#include <utility>

#include "core/error.h"

namespace pb {

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : error_(std::move(error)) {}  // NOLINT
  bool ok() const { return value_.has_value(); }
  const Error& error() const { return *error_; }
  T& value() { return *value_; }
  const T& value() const { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  Status status() const { return ok() ? Status::Ok() : Status(*error_); }

 private:
  std::optional<T> value_;
  std::optional<Error> error_;
};

}  // namespace pb
