// A RocksDB instance with the TTL compaction filter: what the Python engine needs, no more.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "rocksdb/db.h"
#include "ttlstate/compaction_filter.h"

namespace ttlstate {

struct DbOptions {
  // The filter is attached when ttl > 0; it is configured at open (ttlstate never needs
  // Flink's late configuration, but the holder still supports it for the tests).
  int64_t ttl = 0;
  StateType state_type = StateType::kValue;
  size_t timestamp_offset = 0;
  int64_t query_time_after_num_entries = 1000;
  uint64_t periodic_compaction_seconds = 30ull * 24 * 3600;
  int64_t fixed_element_length = -1;     // List state: Flink layout with ',' delimiter
  bool variable_length_list = false;     // List state: ttlstate's length-prefixed layout
  bool wall_clock = false;
};

using Entry = std::pair<std::string, std::string>;
class Iterator;

// What a Db and its iterators share: closing the DB first invalidates every live iterator,
// so a Python iterator that outlives `close()` fails cleanly instead of crashing RocksDB.
struct DbCore {
  std::shared_mutex mu;  // shared: operations; exclusive: close and iterator (un)registration
  std::unique_ptr<rocksdb::DB> db;
  std::set<Iterator*> iterators;
};

class Iterator {
 public:
  Iterator(std::shared_ptr<DbCore> core, std::optional<std::string> lower, std::optional<std::string> upper);
  ~Iterator();
  Iterator(const Iterator&) = delete;
  Iterator& operator=(const Iterator&) = delete;
  // Up to `max_bytes` of entries (at least one if any remain); empty when exhausted.
  std::vector<Entry> NextChunk(size_t max_bytes);
  void Invalidate() { it_.reset(); }  // called by Db::Close with core->mu held

 private:
  std::shared_ptr<DbCore> core_;
  std::optional<std::string> lower_;
  std::optional<std::string> upper_;
  rocksdb::Slice lower_slice_;
  rocksdb::Slice upper_slice_;
  std::unique_ptr<rocksdb::Iterator> it_;
};

class Db {
 public:
  Db(const std::string& path, const DbOptions& options);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  std::optional<std::string> Get(const std::string& key);
  std::vector<std::optional<std::string>> MultiGet(const std::vector<std::string>& keys);
  // Puts (value set) and deletes (nullopt), atomically, in order.
  void Write(const std::vector<std::pair<std::string, std::optional<std::string>>>& ops);
  void Merge(const std::string& key, const std::string& value);
  std::unique_ptr<Iterator> NewIterator(std::optional<std::string> lower, std::optional<std::string> upper);
  void CompactAll();
  void Flush();
  uint64_t IntProperty(const std::string& name);
  uint64_t CountKeys();
  void SetTime(int64_t now_ms) { time_->Set(now_ms); }
  const FilterCounters& Counters() const { return *counters_; }
  bool HasFilter() const { return has_filter_; }
  void Close();

 private:
  rocksdb::DB* Handle();  // requires core_->mu held (shared or exclusive)
  std::shared_ptr<TimeSource> time_ = std::make_shared<TimeSource>();
  std::shared_ptr<FilterCounters> counters_ = std::make_shared<FilterCounters>();
  std::shared_ptr<DbCore> core_ = std::make_shared<DbCore>();
  bool has_filter_ = false;
};

std::unique_ptr<FilterConfig> MakeFilterConfig(StateType state_type, size_t timestamp_offset, int64_t ttl,
                                               int64_t query_time_after_num_entries,
                                               int64_t fixed_element_length, bool variable_length_list);

}  // namespace ttlstate
