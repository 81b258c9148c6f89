// Placeholders read in place through the shim's range service (mapped_files.h).
#include "ttlstate/mapped_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "ttlstate/posix_fd.h"
#include "ttlstate/range_client.h"

namespace ttlstate {

namespace {

// --- the registry ----------------------------------------------------------------------------

// Reads of the SST files of one DB directory, since last taken (TakeMappedReads): of the
// checkpoint's files in place, and of the local disk's.
struct DirReads {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> local_requests{0};
  std::atomic<uint64_t> local_bytes{0};
};

// Whether a placeholder's readers read its local copy (FillFromSource): set once, after `local`.
struct FillState {
  std::atomic<bool> filled{false};
  std::unique_ptr<rocksdb::FSRandomAccessFile> local;
};

uint64_t NextSerial() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

struct Registered {
  MappedSource source;
  std::string path;  // where it was registered (ForgetMappedFiles)
  std::shared_ptr<DirReads> reads;
  // The file's modification time when it became a placeholder: with its inode and size, what
  // tells it from a file that reuses a freed inode (RocksDB never writes to a finished file).
  int64_t mtime_ns = 0;
  // An evicted file whose blocks are being freed (EvictToSource): its modification time changes.
  bool evicting = false;
  std::shared_ptr<FillState> fill = std::make_shared<FillState>();  // shared with its readers
  uint64_t serial = NextSerial();  // tells this registration from a later one of the same inode
  bool filling = false;  // its bytes are being written (FillFromSource): its modification time changes
};

using InodeKey = std::pair<uint64_t, uint64_t>;  // (st_dev, st_ino)

InodeKey KeyOf(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// One file as it is: its inode, size and modification time. An inode alone is not (a file
// removed by a compaction frees it for the next one written, while a reader of the old one may
// still live).
using FileId = std::tuple<uint64_t, uint64_t, uint64_t, int64_t>;

FileId IdOf(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_size),
          MtimeNs(st)};
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
  // Still the placeholder: the size and modification time it had (a file that reuses a
  // forgotten placeholder's inode was written since). Not its blocks: a file system may keep
  // some blocks of a file whose every byte was punched out.
  if (static_cast<uint64_t>(st.st_size) != it->second.source.size) return nullptr;
  if (MtimeNs(st) != it->second.mtime_ns && !it->second.evicting && !it->second.filling) return nullptr;
  return &it->second;
}

// The registration `serial` of the inode `key`, while it lasts (under g_registry_mu).
Registered* Find(const InodeKey& key, uint64_t serial) {
  const auto it = Registry().find(key);
  return it != Registry().end() && it->second.serial == serial ? &it->second : nullptr;
}

std::shared_ptr<DirReads> ReadsOf(const std::string& local) {  // under g_registry_mu
  auto& reads = ReadsByDir()[ParentOf(local)];
  if (!reads) reads = std::make_shared<DirReads>();
  return reads;
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

// A checkpoint file the state server reads itself (a `file:` checkpoint: an empty socket).
class LocalSourceFile : public rocksdb::FSRandomAccessFile {
 public:
  LocalSourceFile(const MappedSource& source, std::shared_ptr<DirReads> reads)
      : uri_(source.uri), size_(source.size), reads_(std::move(reads)),
        fd_(::open(source.uri.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_.get() < 0) throw std::runtime_error(ErrnoMessage("opening checkpoint file " + uri_));
  }

  rocksdb::IOStatus Read(uint64_t offset, size_t n, const rocksdb::IOOptions& /*options*/,
                         rocksdb::Slice* result, char* scratch, rocksdb::IODebugContext* /*dbg*/) const override {
    n = offset >= size_ ? 0 : static_cast<size_t>(std::min<uint64_t>(n, size_ - offset));
    const ssize_t got = PreadUpTo(fd_.get(), scratch, n, offset);  // short only past the file's end
    if (got < 0) return rocksdb::IOStatus::IOError(ErrnoMessage("reading checkpoint file " + uri_));
    reads_->requests.fetch_add(1, std::memory_order_relaxed);
    reads_->bytes.fetch_add(static_cast<uint64_t>(got), std::memory_order_relaxed);
    *result = rocksdb::Slice(scratch, static_cast<size_t>(got));
    return rocksdb::IOStatus::OK();
  }

 private:
  const std::string uri_;
  const uint64_t size_;
  const std::shared_ptr<DirReads> reads_;
  const UniqueFd fd_;
};

// A placeholder's reader: of its checkpoint file, until FillFromSource made its local copy whole.
class FillableFile : public rocksdb::FSRandomAccessFile {
 public:
  FillableFile(std::unique_ptr<rocksdb::FSRandomAccessFile> source, std::shared_ptr<FillState> fill)
      : source_(std::move(source)), fill_(std::move(fill)) {}

  rocksdb::IOStatus Read(uint64_t offset, size_t n, const rocksdb::IOOptions& options, rocksdb::Slice* result,
                         char* scratch, rocksdb::IODebugContext* dbg) const override {
    return Current().Read(offset, n, options, result, scratch, dbg);
  }
  rocksdb::IOStatus MultiRead(rocksdb::FSReadRequest* reqs, size_t num_reqs, const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override {
    return Current().MultiRead(reqs, num_reqs, options, dbg);
  }
  rocksdb::IOStatus Prefetch(uint64_t offset, size_t n, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
    return Current().Prefetch(offset, n, options, dbg);
  }
  void Hint(AccessPattern pattern) override { Current().Hint(pattern); }
  rocksdb::IOStatus InvalidateCache(size_t offset, size_t length) override {
    return Current().InvalidateCache(offset, length);
  }

 private:
  rocksdb::FSRandomAccessFile& Current() const {
    return fill_->filled.load(std::memory_order_acquire) ? *fill_->local : *source_;
  }

  const std::unique_ptr<rocksdb::FSRandomAccessFile> source_;
  const std::shared_ptr<FillState> fill_;
};

// The reader of a placeholder's (or an evicted file's) checkpoint file.
std::unique_ptr<rocksdb::FSRandomAccessFile> OpenSource(const Registered& r, const std::string& local) {
  std::unique_ptr<rocksdb::FSRandomAccessFile> source;
  if (r.source.socket.empty()) {
    source = std::make_unique<LocalSourceFile>(r.source, r.reads);
  } else {
    source = std::make_unique<MappedRandomAccessFile>(r.source, r.reads, local);
  }
  return std::make_unique<FillableFile>(std::move(source), r.fill);
}

// What the readers of one local SST file share: whether its reads go to the local disk or (once
// it is evicted) to the checkpoint's copy, and how many local reads are under way (the blocks
// are freed only once none is).
struct SwitchState {
  std::atomic<int> inflight{0};
  std::atomic<bool> switched{false};
  std::unique_ptr<rocksdb::FSRandomAccessFile> source;  // set before `switched`
};

// By file, while a reader lives (under g_registry_mu).
std::map<FileId, std::weak_ptr<SwitchState>>& Switches() {
  static std::map<FileId, std::weak_ptr<SwitchState>> switches;
  return switches;
}

void SweepSwitches() {  // under g_registry_mu
  for (auto it = Switches().begin(); it != Switches().end();) {
    it = it->second.expired() ? Switches().erase(it) : std::next(it);
  }
}

// A local SST file of a DB that reads in place: read from the local disk until it is evicted,
// then from the checkpoint's copy, so RocksDB's open readers (its table cache) never see the
// freed blocks.
class SwitchableFile : public rocksdb::FSRandomAccessFile {
 public:
  // `linked`: the local name is a link to the checkpoint's file (a `file:` restore in place), whose
  // reads are counted as in place and which is never evicted.
  SwitchableFile(std::unique_ptr<rocksdb::FSRandomAccessFile> local, std::shared_ptr<SwitchState> state,
                 std::shared_ptr<DirReads> reads, bool linked)
      : local_(std::move(local)), state_(std::move(state)), reads_(std::move(reads)),
        requests_(linked ? reads_->requests : reads_->local_requests),
        bytes_(linked ? reads_->bytes : reads_->local_bytes) {}

  rocksdb::IOStatus Read(uint64_t offset, size_t n, const rocksdb::IOOptions& options, rocksdb::Slice* result,
                         char* scratch, rocksdb::IODebugContext* dbg) const override {
    return Either([&](rocksdb::FSRandomAccessFile& f) { return f.Read(offset, n, options, result, scratch, dbg); },
                  [&] { return result->size(); });
  }

  rocksdb::IOStatus MultiRead(rocksdb::FSReadRequest* reqs, size_t num_reqs, const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override {
    return Either([&](rocksdb::FSRandomAccessFile& f) { return f.MultiRead(reqs, num_reqs, options, dbg); }, [&] {
      size_t got = 0;
      for (size_t i = 0; i < num_reqs; ++i) got += reqs[i].result.size();
      return got;
    });
  }

  // Hints to the local file while it is read: a copy read in place takes none.
  rocksdb::IOStatus Prefetch(uint64_t offset, size_t n, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
    if (state_->switched.load()) return rocksdb::IOStatus::NotSupported("read in place");
    return local_->Prefetch(offset, n, options, dbg);
  }
  void Hint(AccessPattern pattern) override {
    if (!state_->switched.load()) local_->Hint(pattern);
  }
  rocksdb::IOStatus InvalidateCache(size_t offset, size_t length) override {
    if (state_->switched.load()) return rocksdb::IOStatus::OK();
    return local_->InvalidateCache(offset, length);
  }
  size_t GetUniqueId(char* id, size_t max_size) const override { return local_->GetUniqueId(id, max_size); }
  size_t GetRequiredBufferAlignment() const override { return local_->GetRequiredBufferAlignment(); }
  bool use_direct_io() const override { return local_->use_direct_io(); }

 private:
  // `read` on the local file, counted (`got`: the bytes it returned), unless the file is evicted:
  // then on the copy.
  template <typename Read, typename Got>
  rocksdb::IOStatus Either(const Read& read, const Got& got) const {
    state_->inflight.fetch_add(1);  // before looking at `switched`: EvictToSource waits for it
    if (!state_->switched.load()) {
      const rocksdb::IOStatus s = read(*local_);
      state_->inflight.fetch_sub(1);
      if (s.ok()) {
        requests_.fetch_add(1, std::memory_order_relaxed);
        bytes_.fetch_add(got(), std::memory_order_relaxed);
      }
      return s;
    }
    state_->inflight.fetch_sub(1);
    return read(*state_->source);
  }

  const std::unique_ptr<rocksdb::FSRandomAccessFile> local_;
  const std::shared_ptr<SwitchState> state_;
  const std::shared_ptr<DirReads> reads_;  // owns the two counters below
  std::atomic<uint64_t>& requests_;
  std::atomic<uint64_t>& bytes_;
};

// Frees every block of the file `fd` (`st`: its stat), to a whole block past the end: a partial
// last block would stay allocated, zeroed. Empty, or why it failed.
std::string PunchOut(int fd, const struct stat& st, const std::string& path) {
  const off_t block = st.st_blksize > 0 ? st.st_blksize : 4096;
  const off_t length = (st.st_size + block - 1) / block * block;
  if (::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, length) == 0) return std::string();
  return ErrnoMessage("freeing the blocks of " + path);
}

bool IsSstName(const std::string& f) {
  return f.size() > 4 && f.compare(f.size() - 4, 4, ".sst") == 0;
}

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
      try {
        *r = OpenSource(*placeholder, f);
      } catch (const std::exception& e) {
        return rocksdb::IOStatus::IOError("opening " + f + " in place", e.what());
      }
      return rocksdb::IOStatus::OK();
    }
    if (!IsSstName(f)) {
      lock.unlock();
      return target()->NewRandomAccessFile(f, opts, r, dbg);
    }
    // A local SST file: switchable, should it be evicted while this reader lives.
    std::unique_ptr<rocksdb::FSRandomAccessFile> local;
    rocksdb::IOStatus s = target()->NewRandomAccessFile(f, opts, &local, dbg);
    if (!s.ok()) return s;
    struct stat st {};
    if (::lstat(f.c_str(), &st) != 0) return rocksdb::IOStatus::IOError(ErrnoMessage("stat " + f));
    if (S_ISLNK(st.st_mode)) {  // never switched: its own state
      *r = std::make_unique<SwitchableFile>(std::move(local), std::make_shared<SwitchState>(), ReadsOf(f), true);
      return rocksdb::IOStatus::OK();
    }
    auto& slot = Switches()[IdOf(st)];
    std::shared_ptr<SwitchState> state = slot.lock();
    if (!state) {
      state = std::make_shared<SwitchState>();
      slot = state;
    }
    *r = std::make_unique<SwitchableFile>(std::move(local), std::move(state), ReadsOf(f), false);
    return rocksdb::IOStatus::OK();
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
  // a reused inode's old entry is replaced
  Registry()[KeyOf(st)] = Registered{source, local, ReadsOf(local), MtimeNs(st)};
}

uint64_t EvictToSource(const std::string& local, const MappedSource& source) {
  // Never through a link: that is the checkpoint's own file.
  UniqueFd fd(::open(local.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) {
    if (errno == ENOENT || errno == ELOOP) return 0;  // a compaction removed it meanwhile; a link
    throw std::runtime_error(ErrnoMessage("opening " + local));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw std::runtime_error(ErrnoMessage("stat " + local));
  if (static_cast<uint64_t>(st.st_size) != source.size) {
    throw std::runtime_error(local + " has " + std::to_string(st.st_size) + " bytes, its copy " + source.uri +
                             " " + std::to_string(source.size));
  }
  const InodeKey key = KeyOf(st);
  std::shared_ptr<SwitchState> state;
  {
    std::lock_guard<std::mutex> lock(g_registry_mu);
    if (Lookup(local) != nullptr) return 0;  // read in place already
    Registered entry{source, local, ReadsOf(local), MtimeNs(st), true};
    auto reader = OpenSource(entry, local);  // throws before anything changed if it cannot be read
    Registry()[key] = std::move(entry);  // new readers read the copy from now on
    state = Switches()[IdOf(st)].lock();
    if (state && !state->switched.load()) {  // and the open ones once their reads in progress end
      state->source = std::move(reader);
      state->switched.store(true);
    }
    SweepSwitches();
  }
  while (state && state->inflight.load() != 0) std::this_thread::yield();
  const std::string problem = PunchOut(fd.get(), st, local);
  const bool punched = problem.empty();
  struct stat after {};
  const bool stated = ::fstat(fd.get(), &after) == 0;
  std::lock_guard<std::mutex> lock(g_registry_mu);
  Registered& entry = Registry()[key];
  if (stated) entry.mtime_ns = MtimeNs(after);  // the readers read the copy, punched or not
  entry.evicting = !stated;  // (without its new time, known by inode and size alone)
  if (!punched) throw std::runtime_error(problem);
  if (!stated) throw std::runtime_error(ErrnoMessage("stat " + local));
  return static_cast<uint64_t>(std::max<int64_t>(0, st.st_blocks - after.st_blocks)) * 512;
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
  SweepSwitches();
}

MappedReadCounters TakeMappedReads(const std::string& dir) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  const auto it = ReadsByDir().find(WithoutTrailingSlash(dir));
  if (it == ReadsByDir().end()) return {};
  return {it->second->requests.exchange(0), it->second->bytes.exchange(0), 0,
          it->second->local_requests.exchange(0), it->second->local_bytes.exchange(0)};
}

namespace {

// Reads the checkpoint file `source` names whole, in chunks, past its recorded size too (bytes
// appended to it are no damage: a copying restore truncates them, but the size is reported as
// read), passing each chunk to `chunk` (its offset, bytes, count), which returns false to stop
// the read: then nothing is returned.
std::optional<WholeFile> ReadWhole(const MappedSource& source,
                                   const std::function<bool(uint64_t, const char*, size_t)>& chunk) {
  constexpr size_t kChunk = 4 << 20;
  std::function<std::optional<size_t>(uint64_t, char*)> read;  // nothing: missing
  std::shared_ptr<UniqueFd> fd;
  if (source.socket.empty()) {
    fd = std::make_shared<UniqueFd>(::open(source.uri.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd->get() < 0 && errno != ENOENT) throw std::runtime_error(ErrnoMessage("opening " + source.uri));
    read = [&](uint64_t offset, char* out) -> std::optional<size_t> {
      if (fd->get() < 0) return std::nullopt;
      const ssize_t got = PreadUpTo(fd->get(), out, kChunk, offset);
      if (got < 0) throw std::runtime_error(ErrnoMessage("reading " + source.uri));
      return static_cast<size_t>(got);
    };
  } else {
    const auto pool = RangePoolFor(source.socket);
    read = [&, pool](uint64_t offset, char* out) { return ReadRange(*pool, source.uri, offset, kChunk, out); };
  }
  std::vector<char> buf(kChunk);
  uLong crc = ::crc32(0L, Z_NULL, 0);
  uint64_t offset = 0;
  for (;;) {
    std::optional<size_t> got;
    try {
      got = read(offset, buf.data());
    } catch (const RangeCorrupt& e) {
      return WholeFile{WholeFile::kCorrupt, offset, 0, e.what()};
    }
    if (!got) return WholeFile{WholeFile::kMissing, 0, 0, ""};
    if (*got == 0) break;
    if (offset < source.size) {
      const auto part = static_cast<size_t>(std::min<uint64_t>(*got, source.size - offset));
      crc = ::crc32(crc, reinterpret_cast<const Bytef*>(buf.data()), static_cast<uInt>(part));
    }
    if (!chunk(offset, buf.data(), *got)) return std::nullopt;
    offset += *got;
    if (*got < kChunk) break;  // the service answers in full but at the file's end
  }
  return WholeFile{WholeFile::kRead, offset, static_cast<uint32_t>(crc), ""};
}

// Writes all of `n` bytes at `offset`.
bool PwriteAll(int fd, const char* data, size_t n, uint64_t offset) {
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::pwrite(fd, data + done, n - done, static_cast<off_t>(offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

WholeFile MappedFileCrc32(const MappedSource& source) {
  return *ReadWhole(source, [](uint64_t, const char*, size_t) { return true; });
}

Filled FillFromSource(const std::string& local, const std::string& uri, uint32_t crc) {
  // Never through a link: that is the checkpoint's own file.
  UniqueFd fd(::open(local.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) {
    if (errno == ENOENT || errno == ELOOP) return {};  // a compaction removed it; a link
    throw std::runtime_error(ErrnoMessage("opening " + local));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw std::runtime_error(ErrnoMessage("stat " + local));
  const InodeKey key = KeyOf(st);
  MappedSource source;
  uint64_t serial = 0;
  {
    std::lock_guard<std::mutex> lock(g_registry_mu);
    const auto it = Registry().find(key);
    if (it == Registry().end()) return {};
    Registered& entry = it->second;
    // Still the placeholder of `uri`, as it was registered, and no one else's fill or eviction.
    if (entry.source.uri != uri || static_cast<uint64_t>(st.st_size) != entry.source.size || entry.filling ||
        entry.evicting || MtimeNs(st) != entry.mtime_ns) {
      return {};
    }
    entry.filling = true;
    source = entry.source;
    serial = entry.serial;
  }
  // Not filled: its blocks are freed again and it is the placeholder it was (its new time).
  const auto stays_placeholder = [&] {
    struct stat now {};
    const bool punched = ::fstat(fd.get(), &now) == 0 && PunchOut(fd.get(), now, local).empty();
    const bool stated = punched && ::fstat(fd.get(), &now) == 0;
    std::lock_guard<std::mutex> lock(g_registry_mu);
    if (Registered* entry = Find(key, serial)) {
      if (stated) entry->mtime_ns = MtimeNs(now);
      entry->filling = !stated;  // (else known by inode and size alone, as an eviction's)
    }
  };
  std::optional<WholeFile> whole;
  try {
    whole = ReadWhole(source, [&](uint64_t offset, const char* data, size_t n) {
      {
        std::lock_guard<std::mutex> lock(g_registry_mu);
        if (Find(key, serial) == nullptr) return false;  // forgotten: its directory goes
      }
      if (offset >= source.size) return true;
      const auto part = static_cast<size_t>(std::min<uint64_t>(n, source.size - offset));
      if (!PwriteAll(fd.get(), data, part, offset)) throw std::runtime_error(ErrnoMessage("writing " + local));
      return true;
    });
    if (whole && whole->outcome == WholeFile::kRead && whole->size >= source.size && whole->crc == crc &&
        ::fdatasync(fd.get()) != 0) {
      throw std::runtime_error(ErrnoMessage("syncing " + local));
    }
  } catch (...) {
    stays_placeholder();
    throw;
  }
  if (!whole || whole->outcome != WholeFile::kRead || whole->size < source.size || whole->crc != crc) {
    stays_placeholder();
    return {false, whole};
  }
  struct stat after {};
  std::unique_ptr<rocksdb::FSRandomAccessFile> reader;
  const rocksdb::IOStatus opened =
      rocksdb::FileSystem::Default()->NewRandomAccessFile(local, rocksdb::FileOptions(), &reader, nullptr);
  struct stat named {};
  if (!opened.ok() || ::fstat(fd.get(), &after) != 0 || ::stat(local.c_str(), &named) != 0 ||
      KeyOf(named) != key) {  // removed (by a compaction) meanwhile
    stays_placeholder();
    return {};
  }
  std::lock_guard<std::mutex> lock(g_registry_mu);
  Registered* entry = Find(key, serial);
  if (entry == nullptr) return {};  // forgotten: its directory goes
  auto& slot = Switches()[IdOf(after)];  // as a local file's readers: an eviction switches these too
  std::shared_ptr<SwitchState> state = slot.lock();
  if (!state) {
    state = std::make_shared<SwitchState>();
    slot = state;
  }
  entry->fill->local = std::make_unique<SwitchableFile>(std::move(reader), std::move(state), entry->reads, false);
  entry->fill->filled.store(true, std::memory_order_release);
  Registry().erase(key);  // new readers open it as the local file it is
  SweepSwitches();
  return {true, whole};
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
