#include "ttlstate/compaction_filter.h"

namespace ttlstate {

using Decision = rocksdb::CompactionFilter::Decision;

void TtlCompactionFilter::InitConfigIfNotYet() const {
  // A filter created before configuration picks the config up at its next entry, then keeps it.
  if (config_ == &ConfigHolder::Disabled()) config_ = holder_->Get();
  if (!list_filter_ && config_->list_element_filter_factory) {
    list_filter_ = config_->list_element_filter_factory->Create();
  }
}

void TtlCompactionFilter::UpdateCurrentTimestampIfStale() const {
  // Every call counts (also Disabled, too short, merge operands of values); the first call of
  // an instance always queries, then every N-th: entries 1, N+1, 2N+1, ...
  if (record_counter_ >= config_->query_time_after_num_entries) {
    record_counter_ = 0;
    current_timestamp_ = time_->CurrentTimestamp();
    counters_->time_queries.fetch_add(1, std::memory_order_relaxed);
  }
  record_counter_ = record_counter_ + 1;
}

Decision TtlCompactionFilter::Decide(const rocksdb::Slice& value, size_t timestamp_offset) const {
  const int64_t ts = ReadTimestamp(value.data() + timestamp_offset);
  return IsExpired(ts, config_->ttl, current_timestamp_) ? Decision::kRemove : Decision::kKeep;
}

Decision TtlCompactionFilter::ListDecide(const rocksdb::Slice& value, std::string* new_value) const {
  if (Decide(value, config_->timestamp_offset) == Decision::kKeep) return Decision::kKeep;
  // Only an expired prefix is removed: Flink's lists are append-ordered.
  const size_t offset = list_filter_->NextUnexpiredOffset(value, config_->ttl, current_timestamp_);
  if (offset >= kInvalidOffset) return Decision::kKeep;
  if (offset >= value.size()) return Decision::kRemove;
  if (offset > 0) {
    new_value->assign(value.data() + offset, value.size() - offset);
    return Decision::kChangeValue;
  }
  return Decision::kKeep;
}

Decision TtlCompactionFilter::FilterV2(int /*level*/, const rocksdb::Slice& /*key*/, ValueType value_type,
                                       const rocksdb::Slice& existing_value, std::string* new_value,
                                       std::string* /*skip_until*/) const {
  InitConfigIfNotYet();
  UpdateCurrentTimestampIfStale();
  counters_->entries_seen.fetch_add(1, std::memory_order_relaxed);
  const FilterConfig& c = *config_;
  const bool too_short = existing_value.size() < c.timestamp_offset + kTimestampSize;
  const bool value_or_merge = value_type == ValueType::kValue || value_type == ValueType::kMergeOperand;
  const bool value_state = c.state_type == StateType::kValue && value_type == ValueType::kValue;
  const bool list_entry = c.state_type == StateType::kList && value_or_merge;
  Decision decision = Decision::kKeep;
  if (!too_short && (value_state || list_entry)) {
    decision = (list_entry && list_filter_) ? ListDecide(existing_value, new_value)
                                            : Decide(existing_value, c.timestamp_offset);
  }
  if (decision == Decision::kRemove) counters_->removed.fetch_add(1, std::memory_order_relaxed);
  if (decision == Decision::kChangeValue) counters_->rewritten.fetch_add(1, std::memory_order_relaxed);
  return decision;
}

std::unique_ptr<rocksdb::CompactionFilter> TtlCompactionFilterFactory::CreateCompactionFilter(
    const rocksdb::CompactionFilter::Context& /*context*/) {
  return std::make_unique<TtlCompactionFilter>(holder_, time_, counters_);
}

}  // namespace ttlstate
