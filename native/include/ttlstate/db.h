// A RocksDB instance with the TTL compaction filter, and the engine-level operations the data
// plane needs: point reads, atomic batches, range iteration, consistent snapshots written as
// record files, bulk-loaded restores and natively applied changelogs.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rocksdb/db.h"
#include "rocksdb/sst_file_writer.h"
#include "ttlstate/compaction_filter.h"
#include "ttlstate/key_hash.h"
#include "ttlstate/key_kind.h"
#include "ttlstate/memory.h"

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
  // The directory may hold placeholders read in place (mapped_files.h): open it on MappedEnv.
  bool mapped_reads = false;
};

using Entry = std::pair<std::string, std::string>;

// Something a Db must invalidate before it closes (iterators, snapshots).
class DbResource {
 public:
  virtual ~DbResource() = default;
  virtual void Invalidate() = 0;  // called by Db::Close with DbCore::mu held exclusively
};

// One write of a batch in key order: a put of `value`, or a delete.
struct SortedWrite {
  std::string_view key;
  std::string_view value;
  bool put;
};

// What a Db and its iterators and snapshots share: closing the DB first invalidates each of
// them, so one that outlives `close()` fails cleanly instead of crashing RocksDB.
struct DbCore {
  std::shared_mutex mu;  // shared: every use of `db`; exclusive: close
  std::unique_ptr<rocksdb::DB> db;
  // Set when close begins: a long reader (a key scan on a low-priority thread) stops early
  // instead of making close wait for it.
  std::atomic<bool> closing{false};
  rocksdb::Options options;  // as the DB was opened (SST files for ingestion are written with it)
  std::mutex resources_mu;
  std::set<DbResource*> resources;
  rocksdb::DB* Handle() const;  // requires mu held; throws if closed
  // Whether each key is stored, for keys in ascending order (one batched lookup per chunk):
  // what a commit or a changelog replay needs to keep the key count exact.
  std::vector<char> Contains(const std::vector<std::string_view>& sorted_keys);
  // Looks up keys given in ascending order, a chunk per batched lookup, and hands each result
  // to `found(i, value)` (value null when absent; valid only during the call).
  using Found = std::function<void(size_t i, const rocksdb::PinnableSlice* value)>;
  void Lookup(const std::vector<std::string_view>& sorted_keys, const Found& found);
  // Writes distinct keys given in ascending order, atomically. At least `ingest_min_keys` of
  // them (and an `sst_path`) are written as one SST file there and ingested above everything
  // stored (a newer sequence number: they win as later writes do); fewer go through the
  // memtable. This RocksDB's memtable inserts cost microseconds per key; an SST file is written
  // sequentially, and the memtable's flush, which would write the same file later, is saved.
  static constexpr size_t kIngestMinKeys = 4096;
  void WriteSorted(const std::vector<SortedWrite>& writes, const std::string& sst_path,
                   size_t ingest_min_keys = kIngestMinKeys);
  // The same for `count` writes read one at a time through `at(i)`, so a caller that holds
  // them elsewhere (a transaction) need not copy them into a vector first.
  using WriteAt = std::function<SortedWrite(size_t)>;
  void WriteSorted(size_t count, const WriteAt& at, const std::string& sst_path,
                   size_t ingest_min_keys = kIngestMinKeys);
  // Writes an SST file at `sst_path` through `fill` (which returns the entries it wrote) and
  // ingests it unless empty; the file is gone afterwards, also on failure. Returns the entries.
  uint64_t IngestSst(const std::string& sst_path, const std::function<uint64_t(rocksdb::SstFileWriter&)>& fill);
  void Register(DbResource* r);
  void Unregister(DbResource* r);
};

void CheckStatus(const rocksdb::Status& s, const char* what);

// A pinned, consistent view of the DB (RocksDB snapshot).
class DbSnapshot : public DbResource {
 public:
  explicit DbSnapshot(std::shared_ptr<DbCore> core);
  ~DbSnapshot() override;
  DbSnapshot(const DbSnapshot&) = delete;
  DbSnapshot& operator=(const DbSnapshot&) = delete;
  void Invalidate() override;
  const rocksdb::Snapshot* get() const { return snapshot_; }
  const std::shared_ptr<DbCore>& core() const { return core_; }
  // Writes the view as a snapshot record file (sorted puts), leaving out entries expired at
  // `now` when `drop_expired`. Holds no lock longer than one chunk. Returns (written, dropped).
  std::pair<uint64_t, uint64_t> WriteRecordFile(const std::string& path, const std::string& header_json,
                                                bool drop_expired, int64_t ttl, int64_t now);

