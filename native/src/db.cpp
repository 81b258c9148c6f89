// A RocksDB instance with the TTL compaction filter: how it is opened and closed, and its plain
// reads, writes and maintenance. Its views, shared core, changelog replay and key hashes are
// in db_views.cpp, db_core.cpp, db_changelog.cpp and db_key_hashes.cpp.
#include "ttlstate/db.h"

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <thread>

#include "rocksdb/filter_policy.h"
#include "rocksdb/merge_operator.h"
#include "rocksdb/options.h"
#include "ttlstate/mapped_files.h"
#include "rocksdb/table.h"
#include "rocksdb/utilities/checkpoint.h"
#include "rocksdb/write_batch.h"
#include "ttlstate/memory.h"

namespace ttlstate {

namespace {

// List values grow by merge: ttlstate's length-prefixed elements concatenate as they are;
// Flink-layout fixed elements are joined with ','.
class ListAppendOperator : public rocksdb::AssociativeMergeOperator {
 public:
  explicit ListAppendOperator(std::string delimiter) : delimiter_(std::move(delimiter)) {}
  bool Merge(const rocksdb::Slice& /*key*/, const rocksdb::Slice* existing, const rocksdb::Slice& value,
             std::string* new_value, rocksdb::Logger* /*logger*/) const override {
    new_value->clear();
    if (existing != nullptr) {
      new_value->assign(existing->data(), existing->size());
      new_value->append(delimiter_);
    }
    new_value->append(value.data(), value.size());
    return true;
  }
  const char* Name() const override { return "TtlstateListAppend"; }

 private:
  std::string delimiter_;
};

// RocksDB's info LOG, one open file per DB, is not worth a descriptor per store when a worker
// holds hundreds of stores; errors still surface as statuses.
class NullLogger : public rocksdb::Logger {
 public:
  NullLogger() : rocksdb::Logger(rocksdb::InfoLogLevel::HEADER_LEVEL) {}
  using rocksdb::Logger::Logv;
  void Logv(const char* /*format*/, va_list /*ap*/) override {}
};

}  // namespace

std::unique_ptr<FilterConfig> MakeFilterConfig(StateType state_type, size_t timestamp_offset, int64_t ttl,
                                               int64_t query_time_after_num_entries,
                                               int64_t fixed_element_length, bool variable_length_list) {
  auto config = std::make_unique<FilterConfig>();
  config->state_type = state_type;
  config->timestamp_offset = timestamp_offset;
  config->ttl = ttl;
  config->query_time_after_num_entries = query_time_after_num_entries;
  if (variable_length_list) {
    config->list_element_filter_factory = std::make_unique<VariableListElementFilterFactory>();
  } else if (fixed_element_length > 0) {
    config->list_element_filter_factory =
        std::make_unique<FixedListElementFilterFactory>(static_cast<size_t>(fixed_element_length), timestamp_offset);
  }
  return config;
}

Db::Db(const std::string& path, const DbOptions& o) {
  // Options, explicitly: leveled compaction on block-based tables (so periodic compaction
  // and the filter behave as documented for Flink), lz4 for blocks, Bloom filters so a read
  // of an absent key rarely touches a data block, the process-wide block cache and
  // write-buffer budget, a bounded number of open files per DB.
  const SharedMemory memory = AttachSharedMemory();
  const std::shared_ptr<rocksdb::Cache>& cache = memory.cache;
  options_.write_buffer_manager = memory.write_buffers;
  options_.create_if_missing = true;
  options_.compaction_style = rocksdb::kCompactionStyleLevel;
  options_.compression = rocksdb::kLZ4Compression;
  options_.write_buffer_size = 32 << 20;
  options_.max_write_buffer_number = 3;
  options_.max_background_jobs = 2;
  options_.max_open_files = 64;
  options_.info_log = std::make_shared<NullLogger>();
  options_.keep_log_file_num = 1;
  rocksdb::BlockBasedTableOptions table;
  table.block_size = 16 * 1024;
  table.block_cache = cache;
  table.cache_index_and_filter_blocks = true;
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  // A hash index in each data block: a point lookup (every read of state is one) finds its
  // key's restart interval at once instead of by binary search over the block.
  table.data_block_index_type = rocksdb::BlockBasedTableOptions::kDataBlockBinaryAndHash;
  table.data_block_hash_table_util_ratio = 0.75;
  // What a compaction's output filter holds while it is built (8 bytes a key: tens of MB for a
  // large file) and what an open table reader holds are charged to the shared cache too, which
  // evicts blocks to make room, so the worker stays near its budget with large state.
  for (const auto role : {rocksdb::CacheEntryRole::kFilterConstruction, rocksdb::CacheEntryRole::kBlockBasedTableReader}) {
    table.cache_usage_options.options_overrides.insert(
        {role, rocksdb::CacheEntryRoleOptions{rocksdb::CacheEntryRoleOptions::Decision::kEnabled}});
  }
  table.optimize_filters_for_memory = true;
  options_.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  if (o.state_type == StateType::kList) {
    options_.merge_operator = std::make_shared<ListAppendOperator>(o.variable_length_list ? "" : ",");
  }
  if (o.wall_clock) time_->UseWallClock();
  if (o.mapped_reads) {
    options_.env = MappedEnv();
    // A compaction reads its input files through in 2 MiB ranges, not one block at a time: a
    // placeholder's read is a round trip to the shim (a local file has the OS's readahead).
    options_.compaction_readahead_size = 2 << 20;
  }
  if (o.ttl > 0) {
    auto holder = std::make_shared<ConfigHolder>();
    holder->Configure(MakeFilterConfig(o.state_type, o.timestamp_offset, o.ttl, o.query_time_after_num_entries,
                                       o.fixed_element_length, o.variable_length_list));
    options_.compaction_filter_factory = std::make_shared<TtlCompactionFilterFactory>(holder, time_, counters_);
    options_.periodic_compaction_seconds = o.periodic_compaction_seconds;  // 0 = off
    has_filter_ = true;
  }
  rocksdb::DB* raw = nullptr;
  CheckStatus(rocksdb::DB::Open(options_, path, &raw), "open");
  core_->db.reset(raw);
  core_->options = options_;
}

Db::~Db() { Close(); }

void Db::Close() {
  core_->closing.store(true);
  std::unique_lock<std::shared_mutex> lock(core_->mu);
  {
    std::lock_guard<std::mutex> resources(core_->resources_mu);
    for (DbResource* r : core_->resources) r->Invalidate();
  }
  if (core_->db) {
    core_->db->Close().PermitUncheckedError();
    core_->db.reset();
  }
}

std::optional<std::string> Db::Get(const std::string& key) {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  std::string value;
  const auto s = core_->Handle()->Get(rocksdb::ReadOptions(), key, &value);
  if (s.IsNotFound()) return std::nullopt;
  CheckStatus(s, "get");
  return value;
}

std::vector<std::optional<std::string>> Db::MultiGet(const std::vector<std::string>& keys) {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  std::vector<rocksdb::Slice> slices(keys.begin(), keys.end());
  std::vector<std::string> values;
  const auto statuses = core_->Handle()->MultiGet(rocksdb::ReadOptions(), slices, &values);
  std::vector<std::optional<std::string>> out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (statuses[i].IsNotFound()) continue;
    CheckStatus(statuses[i], "multi_get");
    out[i] = std::move(values[i]);
  }
  return out;
}

