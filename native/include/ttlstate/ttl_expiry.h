// Flink's TtlUtils expiry, bit for bit (python/ttlstate/ttl/expiry.py is the same rule).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

namespace ttlstate {

constexpr size_t kTimestampSize = 8;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Big-endian signed 64-bit timestamp at `p` (two's complement, so negative values round-trip).
inline int64_t ReadTimestamp(const char* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < kTimestampSize; ++i) {
    v = (v << 8) | static_cast<uint8_t>(p[i]);
  }
  return static_cast<int64_t>(v);
}

// The first instant at which a value last accessed at `ts` is expired, clamped like Flink.
inline int64_t ExpirationTimestamp(int64_t ts, int64_t ttl) {
  const int64_t ttl_without_overflow = ts > 0 ? (kInt64Max - ts < ttl ? kInt64Max - ts : ttl) : ttl;
  return ts + ttl_without_overflow;
}

// Inclusive boundary: expired at the expiration timestamp.
inline bool IsExpired(int64_t ts, int64_t ttl, int64_t now) {
  return ExpirationTimestamp(ts, ttl) <= now;
}

}  // namespace ttlstate
