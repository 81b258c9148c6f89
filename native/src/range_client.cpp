// Connections to the shim's range service (range_client.h).
#include "ttlstate/range_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include "ttlstate/big_endian.h"
#include "ttlstate/connection.h"
#include "ttlstate/posix_fd.h"
#include "ttlstate/protocol.h"

namespace ttlstate {

namespace p = protocol;

namespace {

std::atomic<uint64_t> g_requests{0};
std::atomic<uint64_t> g_bytes{0};
std::atomic<uint64_t> g_connections{0};

// One connection to the range service, used by one thread at a time.
class RangeConnection {
 public:
  explicit RangeConnection(const std::string& socket) : fd_(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (fd_.get() < 0) throw std::runtime_error(ErrnoMessage("socket"));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (socket.size() >= sizeof(addr.sun_path)) throw std::runtime_error("socket path too long: " + socket);
    std::memcpy(addr.sun_path, socket.data(), socket.size());
    int rc;
    do {
      rc = ::connect(fd_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    } while (rc < 0 && errno == EINTR);
    if (rc < 0) throw std::runtime_error(ErrnoMessage("connecting to " + socket));
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
  // in step), a broken connection as std::runtime_error. Frames as the server's own
  // connections read and write them (connection.h).
  std::string Call(uint8_t code, const std::string& payload) {
    uint8_t answer = 0;
    std::string body;
    try {
      frames_.Send(code, payload);
      if (!frames_.ReadFrame(&answer, &body)) throw PeerGone{};
    } catch (const PeerGone&) {
      throw std::runtime_error("the range service closed the connection");
    }
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
  UniqueFd fd_;
  Connection frames_{fd_.get()};  // declared after fd_: made once the socket is
};

}  // namespace

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

std::shared_ptr<RangePool> RangePoolFor(const std::string& socket) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<RangePool>> pools;
  std::lock_guard<std::mutex> lock(mu);
  auto& pool = pools[socket];
  if (!pool) pool = std::make_shared<RangePool>(socket);
  return pool;
}

std::optional<size_t> ReadRange(RangePool& pool, const std::string& uri, uint64_t offset, size_t n, char* scratch) {
  return pool.Read(uri, offset, n, scratch);
}

RangeTotals RangeReadTotals() {
  return {g_requests.load(std::memory_order_relaxed), g_bytes.load(std::memory_order_relaxed),
          g_connections.load(std::memory_order_relaxed)};
}

}  // namespace ttlstate
