// Replaying a changelog file onto the loaded version: records gathered in chunks and applied in
// key order, with one batched lookup per chunk for the exact key count.
#include <algorithm>
#include <deque>

#include "rocksdb/options.h"
#include "ttlstate/changelog_fold.h"
#include "ttlstate/db.h"
#include "ttlstate/key_order.h"
#include "ttlstate/record_file.h"

namespace ttlstate {

namespace {

constexpr size_t kApplyChunkBytes = 32u << 20;

}  // namespace

std::pair<uint64_t, KeyCount> Db::ApplyChangelogFile(const std::string& path, KeyHashes* hashes,
                                                      size_t ingest_min_keys, bool count_keys) {
  // Records are gathered in chunks and applied in key order (a later record of a key wins):
  // one sorted MultiGet keeps the key count exact, one sorted WriteBatch writes them. RocksDB's
  // memtable inserts keys in order several times faster than in file order.
  RecordFileReader in(path);
  std::vector<ChangelogRecord> records;
  size_t bytes = 0;
  uint64_t count = 0;
  KeyCount delta;
  uint8_t op = 0;
  std::string_view key;
  std::string_view value;
  while (in.Next(&op, &key, &value)) {
    const bool put = op != kRecordDelete;  // an append leaves the key present too
    if (hashes != nullptr && put) hashes->Add(key);
    records.push_back({std::string(key), put ? std::string(value) : std::string(), put, op == kRecordAppend});
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

KeyCount Db::ApplyInKeyOrder(std::vector<ChangelogRecord>* records, const std::string& sst_path,
                             size_t ingest_min_keys, bool count_keys) {
  auto& recs = *records;
  if (std::any_of(recs.begin(), recs.end(), [](const ChangelogRecord& r) { return r.append; })) {
    FoldAppends(records);  // a later record of a key then wins below, as without appends
  }
  const std::vector<uint32_t> newest = LastOfEachKey(recs.size(), [&](size_t i) { return std::string_view(recs[i].key); });
  std::vector<const ChangelogRecord*> last;  // the last record of each key, in key order
  last.reserve(newest.size());
  for (const uint32_t i : newest) last.push_back(&recs[i]);
  std::vector<std::string_view> keys;
  keys.reserve(last.size());
  for (const ChangelogRecord* r : last) keys.emplace_back(r->key);
  const std::vector<char> existed = count_keys ? core_->Contains(keys) : std::vector<char>(keys.size(), 0);
  KeyCount delta;
  std::vector<SortedWrite> writes;
  writes.reserve(last.size());
  for (size_t i = 0; i < last.size(); ++i) {
    const ChangelogRecord& r = *last[i];
    if (count_keys && r.put && !existed[i]) delta.Add(r.key, +1);
    if (count_keys && !r.put && existed[i]) delta.Add(r.key, -1);
    writes.push_back({r.key, r.value, r.put});
  }
  core_->WriteSorted(writes, sst_path, ingest_min_keys);
  recs.clear();
  return delta;
}

void Db::FoldAppends(std::vector<ChangelogRecord>* records) {
  auto& recs = *records;
  std::deque<std::string> made;
  const std::vector<ChangeRecord> folded = FoldByKey(recs.size(), [&](size_t i) {
    const ChangelogRecord& r = recs[i];
    return ChangeRecord{r.append ? kRecordAppend : r.put ? kRecordPut : kRecordDelete, r.key, r.value};
  }, &made);
  std::vector<std::string_view> keys;  // of the appends onto the DB's values, in key order
  for (const ChangeRecord& f : folded) {
    if (f.op == kRecordAppend) keys.push_back(f.key);
  }
  std::vector<std::optional<std::string>> base(keys.size());
  core_->Lookup(keys, [&](size_t j, const rocksdb::PinnableSlice* v) {
    if (v != nullptr) base[j].emplace(v->data(), v->size());
  });
  std::vector<ChangelogRecord> out;
  out.reserve(folded.size());
  size_t j = 0;
  for (const ChangeRecord& f : folded) {
    if (f.op == kRecordAppend) {
      const auto& b = base[j++];
      const auto value = ApplyAppend(b ? std::optional<std::string_view>(*b) : std::nullopt, f.value);
      out.push_back({std::string(f.key), value, true});
    } else {
      out.push_back({std::string(f.key), std::string(f.value), f.op == kRecordPut});
    }
  }
  recs = std::move(out);
}

}  // namespace ttlstate
