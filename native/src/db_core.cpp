// What a Db shares with its iterators and snapshots (DbCore): the handle under its lock, the
// batched lookups and the sorted writes (a WriteBatch, or an SST file ingested) that commits,
// changelog replays and restores go through.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <stdexcept>

#include "rocksdb/options.h"
#include "rocksdb/sst_file_writer.h"
#include "rocksdb/write_batch.h"
#include "ttlstate/corruptions.h"
#include "ttlstate/db.h"

namespace ttlstate {

void CheckStatus(const rocksdb::Status& s, const char* what) {
  if (s.ok()) return;
  std::string message = s.ToString();
  if (s.IsCorruption()) NoteCorruption(message);
  throw std::runtime_error(std::string("rocksdb ") + what + ": " + message);
}

namespace {

void RemoveIfPresent(const std::string& path) { std::remove(path.c_str()); }

}  // namespace

rocksdb::DB* DbCore::Handle() const {
  if (!db) throw std::runtime_error("rocksdb: database is closed");
  return db.get();
}

std::vector<char> DbCore::Contains(const std::vector<std::string_view>& sorted_keys) {
  std::vector<char> found(sorted_keys.size(), 0);
  Lookup(sorted_keys, [&](size_t i, const rocksdb::PinnableSlice* value) { found[i] = value != nullptr ? 1 : 0; });
  return found;
}

void DbCore::Lookup(const std::vector<std::string_view>& sorted_keys, const Found& found) {
  constexpr size_t kLookupChunk = 4096;  // bounds the values pinned at once
  std::vector<rocksdb::Slice> slices;
  std::vector<rocksdb::PinnableSlice> values;
  std::vector<rocksdb::Status> statuses;
  for (size_t start = 0; start < sorted_keys.size(); start += kLookupChunk) {
    const size_t end = std::min(sorted_keys.size(), start + kLookupChunk);
    slices.clear();
    for (size_t i = start; i < end; ++i) slices.emplace_back(sorted_keys[i].data(), sorted_keys[i].size());
    values = std::vector<rocksdb::PinnableSlice>(slices.size());
    statuses.assign(slices.size(), rocksdb::Status());
    {
      std::shared_lock<std::shared_mutex> lock(mu);
      rocksdb::DB* h = Handle();
      h->MultiGet(rocksdb::ReadOptions(), h->DefaultColumnFamily(), slices.size(), slices.data(), values.data(),
                  statuses.data(), /*sorted_input=*/true);
    }
    for (size_t i = 0; i < slices.size(); ++i) {
      if (!statuses[i].IsNotFound()) CheckStatus(statuses[i], "multi_get");
      found(start + i, statuses[i].ok() ? &values[i] : nullptr);
    }
  }
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

}  // namespace ttlstate
