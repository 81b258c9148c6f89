#include "ttlstate/db.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <unordered_map>

#include "rocksdb/cache.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/merge_operator.h"
#include "rocksdb/options.h"
#include "rocksdb/sst_file_reader.h"
#include "rocksdb/sst_file_writer.h"
#include "rocksdb/table.h"
#include "rocksdb/utilities/checkpoint.h"
#include "rocksdb/write_batch.h"
#include "rocksdb/write_buffer_manager.h"
#include "ttlstate/key_order.h"
#include "ttlstate/record_file.h"
#include "ttlstate/ttl_value.h"

namespace ttlstate {

void CheckStatus(const rocksdb::Status& s, const char* what) {
  if (!s.ok()) throw std::runtime_error(std::string("rocksdb ") + what + ": " + s.ToString());
}

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

struct SharedMemory {
  std::mutex mu;
  MemoryBudget budget{256ull << 20, 0.5};
  std::shared_ptr<rocksdb::Cache> cache;
  std::shared_ptr<rocksdb::WriteBufferManager> write_buffers;

  void EnsureCreated() {  // requires mu
    if (cache) return;
    cache = rocksdb::NewLRUCache(budget.total_bytes, -1, false, 0.1);
    write_buffers = std::make_shared<rocksdb::WriteBufferManager>(
        static_cast<size_t>(budget.total_bytes * budget.write_buffer_ratio), cache);
  }
};

SharedMemory& Memory() {
  static SharedMemory memory;
  return memory;
}

constexpr size_t kApplyChunkBytes = 32u << 20;

void RemoveIfPresent(const std::string& path) { std::remove(path.c_str()); }

}  // namespace

void ConfigureMemory(const MemoryBudget& budget) {
  if (budget.total_bytes < (16u << 20)) throw std::invalid_argument("memory budget below 16 MiB");
  if (!(budget.write_buffer_ratio > 0.0 && budget.write_buffer_ratio < 1.0)) {
    throw std::invalid_argument("write buffer ratio must be in (0, 1)");
  }
  auto& m = Memory();
  std::lock_guard<std::mutex> lock(m.mu);
  m.budget = budget;
  if (m.cache) {
    m.cache->SetCapacity(budget.total_bytes);
    m.write_buffers->SetBufferSize(static_cast<size_t>(budget.total_bytes * budget.write_buffer_ratio));
  }
}

MemoryBudget CurrentMemory() {
  auto& m = Memory();
  std::lock_guard<std::mutex> lock(m.mu);
  return m.budget;
}

uint64_t SharedBlockCacheUsage() {
  auto& m = Memory();
  std::lock_guard<std::mutex> lock(m.mu);
  return m.cache ? m.cache->GetUsage() : 0;
}

uint64_t SharedWriteBufferUsage() {
  auto& m = Memory();
  std::lock_guard<std::mutex> lock(m.mu);
  return m.write_buffers ? m.write_buffers->memory_usage() : 0;
}

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

rocksdb::DB* DbCore::Handle() const {
  if (!db) throw std::runtime_error("rocksdb: database is closed");
  return db.get();
}

std::vector<char> DbCore::Contains(const std::vector<std::string_view>& sorted_keys) {
  std::vector<char> found(sorted_keys.size(), 0);
  constexpr size_t kLookupChunk = 4096;  // bounds the values pinned at once
  for (size_t start = 0; start < sorted_keys.size(); start += kLookupChunk) {
    const size_t end = std::min(sorted_keys.size(), start + kLookupChunk);
    std::vector<rocksdb::Slice> slices;
    slices.reserve(end - start);
    for (size_t i = start; i < end; ++i) slices.emplace_back(sorted_keys[i].data(), sorted_keys[i].size());
    std::vector<rocksdb::PinnableSlice> values(slices.size());
    std::vector<rocksdb::Status> statuses(slices.size());
    {
      std::shared_lock<std::shared_mutex> lock(mu);
      rocksdb::DB* h = Handle();
      h->MultiGet(rocksdb::ReadOptions(), h->DefaultColumnFamily(), slices.size(), slices.data(), values.data(),
                  statuses.data(), /*sorted_input=*/true);
    }
    for (size_t i = 0; i < slices.size(); ++i) {
      if (!statuses[i].IsNotFound()) CheckStatus(statuses[i], "multi_get");
      found[start + i] = statuses[i].ok() ? 1 : 0;
    }
  }
  return found;
}

