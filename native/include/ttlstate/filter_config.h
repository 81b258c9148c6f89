// The filter's configuration and the one-shot holder shared by a factory and its filters.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "ttlstate/list_filters.h"
#include "ttlstate/ttl_expiry.h"

namespace ttlstate {

// The order is Flink's (its JNI passes the ordinal); there is no Map type: map state is
// Value with timestamp offset 1.
enum class StateType : int { kDisabled = 0, kValue = 1, kList = 2 };

struct FilterConfig {
  StateType state_type = StateType::kDisabled;
  size_t timestamp_offset = 0;
  int64_t ttl = kInt64Max;
  int64_t query_time_after_num_entries = kInt64Max;
  std::unique_ptr<ListElementFilterFactory> list_element_filter_factory;
};

// Starts Disabled; Configure() succeeds once. Unlike upstream (check-then-set, and a rejected
// config leaked by JNI) this is a compare-and-swap under a mutex and owns what it holds.
class ConfigHolder {
 public:
  ConfigHolder() : current_(&Disabled()) {}

  static const FilterConfig& Disabled() {
    static const FilterConfig disabled{};
    return disabled;
  }

  bool Configure(std::unique_ptr<FilterConfig> config) {
    std::lock_guard<std::mutex> lock(mu_);
    if (owned_) return false;
    owned_ = std::move(config);
    current_.store(owned_.get(), std::memory_order_release);
    return true;
  }

  const FilterConfig* Get() const { return current_.load(std::memory_order_acquire); }

 private:
  std::mutex mu_;
  std::unique_ptr<FilterConfig> owned_;
  std::atomic<const FilterConfig*> current_;
};

}  // namespace ttlstate
