// One version of one store as a task sees it, natively: the batch's pending writes, every read
// path with Flink's TTL rules, scans, incremental cleanup, and the commit's two halves (the
// changelog file, then the atomic apply). The Python reference implementation, with the same
// semantics, is python/ttlstate/store/state_store.py; the same model tests run on both.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ttlstate/arena.h"
#include "ttlstate/db.h"
#include "ttlstate/key_kind.h"
#include "ttlstate/pending_index.h"
#include "ttlstate/record_file.h"

namespace ttlstate {

struct TtlRules {
  bool enabled = false;
  int64_t ttl = 0;
  bool update_on_read = false;   // OnReadAndWrite
  bool return_expired = false;   // ReturnExpiredIfNotCleanedUp
  int64_t incremental_size = 0;  // 0: no incremental cleanup
  bool incremental_per_record = false;
};

// Where incremental cleanup resumes; owned by the store (it survives versions), shared here.
struct CleanupCursor {
  std::optional<std::string> next;
};

struct TxnCounters {
  int64_t expired_on_read = 0;
  int64_t removed_incremental = 0;
  int64_t pending_bytes = 0;
};

class Txn;

// What a scan emits: the entries TTL shows (user bytes), every key alone, or every entry as
// stored (its TtlValue, expired ones included).
enum class ScanKind : uint8_t { kVisible, kKeys, kStored };

// A scan of a transaction's view: the pending writes as of its creation merged over a
// point-in-time DB iterator; for kVisible, TTL hides (and deletes) expired entries, never
// refreshes them.
class Scan {
 public:
  using Emit = std::function<void(std::string_view key, const std::string* value)>;
  Scan(std::shared_ptr<Txn> txn, std::vector<std::pair<std::string, std::optional<std::string>>> overlay,
       std::unique_ptr<Iterator> db, ScanKind kind);
  // Emits entries until about `max_bytes` were emitted; true when the scan is exhausted.
  bool Next(size_t max_bytes, const Emit& emit);

 private:
  std::shared_ptr<Txn> txn_;
  std::vector<std::pair<std::string, std::optional<std::string>>> overlay_;
  size_t overlay_pos_ = 0;
  std::unique_ptr<Iterator> db_;
  std::vector<Entry> db_buf_;
  size_t db_pos_ = 0;
  bool db_done_ = false;
  ScanKind kind_ = ScanKind::kVisible;
};

class Txn : public std::enable_shared_from_this<Txn> {
 public:
  // `log_operations` (a store with column families, transformWithState's): the changelog logs
  // every put, delete and append in the order made, as Spark's RocksDB provider does; else it
  // holds each written key once.
  Txn(std::shared_ptr<DbCore> core, std::string store_label, int64_t version, int64_t now, bool writable,
      TtlRules rules, std::shared_ptr<CleanupCursor> cursor, bool log_operations = false);

  // Reads: the user bytes (the TtlValue's timestamp stripped), or nothing.
  std::optional<std::string> Get(std::string_view key);
  // Get, and the entry's last-access time after the read (0 if absent): what the shim's
  // cross-batch cache keeps to apply TTL itself in later batches.
  std::optional<std::string> GetEntry(std::string_view key, int64_t* ts);
  // GetEntry of each key, with the same results (a key given twice included); the keys the
  // pending writes do not answer are looked up in the committed DB together (the read-ahead).
  std::vector<std::optional<std::string>> GetEntries(const std::vector<std::string_view>& keys,
                                                     std::vector<int64_t>* ts);
  // The shim's cache found `key` expired: delete it if it is stored and expired now, counted
  // as expired on read.
  void RemoveIfExpired(std::string_view key);
  std::vector<std::optional<std::string>> MultiGet(const std::vector<std::string_view>& keys);
  // What the caller proved about the key in the committed DB: absent (the shim's key filter)
  // or present (a live entry of the shim's cache); either way the commit needs no read to keep
  // the key count exact.
  enum class Committed : int8_t { kUnknown = -1, kAbsent = 0, kPresent = 1 };
  void Put(std::string_view key, std::string_view value, Committed known = Committed::kUnknown);
  // A put of a whole TtlValue as given (its timestamp is not restamped with now), of a key the
  // committed DB does not have: a store loaded empty that `ttlstate repartition` fills.
  void PutEntry(std::string_view key, std::string_view ttl_value);
  void Remove(std::string_view key);
  // The key's value (read as Get reads it; none: empty) followed by `more`: a column family's
  // ListState merge. Logged as an append of `more` when a replay of the log computes the same
  // value, else as a put of the whole value.
  void Append(std::string_view key, std::string_view more);
  std::unique_ptr<Scan> NewScan(std::optional<std::string> lower, std::optional<std::string> upper);
  // Every key of the committed DB (expired ones too), values omitted: what the shim's key filter needs.
  std::unique_ptr<Scan> NewKeyScan();
  // Every entry of the committed DB as stored (key, TtlValue), expired ones too, no side effects:
  // what `ttlstate repartition` moves to another store.
  std::unique_ptr<Scan> NewStoredScan();

