#include "ttlstate/connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "ttlstate/big_endian.h"
#include "ttlstate/errors.h"
#include "ttlstate/protocol.h"

namespace ttlstate {

namespace p = protocol;

class PayloadReader {
 public:
  explicit PayloadReader(std::string_view buf) : buf_(buf) {}
  uint8_t U8() { return static_cast<uint8_t>(*Take(1)); }
  uint32_t U32() { return big_endian::Load<uint32_t>(Take(4)); }
  std::optional<std::string_view> BytesOrNull() {
    const auto n = static_cast<int32_t>(U32());
    if (n < 0) return std::nullopt;
    return std::string_view(Take(static_cast<size_t>(n)), static_cast<size_t>(n));
  }
  std::string_view Bytes() {
    auto v = BytesOrNull();
    if (!v) throw StoreError(p::kErrBadRequest, "unexpected null byte string");
    return *v;
  }

 private:
  const char* Take(size_t n) {
    if (buf_.size() - pos_ < n) throw StoreError(p::kErrBadRequest, "frame too short for its contents");
    const char* out = buf_.data() + pos_;
    pos_ += n;
    return out;
  }
  std::string_view buf_;
  size_t pos_ = 0;
};

namespace {

void PutBytes(std::string* out, const std::string* v) {
  if (v == nullptr) {
    big_endian::Append<uint32_t>(out, 0xffffffffu);
    return;
  }
  big_endian::Append<uint32_t>(out, static_cast<uint32_t>(v->size()));
  out->append(*v);
}

void PutBytes(std::string* out, std::string_view v) {
  big_endian::Append<uint32_t>(out, static_cast<uint32_t>(v.size()));
  out->append(v.data(), v.size());
}

std::string ErrorPayload(uint16_t code, std::string_view message) {
  std::string out;
  big_endian::Append(&out, code);
  PutBytes(&out, message);
  return out;
}

}  // namespace

std::optional<std::string> PrefixUpperBound(std::string_view prefix) {
  std::string s(prefix);
  while (!s.empty() && static_cast<uint8_t>(s.back()) == 0xff) s.pop_back();
  if (s.empty()) return std::nullopt;
  s.back() = static_cast<char>(static_cast<uint8_t>(s.back()) + 1);
  return s;
}

void Connection::WriteAll(const char* data, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::send(fd_, data + done, n - done, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw PeerGone{};
    done += static_cast<size_t>(w);
  }
}

bool Connection::ReadFrame(uint8_t* code, std::string* payload) {
  auto fill = [&](size_t need) {
    while (rbuf_.size() - rpos_ < need) {
      if (rpos_ > 0) {
        rbuf_.erase(0, rpos_);
        rpos_ = 0;
      }
      const size_t old = rbuf_.size();
      const size_t want = std::max<size_t>(need - old, 64 * 1024);
      rbuf_.resize(old + want);
      ssize_t r;
      do {
        r = ::recv(fd_, rbuf_.data() + old, want, 0);
      } while (r < 0 && errno == EINTR);
      rbuf_.resize(old + static_cast<size_t>(r > 0 ? r : 0));
      if (r <= 0) return false;
    }
    return true;
  };
  if (!fill(5)) {
    if (rbuf_.size() == rpos_) return false;
    throw PeerGone{};  // closed inside a frame header
  }
  const char* h = rbuf_.data() + rpos_;
  const auto length = big_endian::Load<uint32_t>(h);
  if (length < 1 || length > p::kMaxFrame) throw PeerGone{};  // not our protocol: drop it
  *code = static_cast<uint8_t>(h[4]);
  if (!fill(4 + static_cast<size_t>(length))) throw PeerGone{};
  payload->assign(rbuf_.data() + rpos_ + 5, length - 1);
  rpos_ += 4 + length;
  return true;
}

void Connection::Send(uint8_t code, std::string_view payload) {
  std::string frame;
  frame.reserve(5 + payload.size());
  big_endian::Append<uint32_t>(&frame, static_cast<uint32_t>(payload.size() + 1));
  frame.push_back(static_cast<char>(code));
  frame.append(payload.data(), payload.size());
  WriteAll(frame.data(), frame.size());
}

void Connection::BeginResponse() {
  out_.clear();
  out_.append(5, '\0');
}

void Connection::FinishResponse(uint8_t code) {
  const auto length = static_cast<uint32_t>(out_.size() - 4);
  big_endian::Store(out_.data(), length);
  out_[4] = static_cast<char>(code);
  WriteAll(out_.data(), out_.size());
  if (out_.capacity() > (4u << 20)) std::string().swap(out_);  // do not keep a huge buffer
}

void Connection::SendError(uint16_t code, std::string_view message) { Send(p::kRespError, ErrorPayload(code, message)); }

std::shared_ptr<Txn> Connection::BoundTxn(uint32_t handle) const {
  const auto it = bound_.find(handle);
  return it == bound_.end() ? nullptr : it->second;
}

namespace {

// Removes every live key starting with `prefix` (a column family's: WRITE_REMOVE_PREFIX), each as
// WRITE_REMOVE would: the keys a scan of the prefix finds, collected before the first removal.
void RemovePrefix(Txn& txn, std::string_view prefix) {
  std::vector<std::string> keys;
  {
    const auto scan = txn.NewScan(std::string(prefix), PrefixUpperBound(prefix));
    while (!scan->Next(p::kIterChunkBytes, [&](std::string_view k, const std::string*) { keys.emplace_back(k); })) {
    }
  }
  for (const auto& k : keys) txn.Remove(k);
}

}  // namespace

void Connection::Writes(Txn& txn, PayloadReader& r) {
  const uint32_t n = r.U32();
  for (uint32_t i = 0; i < n; ++i) {
    const uint8_t kind = r.U8();
    const std::string_view key = r.Bytes();
    if (kind == p::kWritePut || kind == p::kWritePutNew || kind == p::kWritePutPresent) {
      const auto known = kind == p::kWritePutNew       ? Txn::Committed::kAbsent
                         : kind == p::kWritePutPresent ? Txn::Committed::kPresent
                                                       : Txn::Committed::kUnknown;
      txn.Put(key, r.Bytes(), known);
    } else if (kind == p::kWritePutEntry) {
      txn.PutEntry(key, r.Bytes());
    } else if (kind == p::kWriteRemove) {
      txn.Remove(key);
    } else if (kind == p::kWriteRemoveExpired) {
      txn.RemoveIfExpired(key);
    } else if (kind == p::kWriteAppend) {
      // A column family's ListState merge: the stored value (none: empty), then these bytes.
      txn.Append(key, r.Bytes());
    } else if (kind == p::kWriteRemovePrefix) {
      RemovePrefix(txn, key);
    } else {
      throw StoreError(p::kErrBadRequest, "unknown write kind " + std::to_string(kind));
    }
  }
}

void Connection::Chunk(Scan& scan, uint32_t id) {
  // Layout: [u32 iter id,] u8 done, u32 n, n x (bytes key, bytes value); the count is patched.
  const size_t done_at = out_.size();
  out_.push_back('\0');
  const size_t count_at = out_.size();
  big_endian::Append<uint32_t>(&out_, 0);
  uint32_t n = 0;
  const bool done = scan.Next(p::kIterChunkBytes, [&](std::string_view key, const std::string* value) {
    PutBytes(&out_, key);
    PutBytes(&out_, value);
    ++n;
  });
  out_[done_at] = static_cast<char>(done ? 1 : 0);
  big_endian::Store(out_.data() + count_at, n);
  if (done) scans_.erase(id);
}

bool Connection::Dispatch(uint8_t code, std::string_view payload) {
  PayloadReader r(payload);
  if (code == p::kOpIterNext || code == p::kOpIterClose) {
    r.U32();  // handle: the iterator id alone names the scan
    const uint32_t id = r.U32();
    const auto it = scans_.find(id);
    if (it == scans_.end()) return false;  // not ours (the Python side's, or closed: it says so)
    BeginResponse();
    if (code == p::kOpIterNext) Chunk(*it->second, id); else scans_.erase(it);
    FinishResponse(p::kRespOk);
    return true;
  }
  if (code != p::kOpGet && code != p::kOpGetEntries && code != p::kOpMultiGet && code != p::kOpIter &&
      code != p::kOpKeys && code != p::kOpEntries) {
    return false;
  }
  const auto txn = BoundTxn(r.U32());
  if (!txn) return false;
  BeginResponse();
  if (code == p::kOpGet) {
    int64_t ts = 0;
    const auto value = txn->GetEntry(r.Bytes(), &ts);
    PutBytes(&out_, value ? &*value : nullptr);
    big_endian::Append<uint64_t>(&out_, static_cast<uint64_t>(ts));
  } else if (code == p::kOpGetEntries || code == p::kOpMultiGet) {
    // n keys; GET_ENTRIES: n OP_GETs in one round trip (values and last-access times)
    const uint32_t n = r.U32();
    std::vector<std::string_view> keys;
    keys.reserve(n);
    for (uint32_t i = 0; i < n; ++i) keys.push_back(r.Bytes());
    std::vector<int64_t> ts;
    const auto values = code == p::kOpGetEntries ? txn->GetEntries(keys, &ts) : txn->MultiGet(keys);
    big_endian::Append<uint32_t>(&out_, n);
    for (uint32_t i = 0; i < n; ++i) {
      PutBytes(&out_, values[i] ? &*values[i] : nullptr);
      if (code == p::kOpGetEntries) big_endian::Append<uint64_t>(&out_, static_cast<uint64_t>(ts[i]));
    }
  } else {
    std::unique_ptr<Scan> scan;
    if (code == p::kOpKeys) {
      scan = txn->NewKeyScan();
    } else if (code == p::kOpEntries) {
      scan = txn->NewStoredScan();
    } else if (const auto prefix = r.BytesOrNull()) {
      scan = txn->NewScan(std::string(*prefix), PrefixUpperBound(*prefix));
    } else {
      scan = txn->NewScan(std::nullopt, std::nullopt);
    }
    const uint32_t id = next_scan_++;
    big_endian::Append<uint32_t>(&out_, id);
    Scan& s = *scan;
    scans_[id] = std::move(scan);
    Chunk(s, id);
  }
  FinishResponse(p::kRespOk);
  return true;
}

void Connection::Serve(const Forward& forward) {
  uint8_t code = 0;
  std::string payload;
  try {
    while (ReadFrame(&code, &payload)) {
      if (code == p::kOpWrites) {
        if (pending_error_) continue;  // the batch is failing already; the next call says so
        PayloadReader r(payload);
        const auto txn = BoundTxn(r.U32());
        try {
          if (txn) {
            ++native_requests_;
            Writes(*txn, r);
          } else if (auto reply = forward(code, std::move(payload)); reply && reply->first == p::kRespError) {
            pending_error_ = std::move(reply->second);
          }
        } catch (const StoreError& e) {
          pending_error_ = ErrorPayload(e.code(), std::string("an earlier pipelined write failed: ") + e.what());
        } catch (const PeerGone&) {
          throw;
        } catch (const std::exception& e) {
          pending_error_ = ErrorPayload(p::kErrInternal, std::string("an earlier pipelined write failed: ") + e.what());
        }
        continue;
      }
      if (pending_error_) {
        Send(p::kRespError, *pending_error_);
        pending_error_.reset();
        continue;
      }
      bool handled = false;
      try {
        handled = Dispatch(code, payload);
        if (handled) ++native_requests_;
      } catch (const StoreError& e) {
        SendError(e.code(), e.what());
        continue;
      } catch (const PeerGone&) {
        throw;
      } catch (const std::exception& e) {
        SendError(p::kErrInternal, e.what());
        continue;
      }
      if (handled) continue;
      if (code == p::kOpLoad || code == p::kOpClose) {
        // A new version (or none) for this handle: its old transaction and every open scan end,
        // as the Python side drops its iterators at LOAD.
        if (payload.size() >= 4) Unbind(PayloadReader(payload).U32());
        scans_.clear();
      }
      if (auto reply = forward(code, std::move(payload))) Send(reply->first, reply->second);
    }
  } catch (const PeerGone&) {
  }
}

}  // namespace ttlstate
