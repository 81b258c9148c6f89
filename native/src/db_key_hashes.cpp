// The key filter hashes of every key of a DB opened on an SST snapshot's files, read back file
// by file on a low-priority thread (python/ttlstate/store/restored_keys.py).
#include <optional>
#include <stdexcept>

#include "rocksdb/options.h"
#include "rocksdb/sst_file_reader.h"
#include "ttlstate/db.h"

namespace ttlstate {

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
  // Checked here too: a restore that reads the files in place (in_place.py) checks them whole
  // only in the background, and a damaged key must never reach the filter.
  ro.verify_checksums = true;
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

}  // namespace ttlstate