  void MakeWritable();
  void CheckOpen() const;      // throws StateError naming the store, version and state
  void CheckWritable() const;
  void IncrementalStep();  // checks the next `incremental_size` committed entries after the cursor
  // Commit: the changelog; returns the record count. It was encoded as the writes arrived: each
  // key once (unless a key was written twice: then it is encoded in key order now from the
  // pending writes), or with `log_operations` every write (a second attempt, after a failed
  // write, encodes the pending writes in key order).
  uint64_t WriteChangelog(const std::string& path, const std::string& header_json);
  // Commit: the pending writes applied atomically, in key order (a large batch as an SST file
  // written at `sst_path` and ingested, when given); returns the change in keys (all, and the
  // internal families'). `end`: the
  // transaction then ends "committed"; otherwise the caller ends it (End) once the changelog
  // is written, which may run on another thread at the same time as this: both only read the
  // pending writes, and the key order is computed once for both (the first to need it).
  KeyCount Apply(const std::string& sst_path = "", bool end = true);
  // The change in keys Apply will return, when the reads, the key filter or the cache already
  // told whether each written key is in the committed DB; nothing when one needs a lookup.
  // Kept as the writes arrive, so it costs nothing at commit.
  std::optional<KeyCount> KnownDelta() const;
  // Ends the transaction ("aborted", "released", "superseded" ...): later calls fail.
  void End(const char* state);

  const TxnCounters& counters() const { return counters_; }
  size_t pending_writes() const { return written_; }
  int64_t version() const { return version_; }
  int64_t now() const { return now_; }
  // Real-time Mode: moves this transaction's "now" forward to `now` (never back); returns the
  // time TTL uses from here on. Pending writes keep the time they were stamped with.
  int64_t AdvanceNow(int64_t now);
  bool writable() const { return writable_; }
  std::string state() const;

  // Used by scans: TTL applied to one stored value (may delete it in this transaction).
  std::optional<std::string> Visible(std::string_view key, std::string_view stored, bool refresh,
                                     int64_t* ts = nullptr);

 private:
  enum class Op : uint8_t { kNone, kPut, kDelete };
  // Keys and values live in the arena; an entry is about 64 bytes plus them.
  struct Pending {
    const char* stored = nullptr;  // the TtlValue of a put
    uint32_t stored_size = 0;
    Op op = Op::kNone;  // kNone: only a read marker
    int8_t in_db = -1;  // the committed DB had the key: -1 unknown, 0 no, 1 yes
    bool internal = false;  // a key of an internal column family (key_kind.h)
    std::string_view value() const { return {stored, stored_size}; }
  };
  Pending& Entry(std::string_view key);  // finds or inserts (copying the key into the arena)

  // `appended` (with `log_operations`): the user bytes an append added, logged instead of a put.
  void WritePending(std::string_view key, Op op, std::string_view stored,
                    std::optional<std::string_view> appended = std::nullopt);
  // Whether a replay of the operation log finds `current` (none: empty) as the key's value: it
  // reads the key's last logged put or delete in this transaction, else the committed DB.
  bool ReplayFinds(std::string_view key, const std::optional<std::string>& current) const;
  // Every change of a written entry's op or presence goes through these, keeping KnownDelta's
  // sums: `sign` -1 takes the entry's share out, +1 puts it back.
  void Account(const Pending& p, int64_t sign);
  void SetInDb(Pending& p, int8_t in_db);
  // The positions in pending_ of the written keys (read markers left out) in key order:
  // computed once for the commit, by whichever of WriteChangelog and Apply comes first (they
  // may run concurrently), and again only if a key was written since.
  const std::vector<uint32_t>& WritesInKeyOrder();
  // Fetches what a loop over `order` reads a few steps ahead of step i: a record further on,
  // and the key and value bytes of a nearer one (records lie in write order, not key order).
  void PrefetchAhead(const std::vector<uint32_t>& order, size_t i) const;
  std::optional<std::string> ReadOne(std::string_view key, int64_t* ts = nullptr);
  // ReadOne of each key, the committed DB's lookups batched; no incremental cleanup step.
  std::vector<std::optional<std::string>> ReadMany(const std::vector<std::string_view>& keys,
                                                   std::vector<int64_t>* ts);
  // The pending entry that answers a read of `key` (a write, or a read that found it absent);
  // nullptr when the read must look in the committed DB.
  const Pending* PendingAnswer(std::string_view key) const;
  // A read of `key` as its pending entry `p` answers it.
  std::optional<std::string> FromPending(std::string_view key, const Pending& p, int64_t* ts);
  // A read of `key` as the committed DB answers it (`stored`).
  std::optional<std::string> FromDb(std::string_view key, std::optional<std::string_view> stored, int64_t* ts);
  std::optional<std::string> DbGet(std::string_view key);

  std::shared_ptr<DbCore> core_;
  std::string label_;
  int64_t version_;
  int64_t now_;
  bool writable_;
  TtlRules rules_;
  std::shared_ptr<CleanupCursor> cursor_;
  Arena arena_;
  PendingIndex<Pending> pending_;
  size_t written_ = 0;
  int64_t unknown_ = 0;      // written keys whose presence in the committed DB is unknown
  KeyCount known_delta_;  // the change in keys the other written keys make
  // The changelog's body, encoded as the writes arrive; dropped once a key is written twice (a
  // changelog holds each key once, so the commit then encodes it from the pending writes).
  std::optional<RecordEncoder> changelog_;
  bool rewritten_ = false;
  bool log_operations_ = false;
  std::mutex sorted_mu_;
  std::vector<uint32_t> sorted_;
  size_t sorted_for_ = static_cast<size_t>(-1);  // written_ when sorted_ was computed
  // The written keys (in the arena) in key order, kept from the transaction's first scan on, so
  // that a scan takes the writes of its range without visiting every write: transformWithState
  // scans one grouping key's timers per key, and visiting all of the batch's writes each time
  // made its batches quadratic. None before a first scan: a batch that never scans pays nothing.
  std::optional<std::set<std::string_view>> written_in_order_;
  TxnCounters counters_;
  std::atomic<const char*> ended_{nullptr};
};

}  // namespace ttlstate
