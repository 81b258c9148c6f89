// Flink's TtlValue layout: 8-byte big-endian signed last-access timestamp (ms), then the user
// bytes. python/ttlstate/ttl/ttl_value.py is the same layout (cross-checked by a test).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "ttlstate/ttl_expiry.h"

namespace ttlstate {

inline void AppendTimestamp(std::string* out, int64_t ts) { big_endian::Append(out, ts); }

inline std::string EncodeTtlValue(int64_t ts, std::string_view user) {
  std::string out;
  out.reserve(kTimestampSize + user.size());
  AppendTimestamp(&out, ts);
  out.append(user.data(), user.size());
  return out;
}

inline int64_t TtlTimestamp(std::string_view stored) {
  if (stored.size() < kTimestampSize) {
    throw std::runtime_error("stored value of " + std::to_string(stored.size()) +
                             " bytes is shorter than a TtlValue's 8-byte timestamp");
  }
  return ReadTimestamp(stored.data());
}

inline std::string_view TtlUserBytes(std::string_view stored) { return stored.substr(kTimestampSize); }

}  // namespace ttlstate
