// The two hashes of a state key that the shim's key filter (a Bloom filter in the executor
// JVM) probes with. A restore computes them while it bulk-loads, so the shim fills its filter
// from them instead of scanning every key back. They must equal the shim's bit for bit:
// MurmurHash3 x86_32 (Scala's MurmurHash3.bytesHash) with the shim's two seeds, which a
// cross-language test checks on generated keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ttlstate {

constexpr uint32_t kKeyHashSeed1 = 0x5bd1e995;
constexpr uint32_t kKeyHashSeed2 = 0x1b873593;

inline uint32_t Murmur3x86_32(std::string_view data, uint32_t seed) {
  constexpr uint32_t c1 = 0xcc9e2d51;
  constexpr uint32_t c2 = 0x1b873593;
  auto rotl = [](uint32_t x, int r) { return (x << r) | (x >> (32 - r)); };
  auto mix_k = [&](uint32_t k) { return rotl(k * c1, 15) * c2; };
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  const size_t n = data.size();
  uint32_t h = seed;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const uint32_t k = uint32_t{p[i]} | uint32_t{p[i + 1]} << 8 | uint32_t{p[i + 2]} << 16 |
                       uint32_t{p[i + 3]} << 24;
    h = rotl(h ^ mix_k(k), 13) * 5 + 0xe6546b64;
  }
  uint32_t k = 0;
  switch (n - i) {
    case 3: k ^= uint32_t{p[i + 2]} << 16; [[fallthrough]];
    case 2: k ^= uint32_t{p[i + 1]} << 8; [[fallthrough]];
    case 1: k ^= uint32_t{p[i]}; h ^= mix_k(k); break;
    default: break;
  }
  h ^= static_cast<uint32_t>(n);
  h ^= h >> 16;
  h *= 0x85ebca6b;
  h ^= h >> 13;
  h *= 0xc2b2ae35;
  h ^= h >> 16;
  return h;
}

// The keys' hash pairs, as the LOAD response carries them: (hash with seed 1, hash with
// seed 2), each a big-endian u32, one pair per key added (a key may repeat).
class KeyHashes {
 public:
  void Add(std::string_view key) {
    Append(Murmur3x86_32(key, kKeyHashSeed1));
    Append(Murmur3x86_32(key, kKeyHashSeed2));
  }
  std::string Take() { return std::move(bytes_); }

 private:
  void Append(uint32_t v) {
    const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                       static_cast<char>(v)};
    bytes_.append(b, 4);
  }
  std::string bytes_;
};

}  // namespace ttlstate