 private:
  std::shared_ptr<DbCore> core_;
  const rocksdb::Snapshot* snapshot_ = nullptr;
};

// Ascending entries of [lower, upper) as of its creation (or of `snapshot`).
class Iterator : public DbResource {
 public:
  Iterator(std::shared_ptr<DbCore> core, std::optional<std::string> lower, std::optional<std::string> upper,
           const rocksdb::Snapshot* snapshot = nullptr);
  ~Iterator() override;
  Iterator(const Iterator&) = delete;
  Iterator& operator=(const Iterator&) = delete;
  // Up to `max_bytes` of entries (at least one if any remain); empty when exhausted.
  std::vector<Entry> NextChunk(size_t max_bytes);
  // Calls visit(key, value) per entry, holding the DB's shared lock, until visit returns false
  // (that entry counts as consumed) or the range ends. True if entries remain.
  template <typename Visitor>
  bool Visit(Visitor&& visit) {
    std::shared_lock<std::shared_mutex> lock(core_->mu);
    if (!it_) ThrowClosed();
    while (it_->Valid()) {
      const bool go_on = visit(it_->key(), it_->value());
      it_->Next();
      if (!go_on) break;
    }
    CheckStatus(it_->status(), "iterate");
    return it_->Valid();
  }
  void Invalidate() override { it_.reset(); }

 private:
  [[noreturn]] static void ThrowClosed();
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
  std::unique_ptr<DbSnapshot> NewSnapshot();
  // Replays a changelog onto the loaded version in atomic chunks; returns (records, change in
  // the number of keys: all, and the internal families'). Each chunk goes through DbCore::WriteSorted (an SST file beside `path`
  // when large). Adds the key of every put to `hashes` when given (what the shim's key filter
  // is filled from after a restore). A restore from nothing uses RestoreBuilder instead.
  // `count_keys` false: no lookups, the change returned is 0 (the caller knows the count after
  // the file from elsewhere: the next changelog's header).
  std::pair<uint64_t, KeyCount> ApplyChangelogFile(const std::string& path, KeyHashes* hashes = nullptr,
                                                  size_t ingest_min_keys = DbCore::kIngestMinKeys,
                                                  bool count_keys = true);
  // A RocksDB checkpoint of the DB in `dir` (which must not exist), memtables flushed first:
  // its SST files are hard links to the DB's (copies across file systems), so it costs
  // metadata, not data; what a snapshot of SST files uploads from.
  void Checkpoint(const std::string& dir);
  // Adds every stored key to `hashes`, and possibly keys deleted since (what the shim's key filter
  // is filled from after a restore that opened SST files instead of building them); returns the
  // number of keys added.
  uint64_t AddKeyHashes(KeyHashes* hashes);
  void CompactAll();
  void Flush();
  // Reads every SST file's index and filter blocks into the block cache with up to `threads`
  // reads at once, a level at a time, instead of one at a time as a batch's first lookups
  // would: after a restore in place each is a round trip to the checkpoint's file system.
  void WarmMetadata(size_t threads);
  uint64_t IntProperty(const std::string& name);
  KeyCount CountKeys();  // by a scan of every key
  void SetTime(int64_t now_ms) { time_->Set(now_ms); }
  const FilterCounters& Counters() const { return *counters_; }
  bool HasFilter() const { return has_filter_; }
  const std::shared_ptr<DbCore>& core() const { return core_; }
  void Close();

 private:
  struct ChangelogRecord {
    std::string key;
    std::string value;
    bool put;             // a put, or an append (`append`); else a delete
    bool append = false;  // `value` appends to the key's value (changelog_fold.h)
  };
  // A chunk that holds appends becomes one put or delete per key (appends onto the DB's values).
  void FoldAppends(std::vector<ChangelogRecord>* records);
  // Applies a chunk of changelog records (a later record of a key wins) in key order, then
  // clears it; returns the change in the number of keys.
  KeyCount ApplyInKeyOrder(std::vector<ChangelogRecord>* records, const std::string& sst_path,
                          size_t ingest_min_keys, bool count_keys);

  std::shared_ptr<TimeSource> time_ = std::make_shared<TimeSource>();
  std::shared_ptr<FilterCounters> counters_ = std::make_shared<FilterCounters>();
  std::shared_ptr<DbCore> core_ = std::make_shared<DbCore>();
  rocksdb::Options options_;
  bool has_filter_ = false;
};

std::unique_ptr<FilterConfig> MakeFilterConfig(StateType state_type, size_t timestamp_offset, int64_t ttl,
                                               int64_t query_time_after_num_entries,
                                               int64_t fixed_element_length, bool variable_length_list);

}  // namespace ttlstate