void DbCore::WriteSorted(const std::vector<SortedWrite>& writes, const std::string& sst_path,
                         size_t ingest_min_keys) {
  WriteSorted(writes.size(), [&](size_t i) { return writes[i]; }, sst_path, ingest_min_keys);
}

void DbCore::WriteSorted(size_t count, const WriteAt& at, const std::string& sst_path, size_t ingest_min_keys) {
  if (count == 0) return;
  auto write_all = [&](auto& sink) {  // a WriteBatch or an SstFileWriter: the same calls
    // The keys and values lie in the order they were written, not in key order: fetch the
    // next ones' bytes ahead (each would otherwise be a cache miss, most of this loop's time).
    constexpr size_t kAhead = 8;
    for (size_t i = 0; i < count; ++i) {
      if (i + kAhead < count) {
        const SortedWrite ahead = at(i + kAhead);
        __builtin_prefetch(ahead.key.data());
        __builtin_prefetch(ahead.value.data());
      }
      const SortedWrite w = at(i);
      const rocksdb::Slice k(w.key.data(), w.key.size());
      CheckStatus(w.put ? sink.Put(k, rocksdb::Slice(w.value.data(), w.value.size())) : sink.Delete(k),
                  w.put ? "put" : "delete");
    }
    return static_cast<uint64_t>(count);
  };
  if (count < ingest_min_keys || sst_path.empty()) {
    rocksdb::WriteBatch batch;
    write_all(batch);
    rocksdb::WriteOptions wo;
    wo.disableWAL = true;  // the local DB is a cache; durability comes from the checkpoint
    std::shared_lock<std::shared_mutex> lock(mu);
    CheckStatus(Handle()->Write(wo, &batch), "write");
    return;
  }
  IngestSst(sst_path, write_all);
}

uint64_t DbCore::IngestSst(const std::string& sst_path, const std::function<uint64_t(rocksdb::SstFileWriter&)>& fill) {
  uint64_t count = 0;
  try {
    rocksdb::SstFileWriter sst(rocksdb::EnvOptions(), options);
    CheckStatus(sst.Open(sst_path), "sst open");
    count = fill(sst);
    if (count > 0) {  // an empty SST cannot be finished; nothing to ingest
      CheckStatus(sst.Finish(), "sst finish");
      rocksdb::IngestExternalFileOptions ingest;
      ingest.move_files = true;
      std::shared_lock<std::shared_mutex> lock(mu);
      CheckStatus(Handle()->IngestExternalFile({sst_path}, ingest), "ingest");
    }
  } catch (...) {
    RemoveIfPresent(sst_path);
    throw;
  }
  RemoveIfPresent(sst_path);  // moved into the DB as a hard link (or never finished): left over
  return count;
}

void DbCore::Register(DbResource* r) {
  std::lock_guard<std::mutex> lock(resources_mu);
  resources.insert(r);
}

void DbCore::Unregister(DbResource* r) {
  std::lock_guard<std::mutex> lock(resources_mu);
  resources.erase(r);
}

DbSnapshot::DbSnapshot(std::shared_ptr<DbCore> core) : core_(std::move(core)) {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  snapshot_ = core_->Handle()->GetSnapshot();
  core_->Register(this);
}

DbSnapshot::~DbSnapshot() {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  core_->Unregister(this);
  if (snapshot_ != nullptr && core_->db) core_->db->ReleaseSnapshot(snapshot_);
}

void DbSnapshot::Invalidate() {
  if (snapshot_ != nullptr && core_->db) core_->db->ReleaseSnapshot(snapshot_);
  snapshot_ = nullptr;
}

std::pair<uint64_t, uint64_t> DbSnapshot::WriteRecordFile(const std::string& path, const std::string& header_json,
                                                          bool drop_expired, int64_t ttl, int64_t now) {
  const rocksdb::Snapshot* snap = nullptr;
  {
    std::shared_lock<std::shared_mutex> lock(core_->mu);
    if (snapshot_ == nullptr) throw std::runtime_error("rocksdb: snapshot used after its database was closed");
    snap = snapshot_;
  }
  Iterator it(core_, std::nullopt, std::nullopt, snap);
  RecordFileWriter out(path, kKindSnapshot, header_json);
  uint64_t dropped = 0;
  size_t chunk = 0;
  bool more = true;
  while (more) {
    chunk = 0;
    more = it.Visit([&](const rocksdb::Slice& key, const rocksdb::Slice& value) {
      const std::string_view v(value.data(), value.size());
      if (drop_expired && IsExpired(TtlTimestamp(v), ttl, now)) {
        ++dropped;
      } else {
        out.Put(std::string_view(key.data(), key.size()), v);
      }
      chunk += key.size() + value.size();
      return chunk < (1u << 20);  // release the lock between chunks: a close may go first
    });
  }
  return {out.Finish(), dropped};
}

