// The data plane's connections to the shim's range service, which reads byte ranges of
// checkpoint files through Hadoop (RANGE_READ in python/ttlstate/server/protocol.py): a small
// pool of connections per service, each used by one reading thread at a time, so RocksDB's
// background jobs read as well as a request's thread. mapped_files.h reads placeholders with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

namespace ttlstate {

// The file system's own checksums reject the file's bytes (RANGE_CORRUPT): damage, not a failure.
struct RangeCorrupt : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class RangePool;

// The pool of the range service listening at `socket` (one per socket for the process).
std::shared_ptr<RangePool> RangePoolFor(const std::string& socket);

// Reads up to `n` bytes of `uri` at `offset` into `scratch`: how many (fewer only at the file's
// end), or nothing when the file does not exist. RangeCorrupt as above; std::runtime_error when
// the service or its file system fails (its message names the file).
std::optional<size_t> ReadRange(RangePool& pool, const std::string& uri, uint64_t offset, size_t n, char* scratch);

struct RangeTotals {
  uint64_t requests = 0;
  uint64_t bytes = 0;
  uint64_t connections = 0;
};
// Since the process started, over every pool.
RangeTotals RangeReadTotals();

}  // namespace ttlstate
