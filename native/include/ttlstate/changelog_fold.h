// Replaying changelogs that hold appends (a store with column families logs every put, delete
// and append in the order made, a key possibly several times): a key's records fold in file
// order, put -> its value, delete -> none, append -> the value so far followed by the appended
// user bytes, stamped with the append's time. The reference is record_file.py's `fold`.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ttlstate/key_order.h"
#include "ttlstate/record_file.h"
#include "ttlstate/ttl_value.h"

namespace ttlstate {

// One record of a changelog: its op (kRecordPut, kRecordDelete, kRecordAppend), key, value.
struct ChangeRecord {
  uint8_t op;
  std::string_view key;
  std::string_view value;
};

// The TtlValue an append (`appended`: the TtlValue of the appended user bytes) leaves on a key
// whose TtlValue was `base` (none: absent).
inline std::string ApplyAppend(std::optional<std::string_view> base, std::string_view appended) {
  std::string out;
  const std::string_view before = base ? TtlUserBytes(*base) : std::string_view();
  out.reserve(appended.size() + before.size());
  out.append(appended.data(), kTimestampSize);
  out.append(before.data(), before.size());
  out.append(appended.substr(kTimestampSize));
  return out;
}

// The records 0..n-1 (`at(i)`: a ChangeRecord, in file order) folded to one per key, in key
// order: a put or a delete, as the key's records leave it, or an append (a TtlValue of the user
// bytes appended, stamped with the last append's time) when they are appends only, onto what
// the key held before them. Values made by folding live in `made`.
template <typename At>
std::vector<ChangeRecord> FoldByKey(size_t n, At at, std::deque<std::string>* made) {
  const std::vector<uint32_t> order = KeyOrder(n, [&](size_t i) { return at(i).key; });
  std::vector<ChangeRecord> out;
  for (size_t begin = 0; begin < order.size();) {
    const std::string_view key = at(order[begin]).key;
    size_t end = begin + 1;
    while (end < order.size() && at(order[end]).key == key) ++end;
    size_t from = end - 1;  // the key's last put or delete, from which on its records count
    while (from > begin && at(order[from]).op == kRecordAppend) --from;
    ChangeRecord folded = at(order[from]);
    if (from + 1 < end) {  // appends after it: their bytes go after its value, once
      std::string value;
      value.append(folded.op == kRecordDelete ? std::string_view("\0\0\0\0\0\0\0\0", kTimestampSize)
                                              : folded.value);
      for (size_t i = from + 1; i < end; ++i) {
        const ChangeRecord r = at(order[i]);
        value.replace(0, kTimestampSize, r.value.substr(0, kTimestampSize));
        value.append(TtlUserBytes(r.value));
      }
      made->push_back(std::move(value));
      folded = {folded.op == kRecordAppend ? kRecordAppend : kRecordPut, key, made->back()};
    }
    out.push_back(folded);
    begin = end;
  }
  return out;
}

}  // namespace ttlstate
