// Flink's TtlUtils expiry, bit for bit (python/ttlstate/ttl/expiry.py is the same rule).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "ttlstate/big_endian.h"
#include "ttlstate/generated/ttl_value_layout.h"

namespace ttlstate {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Big-endian signed 64-bit timestamp at `p` (two's complement, so negative values round-trip).
inline int64_t ReadTimestamp(const char* p) { return big_endian::Load<int64_t>(p); }

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
