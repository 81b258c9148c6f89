// The data plane's side of one shim connection: reads frames, answers the per-entry requests
// (GET, MULTI_GET, pipelined WRITES, ITER / KEYS chunks) of stores bound to it natively, and
// hands every other frame (the control plane: HELLO, OPEN, LOAD, COMMIT, maintenance, and the
// stores of the portable engine) to a Python callback. Frame layouts: server/protocol.py.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "ttlstate/txn.h"

namespace ttlstate {

// The peer closed the connection (or it broke): the serve loop ends quietly.
struct PeerGone : std::runtime_error {
  PeerGone() : std::runtime_error("the shim closed the connection") {}
};

class Connection {
 public:
  // What the Python side answers: nothing (a pipelined frame that succeeded) or (code, payload).
  using Reply = std::optional<std::pair<uint8_t, std::string>>;
  using Forward = std::function<Reply(uint8_t code, std::string payload)>;

  explicit Connection(int fd) : fd_(fd) {}
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Serves frames until the peer closes the connection.
  void Serve(const Forward& forward);
  // For the control plane's checkpoint callbacks, in the middle of a forwarded request.
  bool ReadFrame(uint8_t* code, std::string* payload);  // false on a clean EOF between frames
  void Send(uint8_t code, std::string_view payload);
  void Bind(uint32_t handle, std::shared_ptr<Txn> txn) { bound_[handle] = std::move(txn); }
  void Unbind(uint32_t handle) { bound_.erase(handle); }
  uint64_t native_requests() const { return native_requests_; }

 private:
  bool Dispatch(uint8_t code, std::string_view payload);  // false: not native, forward it
  void Writes(Txn& txn, class PayloadReader& r);
  void Chunk(Scan& scan, uint32_t id);
  std::shared_ptr<Txn> BoundTxn(uint32_t handle) const;
  void BeginResponse();
  void FinishResponse(uint8_t code);
  void SendError(uint16_t code, std::string_view message);
  void WriteAll(const char* data, size_t n);

  int fd_;
  std::string rbuf_;
  size_t rpos_ = 0;
  std::string out_;
  std::unordered_map<uint32_t, std::shared_ptr<Txn>> bound_;
  std::unordered_map<uint32_t, std::unique_ptr<Scan>> scans_;
  uint32_t next_scan_ = 1u << 30;  // the Python side numbers its iterators from 1
  std::optional<std::string> pending_error_;  // an error payload owed to the next request
  uint64_t native_requests_ = 0;
};

// The smallest key greater than every key starting with `prefix` (nothing: no bound).
std::optional<std::string> PrefixUpperBound(std::string_view prefix);

}  // namespace ttlstate
