// The corruption RocksDB reported to this process's reads and writes (a failed block checksum,
// a bad footer), kept by the file it names until the store of that file's DB asks. Most reads
// never reach Python (the native serve loop answers them), so this is how the store learns that
// the batch that failed read a damaged file: its next load then restores from the checkpoint, and
// checks the checkpoint's copy when the file was read in place (store/sst_snapshots.py).
#pragma once

#include <string>
#include <vector>

namespace ttlstate {

// Records `message` (a Corruption status's text: CheckStatus) if it names a file.
void NoteCorruption(const std::string& message);

struct Corruption {
  std::string path;     // the file RocksDB named
  std::string message;  // what it said
};
// The corruptions noted since the last call for files in the directory `dir` (one per file: the
// first message).
std::vector<Corruption> TakeCorruptions(const std::string& dir);

}  // namespace ttlstate
