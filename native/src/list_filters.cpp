#include "ttlstate/list_filters.h"

#include "ttlstate/ttl_expiry.h"

namespace ttlstate {

size_t FixedListElementFilter::NextUnexpiredOffset(const rocksdb::Slice& list, int64_t ttl,
                                                   int64_t now) const {
  size_t offset = 0;
  while (offset < list.size()) {
    // Upstream reads past the end on a partial trailing element; we give up (keep) instead.
    if (list.size() - offset < timestamp_offset_ + kTimestampSize) return kInvalidOffset;
    if (!IsExpired(ReadTimestamp(list.data() + offset + timestamp_offset_), ttl, now)) break;
    const size_t next = offset + fixed_size_;
    if (next >= kInvalidOffset || next < offset) return kInvalidOffset;
    offset = next;
  }
  return offset;
}

size_t VariableListElementFilter::NextUnexpiredOffset(const rocksdb::Slice& list, int64_t ttl,
                                                      int64_t now) const {
  size_t offset = 0;
  while (offset < list.size()) {
    if (list.size() - offset < 4 + kTimestampSize) return kInvalidOffset;
    const size_t n = big_endian::Load<uint32_t>(list.data() + offset);
    if (n < kTimestampSize || n > list.size() - offset - 4) return kInvalidOffset;
    if (!IsExpired(ReadTimestamp(list.data() + offset + 4), ttl, now)) break;
    offset += 4 + n;
    if (offset >= kInvalidOffset) return kInvalidOffset;
  }
  return offset;
}

}  // namespace ttlstate
