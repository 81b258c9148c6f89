// Placeholders read in place through the shim's range service (mapped_files.h).
#include "ttlstate/mapped_files.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
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
#include "ttlstate/big_endian.h"
#include "ttlstate/protocol.h"

namespace ttlstate {

namespace p = protocol;

namespace {

std::atomic<uint64_t> g_requests{0};
std::atomic<uint64_t> g_bytes{0};
std::atomic<uint64_t> g_connections{0};

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// A file descriptor, closed with its owner.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

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

// --- the range service's connections -----------------------------------------------------------

// One connection to the range service, used by one thread at a time.
class RangeConnection {
 public:
  explicit RangeConnection(const std::string& socket) : fd_(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (fd_.get() < 0) throw std::runtime_error(Errno("socket"));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (socket.size() >= sizeof(addr.sun_path)) throw std::runtime_error("socket path too long: " + socket);
    std::memcpy(addr.sun_path, socket.data(), socket.size());
    int rc;
    do {
      rc = ::connect(fd_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    } while (rc < 0 && errno == EINTR);
    if (rc < 0) throw std::runtime_error(Errno("connecting to " + socket));
    std::string hello;
    big_endian::Append<uint32_t>(&hello, p::kMagic);
    big_endian::Append<uint32_t>(&hello, p::kProtocolVersion);
    std::string reply = Call(p::kOpHello, hello);
    if (reply.size() < 4 || big_endian::Load<uint32_t>(reply.data()) != p::kProtocolVersion) {
      throw std::runtime_error("the range service at " + socket + " speaks another protocol version");
    }
    g_connections.fetch_add(1, std::memory_order_relaxed);
  }

  // The answer's payload to a request; a RESP_ERROR is thrown as RangeRefused (the stream stays
  // in step), a broken connection as std::runtime_error.
  std::string Call(uint8_t code, const std::string& payload) {
    std::string frame;
    frame.reserve(5 + payload.size());
    big_endian::Append<uint32_t>(&frame, static_cast<uint32_t>(payload.size() + 1));
    frame.push_back(static_cast<char>(code));
    frame += payload;
    WriteAll(frame.data(), frame.size());
    char header[5];
    ReadAll(header, sizeof(header));
    const auto length = big_endian::Load<uint32_t>(header);
    if (length < 1 || length > p::kMaxFrame) throw std::runtime_error("the range service sent a malformed frame");
    std::string body(length - 1, '\0');
    ReadAll(body.data(), body.size());
    const auto answer = static_cast<uint8_t>(header[4]);
    if (answer == p::kRespOk) return body;
    if (answer == p::kRespError && body.size() >= 6) {
      const auto n = big_endian::Load<uint32_t>(body.data() + 2);
      throw RangeRefused(body.substr(6, std::min<size_t>(n, body.size() - 6)));
    }
    throw std::runtime_error("the range service answered with frame " + std::to_string(answer));
  }

  struct RangeRefused : std::runtime_error {
    using std::runtime_error::runtime_error;
  };

 private:
  void WriteAll(const char* data, size_t n) {
    for (size_t done = 0; done < n;) {
      const ssize_t w = ::send(fd_.get(), data + done, n - done, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) throw std::runtime_error(Errno("writing to the range service"));
      done += static_cast<size_t>(w);
    }
  }
  void ReadAll(char* data, size_t n) {
    for (size_t done = 0; done < n;) {
      const ssize_t r = ::recv(fd_.get(), data + done, n - done, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) throw std::runtime_error(r == 0 ? "the range service closed the connection"
                                                  : Errno("reading from the range service"));
      done += static_cast<size_t>(r);
    }
  }

  Fd fd_;
};

// The file system's own checksums reject the file's bytes (RANGE_CORRUPT): damage, not a failure.
struct RangeCorrupt : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The idle connections to one range service: a reading thread takes one (or opens one) and
// gives it back once its answer was read whole.
class RangePool {
 public:
  explicit RangePool(std::string socket) : socket_(std::move(socket)) {}

