// SHA-256 (FIPS 180-4), incremental: the oid the Hub's LFS storage names a file by, computed in a streaming pass
// before the upload (docs/push.md). Sans-I/O, no dependency.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

namespace pb::net {

class Sha256 {
 public:
  Sha256();
  void Update(std::span<const uint8_t> bytes);
  // The digest as 64 lowercase hex digits; the object is spent.
  std::string HexDigest();

 private:
  void Block(const uint8_t* block);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t length_ = 0;
};

std::string Sha256Hex(std::span<const uint8_t> bytes);

}  // namespace pb::net
