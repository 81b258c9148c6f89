// Replaying a changelog file onto the loaded version: records gathered in chunks and applied in
// key order, with one batched lookup per chunk for the exact key count.
#include "rocksdb/options.h"
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

KeyCount Db::ApplyInKeyOrder(std::vector<ChangelogRecord>* records, const std::string& sst_path,
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

}  // namespace ttlstate
