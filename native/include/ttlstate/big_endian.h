// The one big-endian codec of the native code: the wire protocol, the record files and the
// TtlValue timestamp are all big-endian (network order, as Java's DataOutput and Python's
// struct ">"). Signed values are encoded as their two's complement, so they round-trip.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace ttlstate::big_endian {

// Writes `v` into the sizeof(T) bytes at `p`.
template <typename T>
inline void Store(char* p, T v) {
  static_assert(std::is_integral_v<T>, "big-endian encoding is for integers");
  auto u = static_cast<std::make_unsigned_t<T>>(v);
  for (size_t i = sizeof(T); i-- > 0;) {
    p[i] = static_cast<char>(u & 0xffu);
    u = static_cast<std::make_unsigned_t<T>>(u >> 8);
  }
}

// Appends `v`'s sizeof(T) bytes to `out`.
template <typename T>
inline void Append(std::string* out, T v) {
  char b[sizeof(T)];
  Store(b, v);
  out->append(b, sizeof(T));
}

// Reads the sizeof(T) bytes at `p`.
template <typename T>
inline T Load(const char* p) {
  static_assert(std::is_integral_v<T>, "big-endian decoding is for integers");
  std::make_unsigned_t<T> u = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    u = static_cast<std::make_unsigned_t<T>>((u << 8) | static_cast<uint8_t>(p[i]));
  }
  return static_cast<T>(u);
}

}  // namespace ttlstate::big_endian
