// Views of a Db that outlive no close: a pinned snapshot (written as a record file) and a
// range iterator, both invalidated by Db::Close.
#include <optional>
#include <stdexcept>

#include "ttlstate/db.h"
#include "ttlstate/record_file.h"
#include "ttlstate/ttl_value.h"

namespace ttlstate {

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

}  // namespace ttlstate
