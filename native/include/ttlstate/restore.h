// Building a store's state from nothing: its newest snapshot and the changelogs after it.
//
// Replaying a changelog onto a loaded DB must look up every key it writes (to keep the key
// count exact), and each replayed file is ingested as one more overlapping SST file. Built from
// nothing, none of that is needed: the changelogs are gathered in memory (a key's records fold
// in file order: a later put or delete wins, an append adds to the value so far), then the
// snapshot, already sorted, is streamed through them into one SST file. Every key is written
// once, the key count is the number written, and the DB starts as one file in its bottom level.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ttlstate/arena.h"
#include "ttlstate/db.h"
#include "ttlstate/key_hash.h"
#include "ttlstate/key_kind.h"

namespace ttlstate {

class RestoreBuilder {
 public:
  explicit RestoreBuilder(std::shared_ptr<DbCore> core) : core_(std::move(core)) {}

  // Gathers a changelog file's records (files in version order); returns how many it holds.
  uint64_t AddChangelog(const std::string& path);
  // Bytes of memory the gathered records take.
  size_t gathered_bytes() const { return arena_.allocated_bytes() + writes_.capacity() * sizeof(SortedWrite); }

  struct Result {
    uint64_t snapshot_records;  // read from the snapshot file
    uint64_t keys;              // stored in the DB afterwards
    uint64_t internal_keys;     // of them, the internal column families' (key_kind.h)
  };
  // Writes the snapshot at `snapshot_path` (empty: none, the state starts empty) with the
  // gathered changelogs applied over it as one SST file at `sst_path`, and ingests it into the
  // DB, which must be empty. Adds every key stored to `hashes` when given. Once.
  Result Finish(const std::string& snapshot_path, const std::string& sst_path, KeyHashes* hashes);

 private:
  std::shared_ptr<DbCore> core_;
  Arena arena_;
  std::vector<SortedWrite> writes_;  // views into arena_, in file order
  std::vector<uint32_t> appends_;    // the positions in writes_ of appends (put: true), ascending
  bool finished_ = false;
};

}  // namespace ttlstate
