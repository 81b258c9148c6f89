#include "ttlstate/record_file.h"
#include "ttlstate/big_endian.h"
#include "ttlstate/posix_fd.h"
#include "ttlstate/ttl_value.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace ttlstate {
namespace {

constexpr char kMagic[] = "TTLSTATE";
constexpr char kFooterMagic[] = "TTLS-END";
constexpr size_t kPrefixSize = 8 + 1 + 2 + 4;
constexpr size_t kFooterSize = 8 + 8 + 8 + 4;
constexpr size_t kChunk = 1 << 20;

[[noreturn]] void Fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("checkpoint file " + path + ": " + what);
}

void ReadExactly(int fd, char* out, size_t n, uint64_t offset, const std::string& path) {
  const ssize_t got = PreadUpTo(fd, out, n, offset);
  if (got < 0) Fail(path, std::string("read failed: ") + std::strerror(errno));
  if (static_cast<size_t>(got) < n) Fail(path, "is truncated");
}

}  // namespace

FileHandle::~FileHandle() {
  if (fd_ >= 0) ::close(fd_);
}

FileHandle& FileHandle::operator=(FileHandle&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void RecordEncoder::CctxDeleter::operator()(void* p) const { ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(p)); }
void RecordFileReader::DctxDeleter::operator()(void* p) const { ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(p)); }

RecordEncoder::RecordEncoder(int zstd_level, size_t chunk) : cctx_(ZSTD_createCCtx()), chunk_(chunk) {
  if (!cctx_) throw std::runtime_error("cannot allocate a zstd context");
  ZSTD_CCtx_setParameter(static_cast<ZSTD_CCtx*>(cctx_.get()), ZSTD_c_compressionLevel, zstd_level);
  pending_.reserve(chunk_ + 4096);
}

void RecordEncoder::AppendRecordHead(uint8_t op, std::string_view key) {
  if (ended_) throw std::logic_error("record encoder: a record added after the end");
  pending_.push_back(static_cast<char>(op));
  big_endian::Append<uint32_t>(&pending_, static_cast<uint32_t>(key.size()));
  pending_.append(key.data(), key.size());
}

void RecordEncoder::Put(std::string_view key, std::string_view value) {
  AppendRecordHead(kRecordPut, key);
  big_endian::Append<uint32_t>(&pending_, static_cast<uint32_t>(value.size()));
  pending_.append(value.data(), value.size());
  ++count_;
  if (pending_.size() >= chunk_) Compress(false);
}

void RecordEncoder::Delete(std::string_view key) {
  AppendRecordHead(kRecordDelete, key);
  ++count_;
  if (pending_.size() >= chunk_) Compress(false);
}

void RecordEncoder::Append(std::string_view key, int64_t ts, std::string_view user) {
  AppendRecordHead(kRecordAppend, key);
  big_endian::Append<uint32_t>(&pending_, static_cast<uint32_t>(kTimestampSize + user.size()));
  AppendTimestamp(&pending_, ts);
  pending_.append(user.data(), user.size());
  ++count_;
  has_appends_ = true;
  if (pending_.size() >= chunk_) Compress(false);
}

void RecordEncoder::End() {
  if (ended_) return;
  Compress(true);
  ended_ = true;
  pending_ = std::string();  // the buffer is not needed any more
}

void RecordEncoder::Compress(bool end) {
  auto* cctx = static_cast<ZSTD_CCtx*>(cctx_.get());
  ZSTD_inBuffer in{pending_.data(), pending_.size(), 0};
  while (true) {
    const size_t at = out_.size();
    out_.resize(at + ZSTD_CStreamOutSize());
    ZSTD_outBuffer out{out_.data() + at, ZSTD_CStreamOutSize(), 0};
    const size_t left = ZSTD_compressStream2(cctx, &out, &in, end ? ZSTD_e_end : ZSTD_e_continue);
    if (ZSTD_isError(left)) throw std::runtime_error(std::string("zstd: ") + ZSTD_getErrorName(left));
    out_.resize(at + out.pos);
    if (end ? left == 0 : in.pos == in.size) break;
  }
  pending_.clear();
}

