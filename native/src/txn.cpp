#include "ttlstate/txn.h"

#include <algorithm>
#include <cstring>

#include "rocksdb/write_batch.h"
#include "ttlstate/errors.h"
#include "ttlstate/key_order.h"
#include "ttlstate/record_file.h"
#include "ttlstate/ttl_value.h"

namespace ttlstate {
namespace {

// What a transaction buffers before compressing its changelog: small, since every open
// writable transaction holds one.
constexpr size_t kChangelogEncodeChunk = 64 * 1024;

}  // namespace

Txn::Txn(std::shared_ptr<DbCore> core, std::string store_label, int64_t version, int64_t now, bool writable,
         TtlRules rules, std::shared_ptr<CleanupCursor> cursor, bool log_operations)
    : core_(std::move(core)), label_(std::move(store_label)), version_(version), now_(now), writable_(writable),
      rules_(rules), cursor_(std::move(cursor)), log_operations_(log_operations) {}

std::string Txn::state() const {
  const char* ended = ended_.load(std::memory_order_acquire);
  return ended == nullptr ? "open" : ended;
}

void Txn::CheckOpen() const {
  const char* ended = ended_.load(std::memory_order_acquire);
  if (ended != nullptr) {
    throw StateError("ttlstate store " + label_ + " version " + std::to_string(version_) + " is " + ended +
                     "; no further operations are allowed");
  }
}

void Txn::CheckWritable() const {
  CheckOpen();
  if (!writable_) {
    throw StateError("ttlstate store " + label_ + " version " + std::to_string(version_) + " is read-only");
  }
}

void Txn::End(const char* state) {
  const char* expected = nullptr;
  ended_.compare_exchange_strong(expected, state, std::memory_order_acq_rel);
  if (expected == nullptr) {
    written_in_order_.reset();
    pending_.Clear();
    {
      std::lock_guard<std::mutex> lock(sorted_mu_);
      sorted_ = {};
      sorted_for_ = static_cast<size_t>(-1);
    }
    arena_.Clear();
    written_ = 0;
    unknown_ = 0;
    known_delta_ = {};
    changelog_.reset();
  }
}

int64_t Txn::AdvanceNow(int64_t now) {
  CheckOpen();
  if (now > now_) now_ = now;
  return now_;
}

void Txn::MakeWritable() {
  CheckOpen();
  writable_ = true;
}

Txn::Pending& Txn::Entry(std::string_view key) {
  Pending& p = pending_.FindOrInsert(key, [this](std::string_view k) { return arena_.Copy(k); }).value;
  p.internal = IsInternalKey(key);
  return p;
}

void Txn::WritePending(std::string_view key, Op op, std::string_view stored,
                       std::optional<std::string_view> appended) {
  auto& record = pending_.FindOrInsert(key, [this](std::string_view k) { return arena_.Copy(k); });
  Pending& p = record.value;
  p.internal = IsInternalKey(key);
  if (p.op == Op::kNone) {
    ++written_;
    if (written_in_order_) written_in_order_->insert(record.key);
  }
  if (log_operations_ || (p.op == Op::kNone && !rewritten_)) {
    if (!changelog_) changelog_.emplace(kChangelogZstdLevel, kChangelogEncodeChunk);
    if (appended) changelog_->Append(key, TtlTimestamp(stored), *appended);
    else if (op == Op::kPut) changelog_->Put(key, stored);
    else changelog_->Delete(key);
  } else if (!rewritten_) {
    rewritten_ = true;
    changelog_.reset();
  }
  counters_.pending_bytes += static_cast<int64_t>(key.size() + stored.size());
  Account(p, -1);
  p.op = op;
  Account(p, +1);
  p.stored = stored.data();
  p.stored_size = static_cast<uint32_t>(stored.size());
}

std::optional<std::string> Txn::DbGet(std::string_view key) {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  std::string value;
  const auto s = core_->Handle()->Get(rocksdb::ReadOptions(), rocksdb::Slice(key.data(), key.size()), &value);
  if (s.IsNotFound()) return std::nullopt;
  CheckStatus(s, "get");
  return value;
}

std::optional<std::string> Txn::Visible(std::string_view key, std::string_view stored, bool refresh,
                                        int64_t* ts_out) {
  const int64_t ts = TtlTimestamp(stored);
  if (ts_out != nullptr) *ts_out = ts;
  if (!rules_.enabled) return std::string(TtlUserBytes(stored));
  if (IsExpired(ts, rules_.ttl, now_)) {
    ++counters_.expired_on_read;
    std::optional<std::string> out;
    if (rules_.return_expired) out = std::string(TtlUserBytes(stored));
    if (writable_) WritePending(key, Op::kDelete, std::string_view());
    return out;
  }
  std::string user(TtlUserBytes(stored));
  if (refresh && rules_.update_on_read && writable_ && ts != now_) {
    WritePending(key, Op::kPut, arena_.CopyTtlValue(now_, user));
    if (ts_out != nullptr) *ts_out = now_;
  }
  return user;
}

const Txn::Pending* Txn::PendingAnswer(std::string_view key) const {
  const auto* entry = pending_.Find(key);
  if (entry == nullptr || (entry->value.op == Op::kNone && entry->value.in_db != 0)) return nullptr;
  return &entry->value;
}

std::optional<std::string> Txn::ReadOne(std::string_view key, int64_t* ts) {
  if (ts != nullptr) *ts = 0;
  if (const Pending* p = PendingAnswer(key)) return FromPending(key, *p, ts);
  const auto stored = DbGet(key);
  return FromDb(key, stored ? std::optional<std::string_view>(*stored) : std::nullopt, ts);
}

std::optional<std::string> Txn::FromPending(std::string_view key, const Pending& p, int64_t* ts) {
  if (p.op != Op::kPut) return std::nullopt;  // deleted in this batch, or known absent
  return Visible(key, p.value(), true, ts);   // the arena keeps it if Visible rewrites the entry
}

std::optional<std::string> Txn::FromDb(std::string_view key, std::optional<std::string_view> stored, int64_t* ts) {
  if (writable_) SetInDb(Entry(key), stored ? 1 : 0);  // the commit then needs no read
  if (!stored) return std::nullopt;
  auto out = Visible(key, *stored, true, ts);
  if (!out && ts != nullptr) *ts = 0;
  return out;
}

std::vector<std::optional<std::string>> Txn::GetEntries(const std::vector<std::string_view>& keys,
                                                        std::vector<int64_t>* ts) {
  CheckOpen();
  if (!(rules_.incremental_per_record && writable_)) return ReadMany(keys, ts);
  std::vector<std::optional<std::string>> out(keys.size());  // a cleanup step before each read, as GetEntry does
  ts->assign(keys.size(), 0);
  for (size_t i = 0; i < keys.size(); ++i) {
    IncrementalStep();
    out[i] = ReadOne(keys[i], &(*ts)[i]);
  }
  return out;
}

std::vector<std::optional<std::string>> Txn::ReadMany(const std::vector<std::string_view>& keys,
                                                      std::vector<int64_t>* ts) {
  std::vector<std::optional<std::string>> out(keys.size());
  if (ts != nullptr) ts->assign(keys.size(), 0);
  auto ts_of = [&](size_t i) { return ts == nullptr ? nullptr : &(*ts)[i]; };
  // The keys the pending writes cannot answer, looked up in the committed DB together: one
  // sorted MultiGet shares its filter probes, block lookups and locking among them.
  std::vector<uint32_t> asked;
  for (uint32_t i = 0; i < keys.size(); ++i) {
    if (PendingAnswer(keys[i]) == nullptr) asked.push_back(i);
  }
  std::sort(asked.begin(), asked.end(), [&](uint32_t a, uint32_t b) { return keys[a] < keys[b]; });
  std::vector<std::string_view> sorted;
  sorted.reserve(asked.size());
  for (const uint32_t i : asked) sorted.push_back(keys[i]);
  std::vector<std::optional<std::string>> stored(keys.size());
  core_->Lookup(sorted, [&](size_t j, const rocksdb::PinnableSlice* value) {
    if (value != nullptr) stored[asked[j]].emplace(value->data(), value->size());
  });
  // In request order, so a key asked twice reads what its first read wrote (a refresh, a
  // delete). A key the pending writes answered when asked still has its entry: entries are
  // never removed, only rewritten.
  for (size_t i = 0; i < keys.size(); ++i) {
    const Pending* p = PendingAnswer(keys[i]);
    out[i] = p != nullptr ? FromPending(keys[i], *p, ts_of(i)) : FromDb(keys[i], stored[i], ts_of(i));
  }
  return out;
}

std::optional<std::string> Txn::GetEntry(std::string_view key, int64_t* ts) {
  CheckOpen();
  if (rules_.incremental_per_record && writable_) IncrementalStep();
  return ReadOne(key, ts);
}

void Txn::RemoveIfExpired(std::string_view key) {
  CheckWritable();
  if (!rules_.enabled) return;
  const auto* entry = pending_.Find(key);
  if (entry != nullptr && entry->value.op != Op::kNone) return;  // written in this batch
  const auto stored = DbGet(key);
  if (stored && IsExpired(TtlTimestamp(*stored), rules_.ttl, now_)) {
    ++counters_.expired_on_read;
    WritePending(key, Op::kDelete, std::string_view());
    SetInDb(Entry(key), 1);
  }
}

std::optional<std::string> Txn::Get(std::string_view key) {
  CheckOpen();
  if (rules_.incremental_per_record && writable_) IncrementalStep();
  return ReadOne(key);
}

std::vector<std::optional<std::string>> Txn::MultiGet(const std::vector<std::string_view>& keys) {
  CheckOpen();
  if (rules_.incremental_per_record && writable_) IncrementalStep();
  return ReadMany(keys, nullptr);
}

void Txn::Put(std::string_view key, std::string_view value, Committed known) {
  CheckWritable();
  if (rules_.incremental_per_record) IncrementalStep();
  WritePending(key, Op::kPut, arena_.CopyTtlValue(now_, value));
  if (known != Committed::kUnknown) {
    Pending& entry = Entry(key);
    if (entry.in_db < 0) SetInDb(entry, static_cast<int8_t>(known));
  }
}

void Txn::PutEntry(std::string_view key, std::string_view ttl_value) {
  CheckWritable();
  if (ttl_value.size() < kTimestampSize) {
    throw StoreError(protocol::kErrBadRequest, "a whole TtlValue has at least " +
                     std::to_string(kTimestampSize) + " bytes, this one " + std::to_string(ttl_value.size()));
  }
  WritePending(key, Op::kPut, arena_.Copy(ttl_value));
  Pending& entry = Entry(key);
  if (entry.in_db < 0) SetInDb(entry, static_cast<int8_t>(Committed::kAbsent));
}

void Txn::Remove(std::string_view key) {
  CheckWritable();
  if (rules_.incremental_per_record) IncrementalStep();
  WritePending(key, Op::kDelete, std::string_view());
}

void Txn::Append(std::string_view key, std::string_view more) {
  CheckWritable();
  const std::optional<std::string> current = Get(key);
  if (rules_.incremental_per_record) IncrementalStep();
  std::string value = current.value_or(std::string());
  value.append(more.data(), more.size());
  const std::string_view stored = arena_.CopyTtlValue(now_, value);
  if (log_operations_ && ReplayFinds(key, current)) {
    WritePending(key, Op::kPut, stored, stored.substr(stored.size() - more.size()));  // logs `more` appended
  } else {
    WritePending(key, Op::kPut, stored);
  }
}

bool Txn::ReplayFinds(std::string_view key, const std::optional<std::string>& current) const {
  const auto* entry = pending_.Find(key);
  // The committed DB's entry, as a replay finds it; with TTL the live DB's compaction may have
  // dropped an expired entry that a replay finds, so only a whole value is safe then.
  if (entry == nullptr || entry->value.op == Op::kNone) return !rules_.enabled;
  const Pending& p = entry->value;
  const std::string_view base = p.op == Op::kPut ? TtlUserBytes(p.value()) : std::string_view();
  return base == (current ? std::string_view(*current) : std::string_view());
}

std::unique_ptr<Scan> Txn::NewScan(std::optional<std::string> lower, std::optional<std::string> upper) {
  CheckOpen();
  if (!written_in_order_) {
    written_in_order_.emplace();
    for (const auto& [key, p] : pending_) {
      if (p.op != Op::kNone) written_in_order_->insert(key);
    }
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> overlay;  // in key order
  auto it = lower ? written_in_order_->lower_bound(std::string_view(*lower)) : written_in_order_->begin();
  for (; it != written_in_order_->end() && (!upper || *it < std::string_view(*upper)); ++it) {
    const Pending& p = pending_.Find(*it)->value;
    overlay.emplace_back(std::string(*it),
                         p.op == Op::kPut ? std::optional<std::string>(p.value()) : std::nullopt);
  }
  auto db = std::make_unique<Iterator>(core_, std::move(lower), std::move(upper));
  return std::make_unique<Scan>(shared_from_this(), std::move(overlay), std::move(db), ScanKind::kVisible);
}

std::unique_ptr<Scan> Txn::NewKeyScan() {
  CheckOpen();
  auto db = std::make_unique<Iterator>(core_, std::nullopt, std::nullopt);
  return std::make_unique<Scan>(shared_from_this(), std::vector<std::pair<std::string, std::optional<std::string>>>(),
                                std::move(db), ScanKind::kKeys);
}

std::unique_ptr<Scan> Txn::NewStoredScan() {
  CheckOpen();
  auto db = std::make_unique<Iterator>(core_, std::nullopt, std::nullopt);
  return std::make_unique<Scan>(shared_from_this(), std::vector<std::pair<std::string, std::optional<std::string>>>(),
                                std::move(db), ScanKind::kStored);
}

void Txn::IncrementalStep() {
  if (!rules_.enabled || rules_.incremental_size <= 0 || !writable_) return;
  Iterator it(core_, cursor_->next, std::nullopt);
  int64_t checked = 0;
  std::optional<std::string> last;
  it.Visit([&](const rocksdb::Slice& k, const rocksdb::Slice& v) {
    ++checked;
    last = k.ToString();
    const auto* entry = pending_.Find(*last);
    const bool written = entry != nullptr && entry->value.op != Op::kNone;
    if (!written && IsExpired(TtlTimestamp(std::string_view(v.data(), v.size())), rules_.ttl, now_)) {
      WritePending(*last, Op::kDelete, std::string_view());
      SetInDb(Entry(*last), 1);
      ++counters_.removed_incremental;
    }
    return checked < rules_.incremental_size;
  });
  if (!last || checked < rules_.incremental_size) {
    cursor_->next.reset();  // reached the end: wrap around
  } else {
    last->push_back('\0');
    cursor_->next = std::move(last);
  }
}

const std::vector<uint32_t>& Txn::WritesInKeyOrder() {
  std::lock_guard<std::mutex> lock(sorted_mu_);
  if (sorted_for_ == written_) return sorted_;
  std::vector<uint32_t> written;
  written.reserve(written_);
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (pending_[i].value.op != Op::kNone) written.push_back(static_cast<uint32_t>(i));
  }
  sorted_ = KeyOrder(written.size(), [&](size_t j) { return pending_[written[j]].key; });
  for (uint32_t& i : sorted_) i = written[i];
  sorted_for_ = written_;
  return sorted_;
}

void Txn::PrefetchAhead(const std::vector<uint32_t>& order, size_t i) const {
  constexpr size_t kRecordAhead = 16;
  constexpr size_t kBytesAhead = 8;  // its record was fetched kRecordAhead - kBytesAhead steps ago
  if (i + kRecordAhead < order.size()) __builtin_prefetch(&pending_[order[i + kRecordAhead]]);
  if (i + kBytesAhead < order.size()) {
    const auto& ahead = pending_[order[i + kBytesAhead]];
    __builtin_prefetch(ahead.key.data());
    __builtin_prefetch(ahead.value.stored);
  }
}

uint64_t Txn::WriteChangelog(const std::string& path, const std::string& header_json) {
  CheckWritable();
  if (changelog_) {
    RecordEncoder body = std::move(*changelog_);
    changelog_.reset();  // a second attempt (after a failed write) encodes from the pending writes
    RecordFileWriter out(path, kKindChangelog, header_json, std::move(body));
    return out.Finish();
  }
  // In key order (a changelog holds each key once, so the order carries no meaning): the same
  // order Apply needs, computed once, and one that compresses a little better.
  RecordFileWriter out(path, kKindChangelog, header_json, kChangelogZstdLevel);
  const std::vector<uint32_t>& writes = WritesInKeyOrder();
  for (size_t i = 0; i < writes.size(); ++i) {
    PrefetchAhead(writes, i);
    const auto& [key, p] = pending_[writes[i]];
    if (p.op == Op::kPut) out.Put(key, p.value());
    else if (p.op == Op::kDelete) out.Delete(key);
  }
  return out.Finish();
}

void Txn::Account(const Pending& p, int64_t sign) {
  if (p.op == Op::kNone) return;
  int64_t change = 0;
  if (p.in_db < 0) unknown_ += sign;
  else if (p.op == Op::kPut && p.in_db == 0) change = sign;
  else if (p.op == Op::kDelete && p.in_db == 1) change = -sign;
  known_delta_.keys += change;
  if (p.internal) known_delta_.internal += change;
}

void Txn::SetInDb(Pending& p, int8_t in_db) {
  Account(p, -1);
  p.in_db = in_db;
  Account(p, +1);
}

std::optional<KeyCount> Txn::KnownDelta() const {
  CheckWritable();
  if (unknown_ > 0) return std::nullopt;
  return known_delta_;
}

KeyCount Txn::Apply(const std::string& sst_path, bool end) {
  CheckWritable();
  // In key order: a large batch becomes an SST file, which needs it; a small one goes through
  // RocksDB's memtable, whose skiplist reuses the previous insert's position (its "splice")
  // when keys arrive sorted; the lookups below also walk the DB in order.
  const std::vector<uint32_t>& writes = WritesInKeyOrder();
  // Keys whose presence in the committed DB is unknown (written without being read) are looked
  // up together; reads, the key filter's proofs and the executor's cache answered the others.
  // The writes are read in place, never copied: a commit's memory is its 4-byte positions.
  std::vector<size_t> unknown;
  std::vector<std::string_view> unknown_keys;
  for (size_t i = 0; i < writes.size(); ++i) {
    if (i + 8 < writes.size()) __builtin_prefetch(&pending_[writes[i + 8]]);
    const auto& [key, p] = pending_[writes[i]];
    if (p.in_db < 0) {
      unknown.push_back(i);
      unknown_keys.push_back(key);
    }
  }
  const std::vector<char> stored = core_->Contains(unknown_keys);
  std::vector<char> found(writes.size(), 0);
  for (size_t i = 0; i < unknown.size(); ++i) found[unknown[i]] = stored[i];
  KeyCount delta;
  for (size_t i = 0; i < writes.size(); ++i) {
    if (i + 8 < writes.size()) __builtin_prefetch(&pending_[writes[i + 8]]);
    const Pending& p = pending_[writes[i]].value;
    const bool existed = p.in_db >= 0 ? p.in_db == 1 : found[i] == 1;
    const bool put = p.op == Op::kPut;
    const int64_t change = put && !existed ? 1 : (!put && existed ? -1 : 0);
    delta.keys += change;
    if (p.internal) delta.internal += change;
  }
  core_->WriteSorted(writes.size(), [&](size_t i) {
    if (i + 8 < writes.size()) __builtin_prefetch(&pending_[writes[i + 8]]);
    const auto& [key, p] = pending_[writes[i]];
    const bool put = p.op == Op::kPut;
    return SortedWrite{key, put ? p.value() : std::string_view(), put};
  }, sst_path);
  if (end) End("committed");
  return delta;
}

Scan::Scan(std::shared_ptr<Txn> txn, std::vector<std::pair<std::string, std::optional<std::string>>> overlay,
           std::unique_ptr<Iterator> db, ScanKind kind)
    : txn_(std::move(txn)), overlay_(std::move(overlay)), db_(std::move(db)), kind_(kind) {}

bool Scan::Next(size_t max_bytes, const Emit& emit) {
  size_t bytes = 0;
  while (bytes < max_bytes) {
    if (db_pos_ == db_buf_.size() && !db_done_) {
      db_buf_ = db_->NextChunk(64 * 1024);
      db_pos_ = 0;
      if (db_buf_.empty()) db_done_ = true;
    }
    const bool have_db = db_pos_ < db_buf_.size();
    const bool have_overlay = overlay_pos_ < overlay_.size();
    if (!have_db && !have_overlay) return true;
    const std::string* key = nullptr;
    const std::string* stored = nullptr;
    if (have_overlay && (!have_db || overlay_[overlay_pos_].first <= db_buf_[db_pos_].first)) {
      auto& [k, v] = overlay_[overlay_pos_++];
      if (have_db && db_buf_[db_pos_].first == k) ++db_pos_;  // the pending write shadows the DB
      key = &k;
      stored = v ? &*v : nullptr;
    } else {
      auto& [k, v] = db_buf_[db_pos_++];
      key = &k;
      stored = &v;
    }
    if (stored == nullptr) continue;  // deleted in this transaction
    if (kind_ == ScanKind::kKeys) {
      emit(*key, nullptr);
      bytes += key->size() + 8;
      continue;
    }
    if (kind_ == ScanKind::kStored) {
      emit(*key, stored);
      bytes += key->size() + stored->size() + 8;
      continue;
    }
    const auto user = txn_->Visible(*key, *stored, false);
    if (!user) continue;
    emit(*key, &*user);
    bytes += key->size() + user->size() + 8;
  }
  return false;
}

}  // namespace ttlstate
