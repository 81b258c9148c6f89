// The memory every DB of the process shares: one block cache, which memtables are charged to
// (RocksDB's WriteBufferManager), sized by the worker's budget (`memory.maxBytes`).
#include "ttlstate/memory.h"

#include <mutex>
#include <stdexcept>

#include "rocksdb/cache.h"
#include "rocksdb/write_buffer_manager.h"

namespace ttlstate {

namespace {

struct Shared {
  std::mutex mu;
  MemoryBudget budget{256ull << 20, 0.5};
  std::shared_ptr<rocksdb::Cache> cache;
  std::shared_ptr<rocksdb::WriteBufferManager> write_buffers;

  void EnsureCreated() {  // requires mu
    if (cache) return;
    cache = rocksdb::NewLRUCache(budget.total_bytes, BlockCacheShardBits(budget.total_bytes), false, 0.1);
    write_buffers = std::make_shared<rocksdb::WriteBufferManager>(
        static_cast<size_t>(budget.total_bytes * budget.write_buffer_ratio), cache);
  }
};

Shared& Memory() {
  static Shared memory;
  return memory;
}

}  // namespace

int BlockCacheShardBits(uint64_t capacity) {
  int bits = 0;
  while (bits < kMaxBlockCacheShardBits && (capacity >> (bits + 1)) >= kMinBlockCacheShardBytes) ++bits;
  return bits;
}

void ConfigureMemory(const MemoryBudget& budget) {
  if (budget.total_bytes < (16u << 20)) throw std::invalid_argument("memory budget below 16 MiB");
  if (!(budget.write_buffer_ratio > 0.0 && budget.write_buffer_ratio < 1.0)) {
    throw std::invalid_argument("write buffer ratio must be in (0, 1)");
  }
  auto& m = Memory();
  std::lock_guard<std::mutex> lock(m.mu);
  m.budget = budget;
  if (m.cache) {
    m.cache->SetCapacity(budget.total_bytes);
    m.write_buffers->SetBufferSize(static_cast<size_t>(budget.total_bytes * budget.write_buffer_ratio));
  }
}

MemoryBudget CurrentMemory() {
  auto& m = Memory();
  std::lock_guard<std::mutex> lock(m.mu);
  return m.budget;
}

uint64_t SharedBlockCacheUsage() {
  auto& m = Memory();
  std::lock_guard<std::mutex> lock(m.mu);
  return m.cache ? m.cache->GetUsage() : 0;
}

uint64_t SharedWriteBufferUsage() {
  auto& m = Memory();
  std::lock_guard<std::mutex> lock(m.mu);
  return m.write_buffers ? m.write_buffers->memory_usage() : 0;
}

SharedMemory AttachSharedMemory() {
  auto& m = Memory();
  std::lock_guard<std::mutex> lock(m.mu);
  m.EnsureCreated();
  return {m.cache, m.write_buffers};
}

}  // namespace ttlstate