Iterator::Iterator(std::shared_ptr<DbCore> core, std::optional<std::string> lower,
                   std::optional<std::string> upper, const rocksdb::Snapshot* snapshot)
    : core_(std::move(core)), lower_(std::move(lower)), upper_(std::move(upper)) {
  rocksdb::ReadOptions ro;
  if (lower_) {
    lower_slice_ = rocksdb::Slice(*lower_);
    ro.iterate_lower_bound = &lower_slice_;
  }
  if (upper_) {
    upper_slice_ = rocksdb::Slice(*upper_);
    ro.iterate_upper_bound = &upper_slice_;
  }
  ro.snapshot = snapshot;
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  it_.reset(core_->Handle()->NewIterator(ro));  // pins an implicit snapshot: a point-in-time view
  if (lower_) it_->Seek(lower_slice_); else it_->SeekToFirst();
  core_->Register(this);
}

Iterator::~Iterator() {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  core_->Unregister(this);
  it_.reset();
}

void Iterator::ThrowClosed() { throw std::runtime_error("rocksdb: iterator used after its database was closed"); }

std::vector<Entry> Iterator::NextChunk(size_t max_bytes) {
  std::vector<Entry> out;
  size_t bytes = 0;
  Visit([&](const rocksdb::Slice& key, const rocksdb::Slice& value) {
    out.emplace_back(key.ToString(), value.ToString());
    bytes += key.size() + value.size();
    return bytes < max_bytes;
  });
  return out;
}

