// The filter's clock: an atomic the store sets to the batch time, or the wall clock.
// Never a call into Python: compaction threads must not touch the interpreter.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace ttlstate {

class TimeSource {
 public:
  // Batch-time mode: CurrentTimestamp() returns the last value given to Set().
  void Set(int64_t now_ms) {
    now_.store(now_ms, std::memory_order_release);
    wall_clock_.store(false, std::memory_order_release);
  }
  void UseWallClock() { wall_clock_.store(true, std::memory_order_release); }

  int64_t CurrentTimestamp() const {
    if (wall_clock_.load(std::memory_order_acquire)) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
          .count();
    }
    return now_.load(std::memory_order_acquire);
  }

 private:
  std::atomic<int64_t> now_{0};
  std::atomic<bool> wall_clock_{false};
};

}  // namespace ttlstate
