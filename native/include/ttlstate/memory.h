// The memory budget every DB of the process (a state server worker) shares.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "rocksdb/cache.h"
#include "rocksdb/write_buffer_manager.h"

namespace ttlstate {

// One block cache and one write-buffer budget for every DB of the process (a state server
// worker), as Spark's RocksDB provider bounds memory per executor: memtables are charged to
// the cache, so their sum plus cached blocks stays under `total_bytes`.
struct MemoryBudget {
  size_t total_bytes;
  double write_buffer_ratio;
};
// The block cache's shards: as many as leave each at least kMinBlockCacheShardBytes (one shard
// below twice that). RocksDB's own choice (shards of 512 KiB and up, at most 64) gives a 128 MiB
// cache shards of 2 MiB, and a block larger than its shard (the Bloom filter of an SST of a few
// million keys) is evicted as soon as its read ends: every lookup then re-reads the filter from
// the file. A worker has a handful of threads, so few shards cost no contention.
constexpr uint64_t kMinBlockCacheShardBytes = 32ull << 20;
constexpr int kMaxBlockCacheShardBits = 6;
int BlockCacheShardBits(uint64_t capacity);

// Applies to DBs opened afterwards; the first call (or the default) fixes the shared objects.
void ConfigureMemory(const MemoryBudget& budget);
MemoryBudget CurrentMemory();
uint64_t SharedBlockCacheUsage();
uint64_t SharedWriteBufferUsage();

// The shared objects a DB is opened with (created on the first call, from the budget then).
struct SharedMemory {
  std::shared_ptr<rocksdb::Cache> cache;
  std::shared_ptr<rocksdb::WriteBufferManager> write_buffers;
};
SharedMemory AttachSharedMemory();

}  // namespace ttlstate