Db::Db(const std::string& path, const DbOptions& o) {
  // Options, explicitly: leveled compaction on block-based tables (so periodic compaction
  // and the filter behave as documented for Flink), lz4 for blocks, Bloom filters so a read
  // of an absent key rarely touches a data block, the process-wide block cache and
  // write-buffer budget, a bounded number of open files per DB.
  auto& memory = Memory();
  std::shared_ptr<rocksdb::Cache> cache;
  {
    std::lock_guard<std::mutex> lock(memory.mu);
    memory.EnsureCreated();
    cache = memory.cache;
    options_.write_buffer_manager = memory.write_buffers;
  }
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
  options_.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  if (o.state_type == StateType::kList) {
    options_.merge_operator = std::make_shared<ListAppendOperator>(o.variable_length_list ? "" : ",");
  }
  if (o.wall_clock) time_->UseWallClock();
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

std::pair<uint64_t, int64_t> Db::ApplyChangelogFile(const std::string& path, KeyHashes* hashes,
                                                    size_t ingest_min_keys, bool count_keys) {
  // Records are gathered in chunks and applied in key order (a later record of a key wins):
  // one sorted MultiGet keeps the key count exact, one sorted WriteBatch writes them. RocksDB's
  // memtable inserts keys in order several times faster than in file order.
  RecordFileReader in(path);
  std::vector<ChangelogRecord> records;
  size_t bytes = 0;
  uint64_t count = 0;
  int64_t delta = 0;
  uint8_t op = 0;
  std::string_view key;
  std::string_view value;
  while (in.Next(&op, &key, &value)) {
    if (hashes != nullptr && op == kRecordPut) hashes->Add(key);
    records.push_back({std::string(key), op == kRecordPut ? std::string(value) : std::string(), op == kRecordPut});
    bytes += key.size() + value.size() + sizeof(ChangelogRecord);
    ++count;
    if (bytes >= kApplyChunkBytes) {
      delta += ApplyInKeyOrder(&records, path + ".replay.sst", ingest_min_keys, count_keys);
      bytes = 0;
    }
  }
  if (!records.empty()) delta += ApplyInKeyOrder(&records, path + ".replay.sst", ingest_min_keys, count_keys);
  return {count, delta};
}

int64_t Db::ApplyInKeyOrder(std::vector<ChangelogRecord>* records, const std::string& sst_path,
                            size_t ingest_min_keys, bool count_keys) {
  auto& recs = *records;
  const std::vector<uint32_t> newest = LastOfEachKey(recs.size(), [&](size_t i) { return std::string_view(recs[i].key); });
  std::vector<const ChangelogRecord*> last;  // the last record of each key, in key order
  last.reserve(newest.size());
  for (const uint32_t i : newest) last.push_back(&recs[i]);
  std::vector<std::string_view> keys;
  keys.reserve(last.size());
  for (const ChangelogRecord* r : last) keys.emplace_back(r->key);
  const std::vector<char> existed = count_keys ? core_->Contains(keys) : std::vector<char>(keys.size(), 0);
  int64_t delta = 0;
  std::vector<SortedWrite> writes;
  writes.reserve(last.size());
  for (size_t i = 0; i < last.size(); ++i) {
    const ChangelogRecord& r = *last[i];
    if (count_keys && r.put && !existed[i]) ++delta;
    if (count_keys && !r.put && existed[i]) --delta;
    writes.push_back({r.key, r.value, r.put});
  }
  core_->WriteSorted(writes, sst_path, ingest_min_keys);
  recs.clear();
  return delta;
}

void Db::Checkpoint(const std::string& dir) {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  rocksdb::Checkpoint* raw = nullptr;
  CheckStatus(rocksdb::Checkpoint::Create(core_->Handle(), &raw), "checkpoint");
  const std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // log_size_for_flush 0: always flush; the WAL is off, so the memtables exist nowhere else.
  CheckStatus(checkpoint->CreateCheckpoint(dir, /*log_size_for_flush=*/0), "checkpoint");
}

namespace {

// Keeps the DB from deleting obsolete files while it lives: a compaction meanwhile (a commit's
// ingestion can start one) must not remove a file a scan of the live files is about to open.
// Counted by RocksDB, so it nests with a checkpoint's own.
class FileDeletionsOff {
 public:
  explicit FileDeletionsOff(DbCore* core) : core_(core) {  // requires core->mu held
    CheckStatus(core_->Handle()->DisableFileDeletions(), "disable file deletions");
  }
  ~FileDeletionsOff() {
    std::shared_lock<std::shared_mutex> lock(core_->mu);
    if (core_->db) core_->db->EnableFileDeletions(/*force=*/false);  // a closed DB has none to keep
  }
  FileDeletionsOff(const FileDeletionsOff&) = delete;
  FileDeletionsOff& operator=(const FileDeletionsOff&) = delete;

 private:
  DbCore* core_;
};

}  // namespace

uint64_t Db::AddKeyHashes(KeyHashes* hashes) {
  // File by file, not through the DB's merging iterator (several times slower over the L0 files
  // a restore opens): a key of an older file that a newer one deletes or rewrites is hashed too,
  // which a Bloom filter of the keys that may be present takes as it is. It may run while a
  // commit's batch goes into the DB (restored_keys.py): the files listed stay until it ends. It
  // stops when the DB begins to close, so a close never waits for more than 4096 keys of it.
  std::vector<rocksdb::LiveFileMetaData> files;
  std::optional<FileDeletionsOff> keep;
  {
    std::shared_lock<std::shared_mutex> lock(core_->mu);
    keep.emplace(core_.get());
    // The memtable's keys (changelogs replayed after the files were opened) into a file first.
    CheckStatus(core_->Handle()->Flush(rocksdb::FlushOptions()), "flush");
    core_->Handle()->GetLiveFilesMetaData(&files);
  }
  uint64_t n = 0;
  uint64_t entries = 0;
  for (const auto& f : files) entries += f.num_entries;
  hashes->Reserve(static_cast<size_t>(entries));
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  ro.verify_checksums = false;  // a restore checked each file whole (CRC32) before opening it
  ro.readahead_size = 2u << 20;
  for (const auto& f : files) {
    std::shared_lock<std::shared_mutex> lock(core_->mu);  // the file stays while the DB is open
    core_->Handle();  // throws if closed
    rocksdb::SstFileReader reader(core_->options);
    CheckStatus(reader.Open(f.db_path + "/" + f.name), "key hashes");
    std::unique_ptr<rocksdb::Iterator> it(reader.NewIterator(ro));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const rocksdb::Slice key = it->key();
      hashes->Add(std::string_view(key.data(), key.size()));
      if ((++n & 4095) == 0 && core_->closing.load(std::memory_order_relaxed)) {
        throw std::runtime_error("rocksdb: database is closed");
      }
    }
    CheckStatus(it->status(), "key hashes");
  }
  return n;
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

uint64_t Db::IntProperty(const std::string& name) {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  uint64_t v = 0;
  if (!core_->Handle()->GetIntProperty(name, &v)) throw std::runtime_error("rocksdb: unknown property " + name);
  return v;
}

uint64_t Db::CountKeys() {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  std::unique_ptr<rocksdb::Iterator> it(core_->Handle()->NewIterator(rocksdb::ReadOptions()));
  uint64_t n = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
  CheckStatus(it->status(), "count");
  return n;
}

}  // namespace ttlstate
