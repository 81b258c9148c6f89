// The engine-neutral checkpoint record file, native side. The layout is specified (and the
// reference implementation lives) in python/ttlstate/checkpoint/record_file.py:
//   "TTLSTATE" | kind u8 | format u16 | hdr_len u32 | header JSON | zstd(records) |
//   "TTLS-END" | count u64 | body_len u64 | crc32 u32 (of every byte before it)
// record = op u8 (1 put, 2 delete, 3 append) | key_len u32 | key | (put, append) value_len u32 | value.
// The header JSON is built by Python (it is control-plane data) and handed in as bytes. The
// format numbers and ops are generated from python/ttlstate/checkpoint/record_format.py.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ttlstate/generated/record_file_format.h"

namespace ttlstate {

constexpr char kKindChangelog = 'C';
constexpr char kKindSnapshot = 'S';
// zstd levels (any level reads back the same): snapshots as the Python writer; a commit's
// changelog, written on the commit's path, with the fastest level (about 3x the speed of level
// 3 on Spark's keys, and as small or within a few percent).
constexpr int kSnapshotZstdLevel = 3;
constexpr int kChangelogZstdLevel = 1;

// A file descriptor that closes itself.
class FileHandle {
 public:
  FileHandle() = default;
  explicit FileHandle(int fd) : fd_(fd) {}
  ~FileHandle();
  FileHandle(FileHandle&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileHandle& operator=(FileHandle&& other) noexcept;
  FileHandle(const FileHandle&) = delete;
  FileHandle& operator=(const FileHandle&) = delete;
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

// Records compressed into memory as they are added: the body of a record file. A file writer
// drains it as it grows; a transaction encodes its changelog here while the batch's writes
// arrive, so the commit only closes it.
class RecordEncoder {
 public:
  explicit RecordEncoder(int zstd_level, size_t chunk = size_t{1} << 20);
  RecordEncoder(RecordEncoder&&) noexcept = default;
  RecordEncoder& operator=(RecordEncoder&&) noexcept = default;
  RecordEncoder(const RecordEncoder&) = delete;
  RecordEncoder& operator=(const RecordEncoder&) = delete;

  void Put(std::string_view key, std::string_view value);
  void Delete(std::string_view key);
  // An append record: the TtlValue of `user` bytes stamped `ts` (a file that holds one is of
  // format kRecordAppendsFormat).
  void Append(std::string_view key, int64_t ts, std::string_view user);
  // Compresses what is buffered and closes the zstd frame; nothing may be added after.
  void End();
  // The compressed bytes produced so far (all of the body once ended); the owner may drain it.
  std::string& compressed() { return out_; }
  uint64_t count() const { return count_; }
  bool has_appends() const { return has_appends_; }

 private:
  void AppendRecordHead(uint8_t op, std::string_view key);
  void Compress(bool end);

  struct CctxDeleter { void operator()(void* p) const; };
  std::unique_ptr<void, CctxDeleter> cctx_;
  size_t chunk_;
  std::string pending_;  // uncompressed records not yet handed to zstd
  std::string out_;
  uint64_t count_ = 0;
  bool has_appends_ = false;
  bool ended_ = false;
};

class RecordFileWriter {
 public:
  RecordFileWriter(const std::string& path, char kind, std::string_view header_json,
                   int zstd_level = kSnapshotZstdLevel);
  // A file whose body was encoded beforehand (ended here if it is not yet).
  RecordFileWriter(const std::string& path, char kind, std::string_view header_json, RecordEncoder body);
  ~RecordFileWriter();
  RecordFileWriter(const RecordFileWriter&) = delete;
  RecordFileWriter& operator=(const RecordFileWriter&) = delete;

  void Put(std::string_view key, std::string_view value);
  void Delete(std::string_view key);
  // Compresses what is left, writes the footer and checksum, fsyncs; returns the record count.
  uint64_t Finish();

 private:
  void WriteHead(char kind, std::string_view header_json, uint16_t format);
  void Drain();  // writes the encoder's compressed bytes out
  void WriteRaw(const char* data, size_t n);

  std::string path_;
  FileHandle file_;
  RecordEncoder body_;
  uint32_t crc_ = 0;
  uint64_t size_ = 0;
  uint64_t body_start_ = 0;
  bool finished_ = false;
};

// Decodes the records of a file the caller has already verified whole (size, footer, CRC): of
// format kRecordFormatVersion, or a changelog of kRecordAppendsFormat (appends allowed).
class RecordFileReader {
 public:
  explicit RecordFileReader(const std::string& path);
  ~RecordFileReader();
  RecordFileReader(const RecordFileReader&) = delete;
  RecordFileReader& operator=(const RecordFileReader&) = delete;

  // The next record; `key` and `value` stay valid until the next call. False at the end (after
  // checking that exactly the footer's count of records was decoded).
  bool Next(uint8_t* op, std::string_view* key, std::string_view* value);
  uint64_t expected_count() const { return expected_count_; }
  char kind() const { return kind_; }

 private:
  bool Refill();

  std::string path_;
  FileHandle file_;
  struct DctxDeleter { void operator()(void* p) const; };
  std::unique_ptr<void, DctxDeleter> dctx_;
  std::string in_;
  size_t in_pos_ = 0;
  bool frame_done_ = false;
  std::string buf_;
  size_t pos_ = 0;
  uint64_t body_remaining_ = 0;
  uint64_t expected_count_ = 0;
  uint64_t seen_ = 0;
  char kind_ = 0;
  bool appends_ = false;  // the file's format allows append records
};

}  // namespace ttlstate
