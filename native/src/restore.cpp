#include "ttlstate/restore.h"

#include <deque>
#include <shared_mutex>
#include <stdexcept>
#include <string_view>

#include "rocksdb/sst_file_writer.h"
#include "ttlstate/changelog_fold.h"
#include "ttlstate/key_order.h"
#include "ttlstate/record_file.h"

namespace ttlstate {
namespace {

[[noreturn]] void Corrupt(const std::string& path, const std::string& why) {
  throw std::runtime_error("checkpoint file " + path + " is corrupt (" + why + ")");
}

// The snapshot's records in order, refusing anything but strictly ascending puts.
class SnapshotStream {
 public:
  explicit SnapshotStream(const std::string& path) : path_(path) {
    if (!path.empty()) reader_ = std::make_unique<RecordFileReader>(path);
  }
  bool Next() {
    if (!reader_) return false;
    if (valid_) previous_.assign(key_.data(), key_.size());
    uint8_t op = 0;
    valid_ = reader_->Next(&op, &key_, &value_);
    if (!valid_) return false;
    if (op != kRecordPut) Corrupt(path_, op == kRecordDelete ? "a delete in a snapshot" : "an append in a snapshot");
    if (count_ > 0 && std::string_view(previous_) >= key_) Corrupt(path_, "snapshot keys out of order");
    ++count_;
    return true;
  }
  std::string_view key() const { return key_; }
  std::string_view value() const { return value_; }
  uint64_t count() const { return count_; }
  uint64_t expected_count() const { return reader_ ? reader_->expected_count() : 0; }

 private:
  std::string path_;
  std::unique_ptr<RecordFileReader> reader_;
  std::string_view key_;
  std::string_view value_;
  std::string previous_;
  uint64_t count_ = 0;
  bool valid_ = false;
};

}  // namespace

uint64_t RestoreBuilder::AddChangelog(const std::string& path) {
  if (finished_) throw std::logic_error("restore already finished");
  RecordFileReader in(path);
  writes_.reserve(writes_.size() + in.expected_count());
  uint8_t op = 0;
  std::string_view key;
  std::string_view value;
  uint64_t count = 0;
  while (in.Next(&op, &key, &value)) {
    const bool put = op != kRecordDelete;
    if (op == kRecordAppend) appends_.push_back(static_cast<uint32_t>(writes_.size()));
    writes_.push_back({arena_.Copy(key), put ? arena_.Copy(value) : std::string_view(), put});
    ++count;
  }
  return count;
}

RestoreBuilder::Result RestoreBuilder::Finish(const std::string& snapshot_path, const std::string& sst_path,
                                              KeyHashes* hashes) {
  if (finished_) throw std::logic_error("restore already finished");
  finished_ = true;
  const std::vector<uint32_t> newest = appends_.empty()
      ? LastOfEachKey(writes_.size(), [&](size_t i) { return writes_[i].key; }) : std::vector<uint32_t>();
  std::vector<const SortedWrite*> last;  // the last record of each key, in key order
  last.reserve(newest.size());
  for (const uint32_t i : newest) last.push_back(&writes_[i]);
  // With appends, each key's records folded instead; `appended[i]`: last[i] appends to the
  // snapshot's value of its key (none: to nothing).
  std::deque<std::string> made;
  std::vector<SortedWrite> folded;
  std::vector<char> appended;
  if (!appends_.empty()) {
    std::vector<char> is_append(writes_.size(), 0);
    for (const uint32_t i : appends_) is_append[i] = 1;
    for (const ChangeRecord& f : FoldByKey(writes_.size(), [&](size_t i) {
           const SortedWrite& w = writes_[i];
           return ChangeRecord{is_append[i] ? kRecordAppend : w.put ? kRecordPut : kRecordDelete, w.key, w.value};
         }, &made)) {
      folded.push_back({f.key, f.value, f.op != kRecordDelete});
      appended.push_back(f.op == kRecordAppend ? 1 : 0);
    }
    for (const SortedWrite& w : folded) last.push_back(&w);
  }
  {
    std::shared_lock<std::shared_mutex> lock(core_->mu);
    std::unique_ptr<rocksdb::Iterator> it(core_->Handle()->NewIterator(rocksdb::ReadOptions()));
    it->SeekToFirst();
    if (it->Valid()) throw std::logic_error("a restore builds a DB from nothing; this one is not empty");
  }
  SnapshotStream snapshot(snapshot_path);
  if (hashes != nullptr) hashes->Reserve(snapshot.expected_count() + last.size());
  uint64_t keys = 0;
  uint64_t internal = 0;
  core_->IngestSst(sst_path, [&](rocksdb::SstFileWriter& sst) {
    auto put = [&](std::string_view k, std::string_view v) {
      CheckStatus(sst.Put(rocksdb::Slice(k.data(), k.size()), rocksdb::Slice(v.data(), v.size())), "sst put");
      if (hashes != nullptr) hashes->Add(k);
      ++keys;
      if (IsInternalKey(k)) ++internal;
    };
    auto next = last.begin();
    // The changelogs' (folded) record of a key whose snapshot value is `base` (none: absent).
    auto change = [&](std::optional<std::string_view> base) {
      const SortedWrite& w = **next;
      if (!appended.empty() && appended[next - last.begin()]) put(w.key, ApplyAppend(base, w.value));
      else if (w.put) put(w.key, w.value);
    };
    while (snapshot.Next()) {
      for (; next != last.end() && (*next)->key < snapshot.key(); ++next) change(std::nullopt);
      if (next != last.end() && (*next)->key == snapshot.key()) {  // the changelog's record wins
        change(snapshot.value());
        ++next;
      } else {
        put(snapshot.key(), snapshot.value());
      }
    }
    for (; next != last.end(); ++next) change(std::nullopt);
    return keys;
  });
  writes_ = {};
  appends_ = {};
  arena_.Clear();
  return {snapshot.count(), keys, internal};
}

}  // namespace ttlstate
