// SST files a restore opened in place on a checkpoint only the shim reaches (HDFS, S3A, ...):
// each is a sparse local placeholder of the file's size (no blocks on disk), registered here by
// its inode with the checkpoint file's URI, and RocksDB's reads of it are byte ranges the shim's
// range service reads through Hadoop (range_client.h). A local SST file the DB wrote becomes one
// too once it is uploaded and evicted to bound the local disk (EvictToSource).
//
// Why a placeholder per file rather than a file system of names: everything RocksDB and the
// store do with a file besides reading it (listing the directory, its size, a checkpoint's hard
// link, a compaction's unlink, removing the directory) then works as for any local file, and a
// hard link shares the inode, so a snapshot's link of a placeholder is read in place too. Only
// opening a file for reading looks at the registry (MappedFileSystem), and it checks the file is
// still the placeholder it registered (same size and modification time), so a reused inode never
// maps.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "ttlstate/protocol.h"

namespace rocksdb {
class Env;
}

namespace ttlstate {

struct MappedSource {
  std::string socket;  // the shim's range service
  std::string uri;     // the checkpoint file
  uint64_t size = 0;
};

// Creates `local` (which must not exist) as a placeholder of `source.size` bytes read from
// `source`.
void AddMappedFile(const std::string& local, const MappedSource& source);
// The checkpoint file `local` reads, if it is a registered placeholder.
std::optional<MappedSource> MappedSourceOf(const std::string& local);
// The local SST file `local` (one the DB wrote, whose copy `source` the checkpoint holds) is read
// from `source` from now on and its local blocks are freed, so it becomes a placeholder: readers
// RocksDB holds open switch over once their reads in progress end (every local SST file of a DB
// opened on MappedEnv is read through a switch). An empty `source.socket`: `source.uri` is a
// local path, read directly. Returns the bytes freed: 0 when the file is gone (a compaction
// removed it) or a placeholder already.
uint64_t EvictToSource(const std::string& local, const MappedSource& source);
// Forgets the placeholders registered under the directory `dir` (a local DB dropped): their
// inodes may be reused once the files are gone.
void ForgetMappedFiles(const std::string& dir);

// The checkpoint file `source` names read whole, through its range service or (an empty
// socket) itself: the check a retry of a restore makes (store/in_place.py): its size and the zlib CRC-32 of its first source.size
// bytes, or that it is missing, or that its file system's checksums reject it (and why).
struct WholeFile {
  // The outcomes of a range read (protocol.h's RANGE_*), which the C ABI passes on as they are.
  enum Outcome { kRead = protocol::kRangeData, kMissing = protocol::kRangeMissing, kCorrupt = protocol::kRangeCorrupt };
  Outcome outcome;
  uint64_t size;
  uint32_t crc;
  std::string problem;
};
WholeFile MappedFileCrc32(const MappedSource& source);

// The placeholder `local` (a restored file or an evicted one) gets its checkpoint file's bytes,
// read whole, and is read from the local disk from then on: the reverse of EvictToSource, so a
// store opened in place comes back to the local disk in the background. RocksDB's open readers
// of it switch over too (every placeholder is read through one). Nothing changes unless the copy
// is whole: `uri` and `crc` (the zlib CRC-32 of its recorded size) are what its snapshot named;
// a copy that differs, is missing or is rejected by its file system's checksums is reported, and
// the file stays a placeholder with its blocks freed, as when the fill stops because the file is
// gone (a compaction removed it, its directory was forgotten). A failed read of the file system
// throws, leaving it a placeholder.
struct Filled {
  bool switched = false;           // read from the local disk now
  std::optional<WholeFile> whole;  // what was read of the checkpoint's file; nothing: not (any more) its placeholder
};
Filled FillFromSource(const std::string& local, const std::string& uri, uint32_t crc);

struct MappedReadCounters {
  uint64_t requests = 0;  // of checkpoint files, in place
  uint64_t bytes = 0;
  uint64_t connections = 0;
  uint64_t local_requests = 0;  // of local SST files (TakeMappedReads only)
  uint64_t local_bytes = 0;
};
// Counted since the process started, over every placeholder.
MappedReadCounters MappedReads();
// Counted for the SST files in the directory `dir` since the last call (a store's metrics).
MappedReadCounters TakeMappedReads(const std::string& dir);

// The Env of a DB that may hold placeholders: the default one, except that opening a
// placeholder for reading reads through the range service. One for the process, never freed
// (open DBs and their background threads may outlive any owner).
rocksdb::Env* MappedEnv();

}  // namespace ttlstate