RecordFileWriter::RecordFileWriter(const std::string& path, char kind, std::string_view header_json,
                                   int zstd_level)
    : path_(path), body_(zstd_level, kChunk) {
  WriteHead(kind, header_json, kRecordFormatVersion);
}

RecordFileWriter::RecordFileWriter(const std::string& path, char kind, std::string_view header_json,
                                   RecordEncoder body)
    : path_(path), body_(std::move(body)) {
  // Appends only in a format an older reader refuses (it would not know their op).
  WriteHead(kind, header_json, body_.has_appends() ? kRecordAppendsFormat : kRecordFormatVersion);
}

void RecordFileWriter::WriteHead(char kind, std::string_view header_json, uint16_t format) {
  file_ = FileHandle(::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (file_.get() < 0) Fail(path_, std::string("cannot create: ") + std::strerror(errno));
  std::string head(kMagic, 8);
  head.push_back(kind);
  big_endian::Append<uint16_t>(&head, format);
  big_endian::Append<uint32_t>(&head, static_cast<uint32_t>(header_json.size()));
  head.append(header_json.data(), header_json.size());
  WriteRaw(head.data(), head.size());
  body_start_ = size_;
}

RecordFileWriter::~RecordFileWriter() {
  if (!finished_) ::unlink(path_.c_str());  // an unfinished file must never be published
}

void RecordFileWriter::WriteRaw(const char* data, size_t n) {
  crc_ = static_cast<uint32_t>(::crc32(crc_, reinterpret_cast<const Bytef*>(data), static_cast<uInt>(n)));
  size_ += n;
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::write(file_.get(), data + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) Fail(path_, std::string("write failed: ") + std::strerror(errno));
    done += static_cast<size_t>(w);
  }
}

void RecordFileWriter::Drain() {
  std::string& out = body_.compressed();
  WriteRaw(out.data(), out.size());
  out.clear();
}

void RecordFileWriter::Put(std::string_view key, std::string_view value) {
  body_.Put(key, value);
  if (!body_.compressed().empty()) Drain();
}

void RecordFileWriter::Delete(std::string_view key) {
  body_.Delete(key);
  if (!body_.compressed().empty()) Drain();
}

uint64_t RecordFileWriter::Finish() {
  try {
    body_.End();
  } catch (const std::runtime_error& e) {
    Fail(path_, e.what());
  }
  Drain();
  std::string footer(kFooterMagic, 8);
  big_endian::Append<uint64_t>(&footer, body_.count());
  big_endian::Append<uint64_t>(&footer, size_ - body_start_);
  const auto crc = static_cast<uint32_t>(
      ::crc32(crc_, reinterpret_cast<const Bytef*>(footer.data()), static_cast<uInt>(footer.size())));
  big_endian::Append<uint32_t>(&footer, crc);
  WriteRaw(footer.data(), footer.size());
  if (::fsync(file_.get()) != 0) Fail(path_, std::string("fsync failed: ") + std::strerror(errno));
  file_ = FileHandle();
  finished_ = true;
  return body_.count();
}

RecordFileReader::RecordFileReader(const std::string& path) : path_(path), dctx_(ZSTD_createDCtx()) {
  if (!dctx_) Fail(path, "cannot allocate a zstd context");
  file_ = FileHandle(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (file_.get() < 0) Fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(file_.get(), &st) != 0) Fail(path, "cannot stat");
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < kPrefixSize + kFooterSize) Fail(path, "is truncated");
  char prefix[kPrefixSize];
  ReadExactly(file_.get(), prefix, kPrefixSize, 0, path);
  if (std::memcmp(prefix, kMagic, 8) != 0) Fail(path, "is not a ttlstate checkpoint file (bad magic)");
  kind_ = prefix[8];
  // Records of state entries only: a format-2 snapshot names SST files. Appends only in a
  // changelog of their format.
  const uint16_t format = big_endian::Load<uint16_t>(prefix + 9);
  appends_ = format == kRecordAppendsFormat && kind_ == kKindChangelog;
  if (format != kRecordFormatVersion && !appends_) {
    Fail(path, "has format version " + std::to_string(format) + ", not a record file of state entries");
  }
  const uint64_t hdr_len = big_endian::Load<uint32_t>(prefix + 11);
  char footer[kFooterSize];
  ReadExactly(file_.get(), footer, kFooterSize, size - kFooterSize, path);
  expected_count_ = big_endian::Load<uint64_t>(footer + 8);
  const uint64_t body_start = kPrefixSize + hdr_len;
  if (body_start + kFooterSize > size) Fail(path, "is truncated or corrupt (sizes do not add up)");
  body_remaining_ = size - kFooterSize - body_start;
  if (::lseek(file_.get(), static_cast<off_t>(body_start), SEEK_SET) < 0) Fail(path, "cannot seek");
}