void Db::Write(const std::vector<std::pair<std::string, std::optional<std::string>>>& ops) {
  rocksdb::WriteBatch batch;
  for (const auto& [key, value] : ops) {
    if (value) CheckStatus(batch.Put(key, *value), "put"); else CheckStatus(batch.Delete(key), "delete");
  }
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;  // the local DB is a cache; durability comes from the checkpoint
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  CheckStatus(core_->Handle()->Write(wo, &batch), "write");
}

void Db::Merge(const std::string& key, const std::string& value) {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  CheckStatus(core_->Handle()->Merge(wo, key, value), "merge");
}

std::unique_ptr<Iterator> Db::NewIterator(std::optional<std::string> lower, std::optional<std::string> upper) {
  return std::make_unique<Iterator>(core_, std::move(lower), std::move(upper));
}

std::unique_ptr<DbSnapshot> Db::NewSnapshot() { return std::make_unique<DbSnapshot>(core_); }

void Db::Checkpoint(const std::string& dir) {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  rocksdb::Checkpoint* raw = nullptr;
  CheckStatus(rocksdb::Checkpoint::Create(core_->Handle(), &raw), "checkpoint");
  const std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // log_size_for_flush 0: always flush; the WAL is off, so the memtables exist nowhere else.
  CheckStatus(checkpoint->CreateCheckpoint(dir, /*log_size_for_flush=*/0), "checkpoint");
}

void Db::CompactAll() {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  rocksdb::CompactRangeOptions cro;
  cro.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  CheckStatus(core_->Handle()->CompactRange(cro, nullptr, nullptr), "compact_range");
}

void Db::Flush() {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  CheckStatus(core_->Handle()->Flush(rocksdb::FlushOptions()), "flush");
}

void Db::WarmMetadata(size_t threads) {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  rocksdb::DB* db = core_->Handle();
  std::vector<rocksdb::LiveFileMetaData> files;
  db->GetLiveFilesMetaData(&files);
  std::stable_sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.level < b.level; });
  // A point read of each file's smallest key opens the file and reads its index and filter
  // blocks into the block cache, and those of the files above it on the key's path; what it
  // finds does not matter, and a read that fails leaves the batch's own read to fail the same.
  // A level at a time: the levels above are cached by then (level 0's blocks were read when
  // the DB opened its files), so two reads rarely fetch one block at once, which the cache does
  // not merge: all levels at once read 60% more bytes at 50M keys.
  for (size_t begin = 0; begin < files.size();) {
    size_t end = begin;
    while (end < files.size() && files[end].level == files[begin].level) ++end;
    std::atomic<size_t> next{begin};
    const auto read_next = [&] {
      std::string value;
      for (size_t i = next++; i < end; i = next++) {
        db->Get(rocksdb::ReadOptions(), files[i].smallestkey, &value).PermitUncheckedError();
      }
    };
    std::vector<std::thread> readers;
    for (size_t t = 1; t < std::min(threads, end - begin); ++t) readers.emplace_back(read_next);
    read_next();
    for (auto& r : readers) r.join();
    begin = end;
  }
}

uint64_t Db::IntProperty(const std::string& name) {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  uint64_t v = 0;
  if (!core_->Handle()->GetIntProperty(name, &v)) throw std::runtime_error("rocksdb: unknown property " + name);
  return v;
}

KeyCount Db::CountKeys() {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  std::unique_ptr<rocksdb::Iterator> it(core_->Handle()->NewIterator(rocksdb::ReadOptions()));
  KeyCount n;
  for (it->SeekToFirst(); it->Valid(); it->Next()) n.Add(std::string_view(it->key().data(), it->key().size()), 1);
  CheckStatus(it->status(), "count");
  return n;
}

}  // namespace ttlstate
