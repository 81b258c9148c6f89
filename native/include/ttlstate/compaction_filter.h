// The TTL compaction filter: FlinkCompactionFilter's decisions, in ttlstate.
//
// One filter instance per compaction run (RocksDB creates it through the factory and uses it
// from one thread), so the time cache below is a plain per-instance counter, as upstream.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "rocksdb/compaction_filter.h"
#include "ttlstate/filter_config.h"
#include "ttlstate/time_source.h"

namespace ttlstate {

// Counters summed over every filter a factory created (read by the store's metrics).
struct FilterCounters {
  std::atomic<int64_t> entries_seen{0};
  std::atomic<int64_t> removed{0};
  std::atomic<int64_t> rewritten{0};
  std::atomic<int64_t> time_queries{0};
};

class TtlCompactionFilter : public rocksdb::CompactionFilter {
 public:
  TtlCompactionFilter(std::shared_ptr<ConfigHolder> holder, std::shared_ptr<TimeSource> time,
                      std::shared_ptr<FilterCounters> counters)
      : holder_(std::move(holder)), time_(std::move(time)), counters_(std::move(counters)) {}

  Decision FilterV2(int level, const rocksdb::Slice& key, ValueType value_type,
                    const rocksdb::Slice& existing_value, std::string* new_value,
                    std::string* skip_until) const override;

  const char* Name() const override { return "TtlCompactionFilter"; }

 private:
  void InitConfigIfNotYet() const;
  void UpdateCurrentTimestampIfStale() const;
  Decision ListDecide(const rocksdb::Slice& value, std::string* new_value) const;
  Decision Decide(const rocksdb::Slice& value, size_t timestamp_offset) const;

  std::shared_ptr<ConfigHolder> holder_;
  std::shared_ptr<TimeSource> time_;
  std::shared_ptr<FilterCounters> counters_;
  // Per-instance state, mutated from const FilterV2 as upstream does (one thread per filter).
  mutable const FilterConfig* config_ = &ConfigHolder::Disabled();
  mutable std::unique_ptr<ListElementFilter> list_filter_;
  mutable int64_t current_timestamp_ = kInt64Max;
  mutable int64_t record_counter_ = kInt64Max;
};

class TtlCompactionFilterFactory : public rocksdb::CompactionFilterFactory {
 public:
  TtlCompactionFilterFactory(std::shared_ptr<ConfigHolder> holder, std::shared_ptr<TimeSource> time,
                             std::shared_ptr<FilterCounters> counters)
      : holder_(std::move(holder)), time_(std::move(time)), counters_(std::move(counters)) {}

  std::unique_ptr<rocksdb::CompactionFilter> CreateCompactionFilter(
      const rocksdb::CompactionFilter::Context& context) override;
  const char* Name() const override { return "TtlCompactionFilterFactory"; }

 private:
  std::shared_ptr<ConfigHolder> holder_;
  std::shared_ptr<TimeSource> time_;
  std::shared_ptr<FilterCounters> counters_;
};

}  // namespace ttlstate
