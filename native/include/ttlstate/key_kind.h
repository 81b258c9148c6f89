// Which keys a store counts apart: those of internal column families (Spark's timers, TTL
// indexes and list metadata, whose names start with '$'), so that a store with column families
// reports its user families' keys and its internal ones' apart, as Spark's RocksDB provider
// does. A stored key of such a store is [name length][name][key] (protocol.h); a store without
// families ignores the internal count.
#pragma once

#include <cstdint>
#include <string_view>

#include "ttlstate/protocol.h"

namespace ttlstate {

inline bool IsInternalKey(std::string_view key) {
  return key.size() > protocol::kFamilyNameLengthBytes &&
         static_cast<unsigned char>(key[protocol::kFamilyNameLengthBytes]) == protocol::kInternalFamilyMarker;
}

// A number of keys, or a change in it: all of them, and the internal families' among them.
struct KeyCount {
  int64_t keys = 0;
  int64_t internal = 0;
  void Add(std::string_view key, int64_t n) {
    keys += n;
    if (IsInternalKey(key)) internal += n;
  }
  KeyCount& operator+=(const KeyCount& o) {
    keys += o.keys;
    internal += o.internal;
    return *this;
  }
};

}  // namespace ttlstate
