// A parsed header handed to JS as a compact table instead of JSON: rendering a 200,000-tensor header as JSON and
// parsing it back took most of a second and tens of MB of heap (docs/benchmarks.md, "Header-heavy inspect"). JS builds
// its tensor objects from the table (web/src/ops/inspect.js, headerFromHandle) and the summary document
// (RenderInspectSummaryJson: sizes, metadata, parameter counts), so both paths give the same values.
#pragma once

#include <emscripten/val.h>

#include <cstdint>
#include <vector>

#include "core/header.h"

namespace pb::wasm {

// uint32 columns per tensor row, in data order: the name's heap address and byte length (UTF-8, read in place),
// the heap address of the dims (uint64 little-endian, read in place), rank · 32 + dtype code (an index into
// dtypeNames()), then data_offsets begin, end and the byte length as uint64 halves (low, high). 40 bytes a row:
// the table is the last allocation of an inspect, so its size sets the WASM heap's high-water mark.
inline constexpr size_t kHeaderTableColumns = 10;

// The table of `h` in `rows` (kept by the caller), as a Uint32Array view of the heap. The names and dims it
// points at live in `h`; JS reads everything before its next call into the module.
inline emscripten::val HeaderTableView(const Header& h, std::vector<uint32_t>& rows) {
  rows.assign(h.tensor_count() * kHeaderTableColumns, 0);
  uint32_t* r = rows.data();
  auto u64 = [](uint32_t* at, uint64_t v) { at[0] = uint32_t(v), at[1] = uint32_t(v >> 32); };
  for (size_t i = 0; i < h.tensor_count(); ++i, r += kHeaderTableColumns) {
    TensorInfo t = h.tensor(i);
    // wasm32: addresses and sizes below a header's 100 MB fit 32 bits; the rank is below 2^26 (header.h).
    r[0] = uint32_t(reinterpret_cast<uintptr_t>(t.name.data()));
    r[1] = uint32_t(t.name.size());
    r[2] = uint32_t(reinterpret_cast<uintptr_t>(t.shape.data()));
    r[3] = uint32_t(t.shape.size()) * 32 + uint32_t(static_cast<int>(t.dtype));
    u64(r + 4, t.begin);
    u64(r + 6, t.end);
    u64(r + 8, t.byte_length());
  }
  return emscripten::val(emscripten::typed_memory_view(rows.size(), rows.data()));
}

// The header JSON as read, as a Uint8Array view of the heap (valid until the next call into the module): the names
// the table points into, so that JS can decode it once and cut the names out of it (web/src/ops/inspect.js).
inline emscripten::val HeaderJsonView(const Header& h) {
  return emscripten::val(
      emscripten::typed_memory_view(h.json().size(), reinterpret_cast<const uint8_t*>(h.json().data())));
}

}  // namespace pb::wasm