RecordFileReader::~RecordFileReader() = default;

bool RecordFileReader::Refill() {
  // Keep the unparsed tail, then decompress more after it (at least one byte, or the end).
  buf_.erase(0, pos_);
  pos_ = 0;
  auto* dctx = static_cast<ZSTD_DCtx*>(dctx_.get());
  const size_t before = buf_.size();
  const size_t out_step = ZSTD_DStreamOutSize();
  while (buf_.size() == before) {
    if (in_pos_ == in_.size() && body_remaining_ > 0) {
      in_.resize(static_cast<size_t>(std::min<uint64_t>(kChunk, body_remaining_)));
      in_pos_ = 0;
      size_t got = 0;
      while (got < in_.size()) {
        const ssize_t r = ::read(file_.get(), in_.data() + got, in_.size() - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) Fail(path_, "is truncated");
        got += static_cast<size_t>(r);
      }
      body_remaining_ -= got;
    }
    const bool no_input = in_pos_ == in_.size();
    if (no_input && frame_done_) return false;
    ZSTD_inBuffer in{in_.data(), in_.size(), in_pos_};
    const size_t old = buf_.size();
    buf_.resize(old + out_step);
    ZSTD_outBuffer out{buf_.data() + old, out_step, 0};
    const size_t r = ZSTD_decompressStream(dctx, &out, &in);
    if (ZSTD_isError(r)) Fail(path_, std::string("is corrupt (zstd: ") + ZSTD_getErrorName(r) + ")");
    buf_.resize(old + out.pos);
    in_pos_ = in.pos;
    if (r == 0) {
      frame_done_ = true;  // the frame is complete and flushed
    } else if (no_input && out.pos == 0) {
      Fail(path_, "is truncated or corrupt (the compressed body ends inside its frame)");
    }
  }
  return true;
}

bool RecordFileReader::Next(uint8_t* op, std::string_view* key, std::string_view* value) {
  while (true) {
    const size_t avail = buf_.size() - pos_;
    const char* p = buf_.data() + pos_;
    if (avail >= 5) {
      const auto o = static_cast<uint8_t>(p[0]);
      const uint64_t klen = big_endian::Load<uint32_t>(p + 1);
      if (o != kRecordPut && o != kRecordDelete && !(o == kRecordAppend && appends_)) {
        Fail(path_, "is corrupt (unknown record op " + std::to_string(o) + ")");
      }
      if (o == kRecordDelete && avail >= 5 + klen) {
        *op = o;
        *key = std::string_view(p + 5, klen);
        *value = std::string_view();
        pos_ += 5 + klen;
        ++seen_;
        return true;
      }
      if (o != kRecordDelete && avail >= 9 + klen) {
        const uint64_t vlen = big_endian::Load<uint32_t>(p + 5 + klen);
        if (o == kRecordAppend && vlen < kTimestampSize) {
          Fail(path_, "is corrupt (an append of " + std::to_string(vlen) + " bytes, without a timestamp)");
        }
        if (avail >= 9 + klen + vlen) {
          *op = o;
          *key = std::string_view(p + 5, klen);
          *value = std::string_view(p + 9 + klen, vlen);
          pos_ += 9 + klen + vlen;
          ++seen_;
          return true;
        }
      }
    }
    if (!Refill()) {
      if (buf_.size() != pos_ || seen_ != expected_count_) {
        Fail(path_, "is corrupt (decoded " + std::to_string(seen_) + " records, footer says " +
                        std::to_string(expected_count_) + ")");
      }
      return false;
    }
  }
}

}  // namespace ttlstate
