#include "ttlstate/arena.h"

#include <algorithm>
#include <cstring>

#include "ttlstate/ttl_value.h"

namespace ttlstate {

char* Arena::Allocate(size_t n) {
  if (n > left_) {
    const size_t size = std::max<size_t>(n, 1u << 20);
    blocks_.push_back(std::make_unique<char[]>(size));
    next_ = blocks_.back().get();
    left_ = size;
    allocated_ += size;
  }
  char* out = next_;
  next_ += n;
  left_ -= n;
  return out;
}

std::string_view Arena::Copy(std::string_view data) {
  if (data.empty()) return std::string_view();
  char* out = Allocate(data.size());
  std::memcpy(out, data.data(), data.size());
  return std::string_view(out, data.size());
}

std::string_view Arena::CopyTtlValue(int64_t ts, std::string_view user) {
  char* out = Allocate(kTimestampSize + user.size());
  big_endian::Store(out, ts);
  if (!user.empty()) std::memcpy(out + kTimestampSize, user.data(), user.size());
  return std::string_view(out, kTimestampSize + user.size());
}

}  // namespace ttlstate
