// Finding the first unexpired element of a list value, for List state.
//
// Two element layouts are handled natively (no callback into Python on a compaction thread):
//  * Fixed: Flink's layout. Elements [ts 8B][elem] joined by a one-byte delimiter (','),
//    no trailing delimiter; `fixed_size` = element length + 1 (the delimiter).
//  * Variable (ttlstate's own): each element is [u32 BE n][ts 8B][n - 8 bytes], no delimiter,
//    so elements of any length are self-delimiting and merge is plain concatenation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "rocksdb/slice.h"

namespace ttlstate {

// "Invalid / give up" offset, Flink's JAVA_MAX_SIZE: the caller keeps the value untouched.
constexpr size_t kInvalidOffset = 0x7fffffff;

class ListElementFilter {
 public:
  virtual ~ListElementFilter() = default;
  // Byte offset of the first unexpired element; >= list size if all expired;
  // kInvalidOffset if the list is malformed (e.g. a partial trailing element).
  virtual size_t NextUnexpiredOffset(const rocksdb::Slice& list, int64_t ttl, int64_t now) const = 0;
};

class FixedListElementFilter : public ListElementFilter {
 public:
  FixedListElementFilter(size_t fixed_size, size_t timestamp_offset)
      : fixed_size_(fixed_size), timestamp_offset_(timestamp_offset) {}
  size_t NextUnexpiredOffset(const rocksdb::Slice& list, int64_t ttl, int64_t now) const override;

 private:
  size_t fixed_size_;
  size_t timestamp_offset_;
};

class VariableListElementFilter : public ListElementFilter {
 public:
  size_t NextUnexpiredOffset(const rocksdb::Slice& list, int64_t ttl, int64_t now) const override;
};

// One factory per configuration; each filter instance creates its own element filter.
class ListElementFilterFactory {
 public:
  virtual ~ListElementFilterFactory() = default;
  virtual std::unique_ptr<ListElementFilter> Create() const = 0;
};

class FixedListElementFilterFactory : public ListElementFilterFactory {
 public:
  FixedListElementFilterFactory(size_t fixed_size, size_t timestamp_offset)
      : fixed_size_(fixed_size), timestamp_offset_(timestamp_offset) {}
  std::unique_ptr<ListElementFilter> Create() const override {
    return std::make_unique<FixedListElementFilter>(fixed_size_, timestamp_offset_);
  }

 private:
  size_t fixed_size_;
  size_t timestamp_offset_;
};

class VariableListElementFilterFactory : public ListElementFilterFactory {
 public:
  std::unique_ptr<ListElementFilter> Create() const override {
    return std::make_unique<VariableListElementFilter>();
  }
};

}  // namespace ttlstate
