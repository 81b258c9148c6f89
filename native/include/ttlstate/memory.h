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
