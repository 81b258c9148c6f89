// Placeholders read in place through the shim's range service (mapped_files.h).
#include "ttlstate/mapped_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "ttlstate/posix_fd.h"
#include "ttlstate/range_client.h"

namespace ttlstate {

namespace {

// --- the registry ----------------------------------------------------------------------------

// Range reads of the placeholders of one DB directory, since last taken (TakeMappedReads).
struct DirReads {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> bytes{0};
};

struct Registered {
  MappedSource source;
  std::string path;  // where it was registered (ForgetMappedFiles)
  std::shared_ptr<DirReads> reads;
};

using InodeKey = std::pair<uint64_t, uint64_t>;  // (st_dev, st_ino)

InodeKey KeyOf(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

std::mutex g_registry_mu;
std::map<InodeKey, Registered>& Registry() {
  static std::map<InodeKey, Registered> registry;
  return registry;
}
// By DB directory (a placeholder's parent folder); under g_registry_mu.
std::map<std::string, std::shared_ptr<DirReads>>& ReadsByDir() {
  static std::map<std::string, std::shared_ptr<DirReads>> reads;
  return reads;
}

std::string WithoutTrailingSlash(const std::string& dir) {
  return !dir.empty() && dir.back() == '/' ? dir.substr(0, dir.size() - 1) : dir;
}

std::string ParentOf(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

// The registered placeholder `local` still is, if it is one (under g_registry_mu).
const Registered* Lookup(const std::string& local) {
  struct stat st {};
  if (::stat(local.c_str(), &st) != 0) return nullptr;
  const auto it = Registry().find(KeyOf(st));
  if (it == Registry().end()) return nullptr;
  // Still the placeholder: the size it was given and nothing written (a file that reuses a
  // forgotten placeholder's inode has its own blocks, or another size).
  if (static_cast<uint64_t>(st.st_size) != it->second.source.size || st.st_blocks != 0) return nullptr;
  return &it->second;
}

// --- RocksDB's view ----------------------------------------------------------------------------

class MappedRandomAccessFile : public rocksdb::FSRandomAccessFile {
 public:
  MappedRandomAccessFile(MappedSource source, std::shared_ptr<DirReads> reads, std::string local)
      : source_(std::move(source)), reads_(std::move(reads)), local_(std::move(local)),
        pool_(RangePoolFor(source_.socket)) {}

  rocksdb::IOStatus Read(uint64_t offset, size_t n, const rocksdb::IOOptions& /*options*/,
                         rocksdb::Slice* result, char* scratch, rocksdb::IODebugContext* /*dbg*/) const override {
    if (offset >= source_.size) {
      *result = rocksdb::Slice(scratch, 0);
      return rocksdb::IOStatus::OK();
    }
    n = static_cast<size_t>(std::min<uint64_t>(n, source_.size - offset));
    try {
      size_t got = 0;
      while (got < n) {  // the service answers in full but at the file's end; a short file is damage
        const std::optional<size_t> more = ReadRange(*pool_, source_.uri, offset + got, n - got, scratch + got);
        if (!more) throw std::runtime_error("checkpoint file " + source_.uri + " does not exist");
        reads_->requests.fetch_add(1, std::memory_order_relaxed);
        reads_->bytes.fetch_add(*more, std::memory_order_relaxed);
        if (*more == 0) break;
        got += *more;
      }
      *result = rocksdb::Slice(scratch, got);
      return rocksdb::IOStatus::OK();
    } catch (const RangeCorrupt& e) {  // RocksDB reports it as it reports a block checksum mismatch
      return rocksdb::IOStatus::Corruption("reading " + local_ + " in place from " + source_.uri, e.what());
    } catch (const std::exception& e) {
      return rocksdb::IOStatus::IOError("reading " + local_ + " in place from " + source_.uri, e.what());
    }
  }

 private:
  const MappedSource source_;
  const std::shared_ptr<DirReads> reads_;
  const std::string local_;
  const std::shared_ptr<RangePool> pool_;
};

class MappedFileSystem : public rocksdb::FileSystemWrapper {
 public:
  MappedFileSystem() : rocksdb::FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  static const char* kClassName() { return "TtlstateMappedFileSystem"; }
  const char* Name() const override { return kClassName(); }

  rocksdb::IOStatus NewRandomAccessFile(const std::string& f, const rocksdb::FileOptions& opts,
                                        std::unique_ptr<rocksdb::FSRandomAccessFile>* r,
                                        rocksdb::IODebugContext* dbg) override {
    std::unique_lock<std::mutex> lock(g_registry_mu);
    if (const Registered* placeholder = Lookup(f)) {
      *r = std::make_unique<MappedRandomAccessFile>(placeholder->source, placeholder->reads, f);
      return rocksdb::IOStatus::OK();
    }
    lock.unlock();
    return target()->NewRandomAccessFile(f, opts, r, dbg);
  }

  rocksdb::IOStatus NewSequentialFile(const std::string& f, const rocksdb::FileOptions& opts,
                                      std::unique_ptr<rocksdb::FSSequentialFile>* r,
                                      rocksdb::IODebugContext* dbg) override {
    // Never expected for an SST file (a checkpoint hard-links them); refused rather than read
    // as the placeholder's zeros.
    if (auto source = MappedSourceOf(f)) {
      return rocksdb::IOStatus::NotSupported(f + " is read in place from " + source->uri +
                                             "; it cannot be read sequentially");
    }
    return target()->NewSequentialFile(f, opts, r, dbg);
  }
};

}  // namespace

void AddMappedFile(const std::string& local, const MappedSource& source) {
  UniqueFd fd(::open(local.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) throw std::runtime_error(ErrnoMessage("creating " + local));
  if (::ftruncate(fd.get(), static_cast<off_t>(source.size)) != 0) throw std::runtime_error(ErrnoMessage("sizing " + local));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw std::runtime_error(ErrnoMessage("stat " + local));
  std::lock_guard<std::mutex> lock(g_registry_mu);
  auto& reads = ReadsByDir()[ParentOf(local)];
  if (!reads) reads = std::make_shared<DirReads>();
  Registry()[KeyOf(st)] = Registered{source, local, reads};  // a reused inode's old entry is replaced
}

std::optional<MappedSource> MappedSourceOf(const std::string& local) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  const Registered* placeholder = Lookup(local);
  if (placeholder == nullptr) return std::nullopt;
  return placeholder->source;
}

void ForgetMappedFiles(const std::string& dir) {
  const std::string trimmed = WithoutTrailingSlash(dir);
  const std::string prefix = trimmed + "/";
  std::lock_guard<std::mutex> lock(g_registry_mu);
  for (auto it = Registry().begin(); it != Registry().end();) {
    it = it->second.path.compare(0, prefix.size(), prefix) == 0 ? Registry().erase(it) : std::next(it);
  }
  for (auto it = ReadsByDir().begin(); it != ReadsByDir().end();) {
    const bool under = it->first == trimmed || it->first.compare(0, prefix.size(), prefix) == 0;
    it = under ? ReadsByDir().erase(it) : std::next(it);
  }
}

MappedReadCounters TakeMappedReads(const std::string& dir) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  const auto it = ReadsByDir().find(WithoutTrailingSlash(dir));
  if (it == ReadsByDir().end()) return {};
  return {it->second->requests.exchange(0), it->second->bytes.exchange(0), 0};
}

WholeFile MappedFileCrc32(const MappedSource& source) {
  constexpr size_t kChunk = 4 << 20;
  const auto pool = RangePoolFor(source.socket);
  std::vector<char> buf(kChunk);
  uLong crc = ::crc32(0L, Z_NULL, 0);
  uint64_t offset = 0;
  // Past the recorded size too: bytes appended to the file are no damage (a copying restore
  // truncates them), but the size is reported as read.
  for (;;) {
    std::optional<size_t> read;
    try {
      read = ReadRange(*pool, source.uri, offset, kChunk, buf.data());
    } catch (const RangeCorrupt& e) {
      return {WholeFile::kCorrupt, offset, 0, e.what()};
    }
    if (!read) return {WholeFile::kMissing, 0, 0, ""};
    const size_t got = *read;
    if (got == 0) break;
    if (offset < source.size) {
      const auto part = static_cast<size_t>(std::min<uint64_t>(got, source.size - offset));
      crc = ::crc32(crc, reinterpret_cast<const Bytef*>(buf.data()), static_cast<uInt>(part));
    }
    offset += got;
    if (got < kChunk) break;
  }
  return {WholeFile::kRead, offset, static_cast<uint32_t>(crc), ""};
}

MappedReadCounters MappedReads() {
  const RangeTotals totals = RangeReadTotals();
  return {totals.requests, totals.bytes, totals.connections};
}

rocksdb::Env* MappedEnv() {
  // Leaked on purpose: a DB still open at exit (and its background threads) may use it.
  static rocksdb::Env* const env = rocksdb::NewCompositeEnv(std::make_shared<MappedFileSystem>()).release();
  return env;
}

}  // namespace ttlstate
