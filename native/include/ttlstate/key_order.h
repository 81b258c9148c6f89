// Sorting a batch's keys, as commits and changelog replay write in key order. Keys live on the
// heap (an arena, strings): comparing them directly costs a cache miss per comparison, so the
// sort compares 8 bytes of each key held inline first and reads a key only on a tie. Those are
// the 8 bytes after the prefix every key of the batch shares: Spark's keys are UnsafeRows,
// whose first bytes (null bits, offsets and lengths) are the same in nearly every key, so the
// first 8 bytes would tie every time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace ttlstate {

// The positions 0..n-1 ordered by key(i), ties (equal keys) in position order, so that the
// last of equal keys is the last written.
template <typename KeyOf>
std::vector<uint32_t> KeyOrder(size_t n, KeyOf key_of) {
  struct Entry {
    uint64_t prefix;
    uint32_t pos;
  };
  const std::string_view first = n == 0 ? std::string_view() : key_of(0);
  size_t shared = first.size();
  for (size_t i = 1; i < n && shared > 0; ++i) {
    const std::string_view k = key_of(i);
    const size_t limit = std::min(shared, k.size());
    size_t same = 0;
    while (same < limit && first[same] == k[same]) ++same;
    shared = same;
  }
  // Past the shared prefix, a key's next 8 bytes big-endian (0 past its end) order it: a tie
  // only when they are equal, or one key is a prefix of the other within them.
  std::vector<Entry> entries(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string_view k = key_of(i);
    uint64_t prefix = 0;
    for (size_t b = shared; b < shared + 8; ++b) {
      prefix = (prefix << 8) | (b < k.size() ? static_cast<uint8_t>(k[b]) : 0u);
    }
    entries[i] = {prefix, static_cast<uint32_t>(i)};
  }
  std::sort(entries.begin(), entries.end(), [&](const Entry& a, const Entry& b) {
    if (a.prefix != b.prefix) return a.prefix < b.prefix;
    const int c = key_of(a.pos).compare(key_of(b.pos));
    return c != 0 ? c < 0 : a.pos < b.pos;
  });
  std::vector<uint32_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = entries[i].pos;
  return order;
}

// The position of the last (newest) record of each key, in key order: what applying records
// written in file order leaves.
template <typename KeyOf>
std::vector<uint32_t> LastOfEachKey(size_t n, KeyOf key_of) {
  std::vector<uint32_t> order = KeyOrder(n, key_of);
  size_t kept = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i + 1 < order.size() && key_of(order[i + 1]) == key_of(order[i])) continue;
    order[kept++] = order[i];
  }
  order.resize(kept);
  return order;
}

}  // namespace ttlstate
