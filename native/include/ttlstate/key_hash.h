// The two hashes of a state key that the shim's key filter (a Bloom filter in the executor
// JVM) probes with. A restore computes them while it bulk-loads, so the shim fills its filter
// from them instead of scanning every key back. They must equal the shim's bit for bit:
// MurmurHash3 x86_32 (Scala's MurmurHash3.bytesHash) with the shim's two seeds, which a
// cross-language test checks on generated keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// The keys a restore put (a key may repeat), kept until the shim asks for the bits of its
// filter's first layer (OP_KEY_FILTER_BITS): setting the bits here costs a fraction of sending 8
// bytes per key to the JVM and probing them in there. Kept as hash pairs (8 bytes a key) until
// `Settle` names the largest layer the shim will ask for; from then on as that layer's bits (2.5
// to 5 bytes a key at the shim's sizing), which a restore of millions of keys holds until the
// shim's next load. A layer of 2^k bits is that layer folded: a key's probe at bit b of the
// large layer is at bit b mod 2^k of the small one (the block index drops its high bits, the
// offset in a block is the same), so OR-ing its 2^k-bit pieces together gives it exactly.
class KeyHashes {
 public:
  void Add(std::string_view key) {
    const uint32_t a = Murmur3x86_32(key, kKeyHashSeed1);
    const uint32_t b = Murmur3x86_32(key, kKeyHashSeed2);
    if (words_.empty()) {
      pairs_.push_back({a, b});
    } else {
      SetBits(a, b, bits_log2_, probes_, words_.data());
    }
    ++count_;
  }
  size_t size() const { return count_; }
  void Reserve(size_t more) {
    if (words_.empty()) pairs_.reserve(pairs_.size() + more);
  }
  bool settled() const { return !words_.empty(); }

  // From now on holds one layer of 2^bits_log2 bits with `probes` probes a key instead of the
  // pairs (freed). Once: a second call must name the same layer.
  void Settle(int bits_log2, int probes) {
    if (settled()) {
      if (bits_log2 != bits_log2_ || probes != probes_) {
        throw std::invalid_argument("key hashes already settled on another layer");
      }
      return;
    }
    bits_log2_ = bits_log2;
    probes_ = probes;
    words_.assign(size_t{1} << (bits_log2 - 6), 0);
    for (const auto& [a, b] : pairs_) SetBits(a, b, bits_log2_, probes_, words_.data());
    std::vector<std::pair<uint32_t, uint32_t>>().swap(pairs_);
  }

  // One Bloom filter layer of 2^bits_log2 bits holding every key added, set exactly as the
  // shim's KeyFilter layer sets a key (KeyFilter.probeBit). Little-endian u64 words. Once
  // settled, only `probes` as settled and at most the settled layer's bits.
  std::string BloomWords(int bits_log2, int probes) const {
    const size_t n = size_t{1} << (bits_log2 - 6);
    if (!settled()) {
      std::vector<uint64_t> words(n, 0);
      for (const auto& [a, b] : pairs_) SetBits(a, b, bits_log2, probes, words.data());
      return LittleEndian(n, [&](size_t w) { return words[w]; });
    }
    if (probes != probes_ || bits_log2 > bits_log2_) {
      throw std::invalid_argument("key hashes settled on a layer of 2^" + std::to_string(bits_log2_) +
                                  " bits and " + std::to_string(probes_) + " probes: no layer of 2^" +
                                  std::to_string(bits_log2) + " bits and " + std::to_string(probes) +
                                  " probes can be had from it");
    }
    return LittleEndian(n, [&](size_t w) {
      uint64_t folded = 0;
      for (size_t piece = w; piece < words_.size(); piece += n) folded |= words_[piece];
      return folded;
    });
  }

 private:
  // Blocked, as the shim's layer: every probe of a key in one block of 2^9 bits (the whole
  // layer if it is smaller), the block chosen by h1's bits above the low 9, probe i at
  // (h1 + i * (h2 | 1)) mod the block's size within it; both hashes read as signed 32-bit
  // numbers (Scala Ints widened to Longs).
  static void SetBits(uint32_t a, uint32_t b, int bits_log2, int probes, uint64_t* words) {
    constexpr int kBlockBitsLog2 = 9;
    const int block_log2 = bits_log2 < kBlockBitsLog2 ? bits_log2 : kBlockBitsLog2;
    const uint64_t blocks_mask = (uint64_t{1} << (bits_log2 - block_log2)) - 1;
    const uint64_t in_block_mask = (uint64_t{1} << block_log2) - 1;
    const int64_t h1 = static_cast<int32_t>(a);
    const int64_t step = static_cast<int32_t>(b | 1u);
    const uint64_t block_start = ((static_cast<uint64_t>(h1) >> kBlockBitsLog2) & blocks_mask) << block_log2;
    for (int i = 0; i < probes; ++i) {
      const uint64_t bit = block_start | (static_cast<uint64_t>(h1 + i * step) & in_block_mask);
      words[bit >> 6] |= uint64_t{1} << (bit & 63);
    }
  }

  template <typename Word>
  static std::string LittleEndian(size_t n, Word word) {
    std::string out(n * 8, '\0');
    for (size_t w = 0; w < n; ++w) {
      const uint64_t v = word(w);
      for (int byte = 0; byte < 8; ++byte) out[w * 8 + byte] = static_cast<char>(v >> (8 * byte));
    }
    return out;
  }

  std::vector<std::pair<uint32_t, uint32_t>> pairs_;
  std::vector<uint64_t> words_;  // settled: the layer's bits
  int bits_log2_ = 0;
  int probes_ = 0;
  size_t count_ = 0;
};

}  // namespace ttlstate
