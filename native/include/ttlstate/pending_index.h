// A transaction's pending entries by key: records in first-touch order (a deque, so a record
// never moves) and an open-addressing index of 8-byte slots over them.
//
// Why not std::unordered_map: a node per key (about 60 bytes and a malloc each), and a commit
// had to copy every entry into a vector before sorting it. Here a record is 32 bytes, the index
// 8 bytes per slot at most 3/4 full, and a commit sorts 4-byte positions into the records:
// a batch of 125k keys took about 8 MB less at its commit's peak.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

namespace ttlstate {

// `Hash` is a parameter only so that a test can make every key collide.
template <typename Value, typename Hash = std::hash<std::string_view>>
class PendingIndex {
 public:
  struct Record {
    std::string_view key;  // its bytes belong to the caller (an arena), and outlive the index
    Value value;
  };

  size_t size() const { return records_.size(); }
  Record& operator[](size_t pos) { return records_[pos]; }
  const Record& operator[](size_t pos) const { return records_[pos]; }
  typename std::deque<Record>::const_iterator begin() const { return records_.begin(); }
  typename std::deque<Record>::const_iterator end() const { return records_.end(); }

  // The record of `key`, or nullptr.
  Record* Find(std::string_view key) { return const_cast<Record*>(std::as_const(*this).Find(key)); }
  const Record* Find(std::string_view key) const {
    if (slots_.empty()) return nullptr;
    const uint32_t h = HashOf(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const uint64_t s = slots_[i];
      if (s == 0) return nullptr;
      if (Tag(s) == h && records_[Pos(s)].key == key) return &records_[Pos(s)];
    }
  }

  // The record of `key`, inserted (with the key `keep(key)` returns: bytes that outlive the
  // index) if there was none.
  template <typename Keep>
  Record& FindOrInsert(std::string_view key, Keep keep) {
    if ((records_.size() + 1) * 4 > slots_.size() * 3) Grow();
    if (records_.size() >= kMaxRecords) throw std::length_error("ttlstate: over 2^31 keys in one batch");
    const uint32_t h = HashOf(key);
    size_t i = h & mask_;
    for (;; i = (i + 1) & mask_) {
      const uint64_t s = slots_[i];
      if (s == 0) break;
      if (Tag(s) == h && records_[Pos(s)].key == key) return records_[Pos(s)];
    }
    slots_[i] = Slot(h, records_.size());
    records_.push_back({keep(key), Value()});
    return records_.back();
  }

  void Clear() {
    records_ = {};
    slots_ = {};
    mask_ = 0;
  }

 private:
  // The slot holds the key's 32-bit hash (which also places it: with at most kMaxRecords
  // records at most 3/4 full, a table never has more than 2^32 slots) and its record's
  // position + 1; 0 is an empty slot.
  static constexpr size_t kMaxRecords = size_t{1} << 31;
  static uint32_t HashOf(std::string_view key) {
    const uint64_t h = Hash{}(key);
    return static_cast<uint32_t>(h ^ (h >> 32));
  }
  static uint64_t Slot(uint32_t hash, size_t pos) { return (static_cast<uint64_t>(hash) << 32) | (pos + 1); }
  static uint32_t Tag(uint64_t slot) { return static_cast<uint32_t>(slot >> 32); }
  static size_t Pos(uint64_t slot) { return static_cast<size_t>(static_cast<uint32_t>(slot)) - 1; }

  void Grow() {
    std::vector<uint64_t> old = std::move(slots_);
    slots_.assign(old.empty() ? 16 : old.size() * 2, 0);
    mask_ = slots_.size() - 1;
    for (const uint64_t s : old) {
      if (s == 0) continue;
      size_t i = Tag(s) & mask_;
      while (slots_[i] != 0) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  std::deque<Record> records_;
  std::vector<uint64_t> slots_;
  size_t mask_ = 0;
};

}  // namespace ttlstate