  // Reads up to `n` bytes of `uri` at `offset` into `scratch`: how many, or nothing when the
  // file does not exist; RangeCorrupt when its file system's checksums reject it.
  std::optional<size_t> Read(const std::string& uri, uint64_t offset, size_t n, char* scratch) {
    std::string request;
    big_endian::Append<uint32_t>(&request, static_cast<uint32_t>(uri.size()));
    request += uri;
    big_endian::Append<int64_t>(&request, static_cast<int64_t>(offset));
    big_endian::Append<uint32_t>(&request, static_cast<uint32_t>(n));
    std::unique_ptr<RangeConnection> conn = Take();
    std::string reply;
    try {
      reply = conn->Call(p::kRangeRead, request);
    } catch (const RangeConnection::RangeRefused&) {
      GiveBack(std::move(conn));  // a whole error frame: the connection is still in step
      throw;
    }
    GiveBack(std::move(conn));
    if (reply.size() < 5) throw std::runtime_error("the range service sent a short answer");
    const auto outcome = static_cast<uint8_t>(reply[0]);
    const auto got = static_cast<int32_t>(big_endian::Load<uint32_t>(reply.data() + 1));
    if (got < 0 || reply.size() - 5 < static_cast<size_t>(got)) {
      throw std::runtime_error("the range service answered with a malformed range");
    }
    if (outcome == p::kRangeMissing) return std::nullopt;
    if (outcome == p::kRangeCorrupt) throw RangeCorrupt(reply.substr(5, static_cast<size_t>(got)));
    if (outcome != p::kRangeData || static_cast<size_t>(got) > n) {
      throw std::runtime_error("the range service answered with a malformed range");
    }
    std::memcpy(scratch, reply.data() + 5, static_cast<size_t>(got));
    g_requests.fetch_add(1, std::memory_order_relaxed);
    g_bytes.fetch_add(static_cast<uint64_t>(got), std::memory_order_relaxed);
    return static_cast<size_t>(got);
  }

 private:
  std::unique_ptr<RangeConnection> Take() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        auto conn = std::move(idle_.back());
        idle_.pop_back();
        return conn;
      }
    }
    return std::make_unique<RangeConnection>(socket_);
  }
  void GiveBack(std::unique_ptr<RangeConnection> conn) {
    constexpr size_t kMaxIdle = 8;  // RocksDB reads from a request thread and its background jobs
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < kMaxIdle) idle_.push_back(std::move(conn));
  }

  const std::string socket_;
  std::mutex mu_;
  std::vector<std::unique_ptr<RangeConnection>> idle_;
};

std::shared_ptr<RangePool> PoolFor(const std::string& socket) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<RangePool>> pools;
  std::lock_guard<std::mutex> lock(mu);
  auto& pool = pools[socket];
  if (!pool) pool = std::make_shared<RangePool>(socket);
  return pool;
}

// --- RocksDB's view ----------------------------------------------------------------------------

class MappedRandomAccessFile : public rocksdb::FSRandomAccessFile {
 public:
  MappedRandomAccessFile(MappedSource source, std::shared_ptr<DirReads> reads, std::string local)
      : source_(std::move(source)), reads_(std::move(reads)), local_(std::move(local)),
        pool_(PoolFor(source_.socket)) {}

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
        const std::optional<size_t> more = pool_->Read(source_.uri, offset + got, n - got, scratch + got);
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
  Fd fd(::open(local.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) throw std::runtime_error(Errno("creating " + local));
  if (::ftruncate(fd.get(), static_cast<off_t>(source.size)) != 0) throw std::runtime_error(Errno("sizing " + local));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw std::runtime_error(Errno("stat " + local));
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
  const std::string trimmed = !dir.empty() && dir.back() == '/' ? dir.substr(0, dir.size() - 1) : dir;
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
  const auto it = ReadsByDir().find(!dir.empty() && dir.back() == '/' ? dir.substr(0, dir.size() - 1) : dir);
  if (it == ReadsByDir().end()) return {};
  return {it->second->requests.exchange(0), it->second->bytes.exchange(0), 0};
}

WholeFile MappedFileCrc32(const MappedSource& source) {
  constexpr size_t kChunk = 4 << 20;
  const auto pool = PoolFor(source.socket);
  std::vector<char> buf(kChunk);
  uLong crc = ::crc32(0L, Z_NULL, 0);
  uint64_t offset = 0;
  // Past the recorded size too: bytes appended to the file are no damage (a copying restore
  // truncates them), but the size is reported as read.
  for (;;) {
    std::optional<size_t> read;
    try {
      read = pool->Read(source.uri, offset, kChunk, buf.data());
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
  return {g_requests.load(std::memory_order_relaxed), g_bytes.load(std::memory_order_relaxed),
          g_connections.load(std::memory_order_relaxed)};
}

rocksdb::Env* MappedEnv() {
  // Leaked on purpose: a DB still open at exit (and its background threads) may use it.
  static rocksdb::Env* const env = rocksdb::NewCompositeEnv(std::make_shared<MappedFileSystem>()).release();
  return env;
}

}  // namespace ttlstate
