// Append-only storage for many small keys and values: one allocation per MiB instead of one or
// two per record, and stable addresses, so records can hold views into it until it is cleared.
// A batch's pending writes live in one; so do the changelog records a restore gathers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace ttlstate {

class Arena {
 public:
  std::string_view Copy(std::string_view data);
  std::string_view CopyTtlValue(int64_t ts, std::string_view user);  // TtlValue layout
  void Clear() {
    blocks_.clear();
    left_ = 0;
    allocated_ = 0;
  }
  size_t allocated_bytes() const { return allocated_; }

 private:
  char* Allocate(size_t n);
  std::vector<std::unique_ptr<char[]>> blocks_;
  char* next_ = nullptr;
  size_t left_ = 0;
  size_t allocated_ = 0;
};

}  // namespace ttlstate
