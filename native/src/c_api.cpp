// The C ABI of native/include/ttlstate/c_api.h over the engine's C++ classes: opaque handles,
// C++ exceptions turned into status codes, results in a thread-local buffer. No Python here.
#include "ttlstate/c_api.h"
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ttlstate/compaction_filter.h"
#include "ttlstate/connection.h"
#include "ttlstate/corruptions.h"
#include "ttlstate/db.h"
#include "ttlstate/errors.h"
#include "ttlstate/key_hash.h"
#include "ttlstate/list_filters.h"
#include "ttlstate/mapped_files.h"
#include "ttlstate/protocol.h"
#include "ttlstate/record_file.h"
#include "ttlstate/restore.h"
#include "ttlstate/ttl_value.h"
#include "ttlstate/txn.h"

using ttlstate::StateType;

struct ttl_db { std::unique_ptr<ttlstate::Db> db; };
struct ttl_txn { std::shared_ptr<ttlstate::Txn> txn; };
struct ttl_scan { std::unique_ptr<ttlstate::Scan> scan; };
struct ttl_iterator { std::unique_ptr<ttlstate::Iterator> it; };
struct ttl_snapshot { std::unique_ptr<ttlstate::DbSnapshot> snapshot; };
struct ttl_restore { std::unique_ptr<ttlstate::RestoreBuilder> builder; };
struct ttl_key_hashes { ttlstate::KeyHashes hashes; };
struct ttl_cursor { std::shared_ptr<ttlstate::CleanupCursor> cursor; };
struct ttl_connection {
  explicit ttl_connection(int fd) : connection(fd) {}
  ttlstate::Connection connection;
};
struct ttl_reply {
  uint8_t code = 0;
  std::string payload;
  std::string error;
};

namespace {

thread_local std::string t_error;
thread_local ttl_status t_status = TTL_OK;
thread_local std::string t_out;

// The Python callback of Connection.serve raised (its wrapper keeps the exception).
struct CallbackFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename F>
ttl_status Catch(F&& f) noexcept {
  try {
    f();
    return TTL_OK;
  } catch (const CallbackFailed& e) {
    t_error = e.what();
    return TTL_ERR_CALLBACK;
  } catch (const ttlstate::StateError& e) {
    t_error = e.what();
    return TTL_ERR_STATE;
  } catch (const ttlstate::PeerGone& e) {
    t_error = e.what();
    return TTL_ERR_PEER_GONE;
  } catch (const std::invalid_argument& e) {
    t_error = e.what();
    return TTL_ERR_VALUE;
  } catch (const std::domain_error& e) {
    t_error = e.what();
    return TTL_ERR_VALUE;
  } catch (const std::length_error& e) {
    t_error = e.what();
    return TTL_ERR_VALUE;
  } catch (const std::out_of_range& e) {
    t_error = e.what();
    return TTL_ERR_INDEX;
  } catch (const std::range_error& e) {
    t_error = e.what();
    return TTL_ERR_VALUE;
  } catch (const std::overflow_error& e) {
    t_error = e.what();
    return TTL_ERR_OVERFLOW;
  } catch (const std::bad_alloc&) {
    t_error = "out of memory";
    return TTL_ERR_MEMORY;
  } catch (const std::exception& e) {
    t_error = e.what();
    return TTL_ERR_RUNTIME;
  } catch (...) {
    t_error = "unknown native error";
    return TTL_ERR_RUNTIME;
  }
}

template <typename F>
ttl_status Guard(F&& f) noexcept {
  t_status = Catch(std::forward<F>(f));
  return t_status;
}

// A value copied into the caller's buffer when it fits (else kept for ttl_take); its size, or
// -1 for none, or -2 on failure (ttl_last_status, ttl_last_error).
template <typename F>
int64_t ReadInto(char* buf, size_t cap, F&& read) noexcept {
  int64_t n = -1;
  if (Guard([&] {
        const std::optional<std::string> v = read();
        if (!v) return;
        n = static_cast<int64_t>(v->size());
        if (v->size() <= cap) {
          std::memcpy(buf, v->data(), v->size());
        } else {
          t_out = *v;
        }
      }) != TTL_OK) {
    return -2;
  }
  return n;
}

// The result buffer handed to the caller.
void Out(std::string value, const char** data, size_t* size) {
  t_out = std::move(value);
  *data = t_out.data();
  *size = t_out.size();
}

int OutOptional(const std::optional<std::string>& value, const char** data, size_t* size) {
  Out(value ? *value : std::string(), data, size);
  return value ? 1 : 0;
}

void PutU32(std::string* out, size_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<uint8_t>(p[i])} << (8 * i);
  return v;
}

// A list in the ABI's encoding (c_api.h), built entry by entry.
class ListOut {
 public:
  void Add(std::string_view v) {
    present_.push_back(1);
    blob_.append(v.data(), v.size());
    ends_.push_back(blob_.size());
  }
  void AddNone() {
    present_.push_back(0);
    ends_.push_back(blob_.size());
  }
  void AddOptional(const std::optional<std::string>& v) { v ? Add(*v) : AddNone(); }
  void Finish(const char** data, size_t* size) {
    const size_t count = ends_.size();
    const size_t header = 4 + 4 * (count + 1) + count;
    if (header + blob_.size() > UINT32_MAX) throw std::length_error("a result list over 4 GiB");
    std::string out;
    out.reserve(header + blob_.size());
    PutU32(&out, count);
    PutU32(&out, header);
    for (const size_t end : ends_) PutU32(&out, header + end);
    out += present_;
    out += blob_;
    Out(std::move(out), data, size);
  }

 private:
  std::vector<size_t> ends_;
  std::string present_;
  std::string blob_;
};

std::vector<std::optional<std::string>> DecodeList(const char* data, size_t size) {
  if (size < 8) throw std::invalid_argument("a list shorter than its header");
  const size_t count = GetU32(data);
  const size_t header = 4 + 4 * (count + 1) + count;
  if (size < header) throw std::invalid_argument("a list shorter than its header");
  std::vector<std::optional<std::string>> entries;
  entries.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const size_t begin = GetU32(data + 4 + 4 * i);
    const size_t end = GetU32(data + 8 + 4 * i);
    if (begin > end || end > size) throw std::invalid_argument("a list entry outside the list");
    const bool present = data[4 + 4 * (count + 1) + i] != 0;
    entries.push_back(present ? std::optional<std::string>(std::string(data + begin, end - begin)) : std::nullopt);
  }
  return entries;
}

std::vector<std::string> DecodeKeys(const char* data, size_t size) {
  std::vector<std::string> keys;
  for (auto& k : DecodeList(data, size)) keys.push_back(k ? std::move(*k) : std::string());
  return keys;
}

std::optional<std::string> OptionalArg(const char* data, size_t size) {
  if (!data) return std::nullopt;
  return std::string(data, size);
}

template <typename T, typename... Args>
T* Make(Args&&... args) {
  return std::make_unique<T>(T{std::forward<Args>(args)...}).release();
}

// Takes back a handle that Make released and destroys it.
template <typename T>
void Free(T* handle) {
  std::unique_ptr<T> owned(handle);
}

// Txn::End takes a state name with static storage.
const char* EndState(const std::string& state) {
  static const char* const kStates[] = {"aborted", "released", "superseded", "closed", "committed"};
  for (const char* s : kStates) {
    if (state == s) return s;
  }
  throw std::invalid_argument("unknown end state " + state);
}

}  // namespace

// One filter instance (one compaction run) with its own holder, clock and counters.
struct ttl_harness {
  std::shared_ptr<ttlstate::ConfigHolder> holder = std::make_shared<ttlstate::ConfigHolder>();
  std::shared_ptr<ttlstate::TimeSource> time = std::make_shared<ttlstate::TimeSource>();
  std::shared_ptr<ttlstate::FilterCounters> counters = std::make_shared<ttlstate::FilterCounters>();
  std::unique_ptr<ttlstate::TtlCompactionFilter> filter;

  void NewRun() { filter = std::make_unique<ttlstate::TtlCompactionFilter>(holder, time, counters); }
};

extern "C" {

const char* ttl_last_error(void) { return t_error.c_str(); }
int ttl_last_status(void) { return t_status; }

void ttl_take(char* buf, size_t cap) {
  std::memcpy(buf, t_out.data(), std::min(cap, t_out.size()));
  t_out.clear();
}

ttl_status ttl_constants(const char** data, size_t* size) {
  return Guard([&] {
    namespace p = ttlstate::protocol;
    using CF = rocksdb::CompactionFilter;
    const std::pair<const char*, long long> constants[] = {
        {"STATE_DISABLED", static_cast<int>(StateType::kDisabled)},
        {"STATE_VALUE", static_cast<int>(StateType::kValue)},
        {"STATE_LIST", static_cast<int>(StateType::kList)},
        {"VALUE", static_cast<int>(CF::ValueType::kValue)},
        {"MERGE_OPERAND", static_cast<int>(CF::ValueType::kMergeOperand)},
        {"BLOB_INDEX", static_cast<int>(CF::ValueType::kBlobIndex)},
        {"KEEP", static_cast<int>(CF::Decision::kKeep)},
        {"REMOVE", static_cast<int>(CF::Decision::kRemove)},
        {"CHANGE_VALUE", static_cast<int>(CF::Decision::kChangeValue)},
        {"INVALID_OFFSET", static_cast<long long>(ttlstate::kInvalidOffset)},
        {"RECORD_FORMAT_VERSION", ttlstate::kRecordFormatVersion},
        {"INGEST_MIN_KEYS", static_cast<long long>(ttlstate::DbCore::kIngestMinKeys)},
    };
    std::string text;
    for (const auto& [name, value] : constants) text += std::string(name) + "=" + std::to_string(value) + "\n";
    for (const auto& c : p::kAll) text += "protocol." + std::string(c.name) + "=" + std::to_string(c.value) + "\n";
    Out(std::move(text), data, size);
  });
}

ttl_status ttl_encode_ttl_value(int64_t ts, const char* user, size_t user_size, const char** data, size_t* size) {
  return Guard([&] { Out(ttlstate::EncodeTtlValue(ts, std::string_view(user, user_size)), data, size); });
}

int ttl_is_expired(int64_t ts, int64_t ttl, int64_t now) { return ttlstate::IsExpired(ts, ttl, now) ? 1 : 0; }

void ttl_key_hashes_of(const char* key, size_t key_size, uint32_t* h1, uint32_t* h2) {
  const std::string_view k(key, key_size);
  *h1 = ttlstate::Murmur3x86_32(k, ttlstate::kKeyHashSeed1);
  *h2 = ttlstate::Murmur3x86_32(k, ttlstate::kKeyHashSeed2);
}

ttl_status ttl_configure_memory(size_t total_bytes, double write_buffer_ratio) {
  return Guard([&] { ttlstate::ConfigureMemory({total_bytes, write_buffer_ratio}); });
}

void ttl_memory_usage(uint64_t* budget_bytes, double* write_buffer_ratio, uint64_t* block_cache_bytes,
                      uint64_t* write_buffer_bytes) {
  const auto budget = ttlstate::CurrentMemory();
  *budget_bytes = budget.total_bytes;
  *write_buffer_ratio = budget.write_buffer_ratio;
  *block_cache_bytes = ttlstate::SharedBlockCacheUsage();
  *write_buffer_bytes = ttlstate::SharedWriteBufferUsage();
}

ttl_status ttl_mapped_file_add(const char* local, const char* socket, const char* uri, uint64_t size) {
  return Guard([&] { ttlstate::AddMappedFile(local, ttlstate::MappedSource{socket, uri, size}); });
}

int64_t ttl_mapped_file_source(const char* local, char* buf, size_t cap) {
  return ReadInto(buf, cap, [&]() -> std::optional<std::string> {
    auto source = ttlstate::MappedSourceOf(local);
    if (!source) return std::nullopt;
    return source->uri;
  });
}

ttl_status ttl_mapped_file_crc32(const char* socket, const char* uri, uint64_t size, int* outcome,
                                 uint64_t* read_bytes, uint32_t* crc, const char** data, size_t* data_size) {
  return Guard([&] {
    auto whole = ttlstate::MappedFileCrc32(ttlstate::MappedSource{socket, uri, size});
    *outcome = whole.outcome;
    *read_bytes = whole.size;
    *crc = whole.crc;
    Out(std::move(whole.problem), data, data_size);
  });
}

ttl_status ttl_mapped_file_fill(const char* local, const char* uri, uint32_t crc, int* read, int* switched,
                                int* outcome, uint64_t* read_bytes, uint32_t* read_crc, const char** data,
                                size_t* data_size) {
  return Guard([&] {
    auto filled = ttlstate::FillFromSource(local, uri, crc);
    *read = filled.whole ? 1 : 0;
    *switched = filled.switched ? 1 : 0;
    auto whole = filled.whole.value_or(ttlstate::WholeFile{ttlstate::WholeFile::kRead, 0, 0, ""});
    *outcome = whole.outcome;
    *read_bytes = whole.size;
    *read_crc = whole.crc;
    Out(std::move(whole.problem), data, data_size);
  });
}

void ttl_mapped_files_forget(const char* dir) { ttlstate::ForgetMappedFiles(dir); }

void ttl_mapped_reads_take(const char* dir, uint64_t* requests, uint64_t* bytes, uint64_t* local_requests,
                           uint64_t* local_bytes) {
  const auto counters = ttlstate::TakeMappedReads(dir);
  *requests = counters.requests;
  *bytes = counters.bytes;
  *local_requests = counters.local_requests;
  *local_bytes = counters.local_bytes;
}

ttl_status ttl_mapped_file_evict(const char* local, const char* socket, const char* uri, uint64_t size,
                                 uint64_t* freed) {
  return Guard([&] { *freed = ttlstate::EvictToSource(local, ttlstate::MappedSource{socket, uri, size}); });
}

ttl_status ttl_corruptions_take(const char* dir, const char** data, size_t* size) {
  return Guard([&] {
    ListOut out;
    for (const auto& c : ttlstate::TakeCorruptions(dir)) {
      out.Add(c.path);
      out.Add(c.message);
    }
    out.Finish(data, size);
  });
}

void ttl_mapped_reads(uint64_t* requests, uint64_t* bytes, uint64_t* connections) {
  const auto counters = ttlstate::MappedReads();
  *requests = counters.requests;
  *bytes = counters.bytes;
  *connections = counters.connections;
}

int ttl_block_cache_shard_bits(uint64_t capacity) { return ttlstate::BlockCacheShardBits(capacity); }

int ttl_release_free_memory(void) {
#if defined(__GLIBC__)
  return malloc_trim(0);
#else
  return 0;
#endif
}

// KeyHashes

ttl_key_hashes* ttl_key_hashes_new(void) { return Make<ttl_key_hashes>(); }
void ttl_key_hashes_free(ttl_key_hashes* h) { Free(h); }
ttl_status ttl_key_hashes_add(ttl_key_hashes* h, const char* key, size_t key_size) {
  return Guard([&] { h->hashes.Add(std::string_view(key, key_size)); });
}
uint64_t ttl_key_hashes_len(const ttl_key_hashes* h) { return h->hashes.size(); }
namespace {
void CheckLayer(int bits_log2, int probes) {
  if (bits_log2 < 6 || bits_log2 > 36 || probes < 1 || probes > 32) {
    throw std::invalid_argument("key filter layer of 2^" + std::to_string(bits_log2) + " bits and " +
                                std::to_string(probes) + " probes: allowed 2^6..2^36 bits, 1..32 probes");
  }
}
}  // namespace

ttl_status ttl_key_hashes_settle(ttl_key_hashes* h, int bits_log2, int probes) {
  return Guard([&] {
    CheckLayer(bits_log2, probes);
    h->hashes.Settle(bits_log2, probes);
  });
}
ttl_status ttl_key_hashes_bloom_words(const ttl_key_hashes* h, int bits_log2, int probes, const char** data,
                                      size_t* size) {
  return Guard([&] {
    CheckLayer(bits_log2, probes);
    Out(h->hashes.BloomWords(bits_log2, probes), data, size);
  });
}

// CleanupCursor

ttl_cursor* ttl_cursor_new(void) { return Make<ttl_cursor>(std::make_shared<ttlstate::CleanupCursor>()); }
void ttl_cursor_free(ttl_cursor* c) { Free(c); }
int ttl_cursor_next(const ttl_cursor* c, const char** data, size_t* size) {
  return OutOptional(c->cursor->next, data, size);
}

// Scan

void ttl_scan_free(ttl_scan* s) { Free(s); }
ttl_status ttl_scan_next_chunk(ttl_scan* s, size_t max_bytes, int* done, const char** data, size_t* size) {
  return Guard([&] {
    ListOut out;
    *done = s->scan->Next(max_bytes, [&](std::string_view key, const std::string* value) {
      out.Add(key);
      value ? out.Add(*value) : out.AddNone();
    }) ? 1 : 0;
    out.Finish(data, size);
  });
}

// Txn

void ttl_txn_free(ttl_txn* t) { Free(t); }

int64_t ttl_txn_get_into(ttl_txn* t, const char* key, size_t key_size, char* buf, size_t cap) {
  return ReadInto(buf, cap, [&] { return t->txn->Get(std::string_view(key, key_size)); });
}

int64_t ttl_txn_get_entry_into(ttl_txn* t, const char* key, size_t key_size, int64_t* ts, char* buf,
                               size_t cap) {
  *ts = 0;
  return ReadInto(buf, cap, [&] { return t->txn->GetEntry(std::string_view(key, key_size), ts); });
}

ttl_status ttl_txn_remove_if_expired(ttl_txn* t, const char* key, size_t key_size) {
  return Guard([&] { t->txn->RemoveIfExpired(std::string_view(key, key_size)); });
}

ttl_status ttl_txn_multi_get(ttl_txn* t, const char* keys, size_t keys_size, const char** data, size_t* size) {
  return Guard([&] {
    const auto owned = DecodeKeys(keys, keys_size);
    ListOut out;
    for (const auto& v : t->txn->MultiGet(std::vector<std::string_view>(owned.begin(), owned.end()))) {
      out.AddOptional(v);
    }
    out.Finish(data, size);
  });
}

ttl_status ttl_txn_put(ttl_txn* t, const char* key, size_t key_size, const char* value, size_t value_size,
                       int committed) {
  return Guard([&] {
    // committed: what the caller proved about the key in the committed DB (-1: nothing)
    using C = ttlstate::Txn::Committed;
    const C known = committed < 0 ? C::kUnknown : committed ? C::kPresent : C::kAbsent;
    t->txn->Put(std::string_view(key, key_size), std::string_view(value, value_size), known);
  });
}

ttl_status ttl_txn_append(ttl_txn* t, const char* key, size_t key_size, const char* more, size_t more_size) {
  return Guard([&] { t->txn->Append(std::string_view(key, key_size), std::string_view(more, more_size)); });
}

ttl_status ttl_txn_put_entry(ttl_txn* t, const char* key, size_t key_size, const char* ttl_value,
                             size_t ttl_value_size) {
  return Guard([&] {
    t->txn->PutEntry(std::string_view(key, key_size), std::string_view(ttl_value, ttl_value_size));
  });
}

ttl_status ttl_txn_remove(ttl_txn* t, const char* key, size_t key_size) {
  return Guard([&] { t->txn->Remove(std::string_view(key, key_size)); });
}

ttl_status ttl_txn_scan(ttl_txn* t, const char* lower, size_t lower_size, const char* upper, size_t upper_size,
                        ttl_scan** out) {
  return Guard([&] {
    auto scan = t->txn->NewScan(OptionalArg(lower, lower_size), OptionalArg(upper, upper_size));
    *out = Make<ttl_scan>(std::move(scan));
  });
}

ttl_status ttl_txn_key_scan(ttl_txn* t, ttl_scan** out) {
  return Guard([&] { *out = Make<ttl_scan>(t->txn->NewKeyScan()); });
}

ttl_status ttl_txn_advance_now(ttl_txn* t, int64_t now, int64_t* out) {
  return Guard([&] { *out = t->txn->AdvanceNow(now); });
}
ttl_status ttl_txn_make_writable(ttl_txn* t) { return Guard([&] { t->txn->MakeWritable(); }); }
ttl_status ttl_txn_check_writable(ttl_txn* t) { return Guard([&] { t->txn->CheckWritable(); }); }
ttl_status ttl_txn_incremental_step(ttl_txn* t) { return Guard([&] { t->txn->IncrementalStep(); }); }

ttl_status ttl_txn_write_changelog(ttl_txn* t, const char* path, const char* header_json, uint64_t* records) {
  return Guard([&] { *records = t->txn->WriteChangelog(path, header_json); });
}

ttl_status ttl_txn_apply(ttl_txn* t, const char* sst_path, int end, int64_t* key_change, int64_t* internal_change) {
  return Guard([&] {
    const ttlstate::KeyCount delta = t->txn->Apply(sst_path, end != 0);
    *key_change = delta.keys;
    *internal_change = delta.internal;
  });
}

ttl_status ttl_txn_known_delta(ttl_txn* t, int* known, int64_t* key_change, int64_t* internal_change) {
  return Guard([&] {
    const auto delta = t->txn->KnownDelta();
    *known = delta ? 1 : 0;
    *key_change = delta ? delta->keys : 0;
    *internal_change = delta ? delta->internal : 0;
  });
}

ttl_status ttl_txn_end(ttl_txn* t, const char* state) { return Guard([&] { t->txn->End(EndState(state)); }); }

ttl_status ttl_txn_state(ttl_txn* t, const char** data, size_t* size) {
  return Guard([&] { Out(t->txn->state(), data, size); });
}

int64_t ttl_txn_field_of(const ttl_txn* t, ttl_txn_field field) {
  const auto& txn = *t->txn;
  switch (field) {
    case TTL_TXN_VERSION: return txn.version();
    case TTL_TXN_NOW: return txn.now();
    case TTL_TXN_WRITABLE: return txn.writable() ? 1 : 0;
    case TTL_TXN_PENDING_WRITES: return static_cast<int64_t>(txn.pending_writes());
    case TTL_TXN_EXPIRED_ON_READ: return txn.counters().expired_on_read;
    case TTL_TXN_REMOVED_INCREMENTAL: return txn.counters().removed_incremental;
    case TTL_TXN_PENDING_BYTES: return txn.counters().pending_bytes;
  }
  return 0;
}

// Snapshot

void ttl_snapshot_free(ttl_snapshot* s) { Free(s); }
ttl_status ttl_snapshot_write_record_file(ttl_snapshot* s, const char* path, const char* header_json,
                                          int drop_expired, int64_t ttl, int64_t now, uint64_t* written,
                                          uint64_t* dropped) {
  return Guard([&] {
    std::tie(*written, *dropped) = s->snapshot->WriteRecordFile(path, header_json, drop_expired != 0, ttl, now);
  });
}

// RestoreBuilder

void ttl_restore_free(ttl_restore* b) { Free(b); }
ttl_status ttl_restore_add_changelog(ttl_restore* b, const char* path, uint64_t* records) {
  return Guard([&] { *records = b->builder->AddChangelog(path); });
}
uint64_t ttl_restore_gathered_bytes(const ttl_restore* b) { return b->builder->gathered_bytes(); }
ttl_status ttl_restore_finish(ttl_restore* b, const char* snapshot_path, const char* sst_path,
                              ttl_key_hashes* hashes, uint64_t* snapshot_records, uint64_t* keys,
                              uint64_t* internal_keys) {
  return Guard([&] {
    const auto r = b->builder->Finish(snapshot_path, sst_path, hashes ? &hashes->hashes : nullptr);
    *snapshot_records = r.snapshot_records;
    *keys = r.keys;
    *internal_keys = r.internal_keys;
  });
}

// Connection

ttl_connection* ttl_connection_new(int fd) { return std::make_unique<ttl_connection>(fd).release(); }
void ttl_connection_free(ttl_connection* c) { Free(c); }

ttl_status ttl_connection_serve(ttl_connection* c, ttl_forward_fn forward, void* ctx) {
  return Guard([&] {
    const ttlstate::Connection::Forward fwd = [&](uint8_t code, std::string payload) -> ttlstate::Connection::Reply {
      ttl_reply reply;
      const int r = forward(ctx, code, payload.data(), payload.size(), &reply);
      if (r < 0) throw CallbackFailed(reply.error);
      if (r == 0) return std::nullopt;
      return std::make_pair(reply.code, std::move(reply.payload));
    };
    c->connection.Serve(fwd);
  });
}

void ttl_reply_set(ttl_reply* reply, uint8_t code, const char* payload, size_t payload_size) {
  reply->code = code;
  reply->payload.assign(payload, payload_size);
}

void ttl_reply_fail(ttl_reply* reply, const char* message) { reply->error = message; }

ttl_status ttl_connection_read_frame(ttl_connection* c, int* got, uint8_t* code, const char** data, size_t* size) {
  return Guard([&] {
    std::string payload;
    *got = c->connection.ReadFrame(code, &payload) ? 1 : 0;
    Out(std::move(payload), data, size);
  });
}

ttl_status ttl_connection_send(ttl_connection* c, uint8_t code, const char* payload, size_t payload_size) {
  return Guard([&] { c->connection.Send(code, std::string_view(payload, payload_size)); });
}

ttl_status ttl_connection_bind(ttl_connection* c, uint32_t handle, ttl_txn* txn) {
  return Guard([&] { c->connection.Bind(handle, txn ? txn->txn : nullptr); });
}
void ttl_connection_unbind(ttl_connection* c, uint32_t handle) { c->connection.Unbind(handle); }
uint64_t ttl_connection_native_requests(const ttl_connection* c) { return c->connection.native_requests(); }

// FilterHarness

ttl_harness* ttl_harness_new(void) {
  auto h = std::make_unique<ttl_harness>();
  h->NewRun();
  return h.release();
}
void ttl_harness_free(ttl_harness* h) { Free(h); }

ttl_status ttl_harness_configure(ttl_harness* h, int state_type, size_t timestamp_offset, int64_t ttl,
                                 int64_t query_time_after_num_entries, int64_t fixed_element_length,
                                 int variable_length_list, int* configured) {
  return Guard([&] {
    *configured = h->holder->Configure(ttlstate::MakeFilterConfig(
        static_cast<StateType>(state_type), timestamp_offset, ttl, query_time_after_num_entries,
        fixed_element_length, variable_length_list != 0)) ? 1 : 0;
  });
}

ttl_status ttl_harness_new_run(ttl_harness* h) { return Guard([&] { h->NewRun(); }); }
void ttl_harness_set_time(ttl_harness* h, int64_t now) { h->time->Set(now); }

ttl_status ttl_harness_decide(ttl_harness* h, int value_type, const char* value, size_t value_size, int* decision,
                              int* changed, const char** data, size_t* size) {
  return Guard([&] {
    std::string new_value;
    std::string skip_until;
    const auto d = h->filter->FilterV2(0, rocksdb::Slice(), static_cast<rocksdb::CompactionFilter::ValueType>(value_type),
                                       rocksdb::Slice(value, value_size), &new_value, &skip_until);
    *decision = static_cast<int>(d);
    *changed = d == rocksdb::CompactionFilter::Decision::kChangeValue ? 1 : 0;
    Out(std::move(new_value), data, size);
  });
}

int64_t ttl_harness_time_queries(const ttl_harness* h) { return h->counters->time_queries.load(); }

// Iterator

void ttl_iterator_free(ttl_iterator* it) { Free(it); }
ttl_status ttl_iterator_next_chunk(ttl_iterator* it, size_t max_bytes, const char** data, size_t* size) {
  return Guard([&] {
    ListOut out;
    for (const auto& [key, value] : it->it->NextChunk(max_bytes)) {
      out.Add(key);
      out.Add(value);
    }
    out.Finish(data, size);
  });
}

// DB

ttl_status ttl_db_open(const char* path, int64_t ttl, int state_type, size_t timestamp_offset,
                       int64_t query_time_after_num_entries, uint64_t periodic_compaction_seconds,
                       int64_t fixed_element_length, int variable_length_list, int wall_clock, int mapped_reads,
                       ttl_db** out) {
  return Guard([&] {
    ttlstate::DbOptions o;
    o.ttl = ttl;
    o.state_type = static_cast<StateType>(state_type);
    o.timestamp_offset = timestamp_offset;
    o.query_time_after_num_entries = query_time_after_num_entries;
    o.periodic_compaction_seconds = periodic_compaction_seconds;
    o.fixed_element_length = fixed_element_length;
    o.variable_length_list = variable_length_list != 0;
    o.wall_clock = wall_clock != 0;
    o.mapped_reads = mapped_reads != 0;
    *out = Make<ttl_db>(std::make_unique<ttlstate::Db>(path, o));
  });
}

void ttl_db_free(ttl_db* db) { Free(db); }

int64_t ttl_db_get_into(ttl_db* db, const char* key, size_t key_size, char* buf, size_t cap) {
  return ReadInto(buf, cap, [&] { return db->db->Get(std::string(key, key_size)); });
}

ttl_status ttl_db_multi_get(ttl_db* db, const char* keys, size_t keys_size, const char** data, size_t* size) {
  return Guard([&] {
    ListOut out;
    for (const auto& v : db->db->MultiGet(DecodeKeys(keys, keys_size))) out.AddOptional(v);
    out.Finish(data, size);
  });
}

ttl_status ttl_db_write(ttl_db* db, const char* batch, size_t batch_size) {
  return Guard([&] {
    auto entries = DecodeList(batch, batch_size);
    if (entries.size() % 2 != 0) throw std::invalid_argument("a write batch holds (key, value) pairs");
    std::vector<std::pair<std::string, std::optional<std::string>>> ops;
    ops.reserve(entries.size() / 2);
    for (size_t i = 0; i < entries.size(); i += 2) {
      ops.emplace_back(entries[i] ? std::move(*entries[i]) : std::string(), std::move(entries[i + 1]));
    }
    db->db->Write(ops);
  });
}

ttl_status ttl_db_merge(ttl_db* db, const char* key, size_t key_size, const char* value, size_t value_size) {
  return Guard([&] { db->db->Merge(std::string(key, key_size), std::string(value, value_size)); });
}

ttl_status ttl_db_iterator(ttl_db* db, const char* lower, size_t lower_size, const char* upper, size_t upper_size,
                           ttl_iterator** out) {
  return Guard([&] {
    *out = Make<ttl_iterator>(db->db->NewIterator(OptionalArg(lower, lower_size), OptionalArg(upper, upper_size)));
  });
}

ttl_status ttl_db_compact(ttl_db* db) { return Guard([&] { db->db->CompactAll(); }); }
ttl_status ttl_db_flush(ttl_db* db) { return Guard([&] { db->db->Flush(); }); }
ttl_status ttl_db_warm_metadata(ttl_db* db, int threads) {
  return Guard([&] { db->db->WarmMetadata(static_cast<size_t>(std::max(threads, 1))); });
}
ttl_status ttl_db_checkpoint(ttl_db* db, const char* dir) { return Guard([&] { db->db->Checkpoint(dir); }); }
ttl_status ttl_db_add_key_hashes(ttl_db* db, ttl_key_hashes* hashes, uint64_t* keys) {
  return Guard([&] { *keys = db->db->AddKeyHashes(&hashes->hashes); });
}
ttl_status ttl_db_int_property(ttl_db* db, const char* name, uint64_t* out) {
  return Guard([&] { *out = db->db->IntProperty(name); });
}
ttl_status ttl_db_count_keys(ttl_db* db, uint64_t* out, uint64_t* internal) {
  return Guard([&] {
    const ttlstate::KeyCount n = db->db->CountKeys();
    *out = static_cast<uint64_t>(n.keys);
    *internal = static_cast<uint64_t>(n.internal);
  });
}
void ttl_db_set_time(ttl_db* db, int64_t now) { db->db->SetTime(now); }

ttl_status ttl_db_begin(ttl_db* db, const char* label, int64_t version, int64_t now, int writable, int ttl_enabled,
                        int64_t ttl, int update_on_read, int return_expired, int64_t incremental_size,
                        int incremental_per_record, const ttl_cursor* cursor, int log_operations, ttl_txn** out) {
  return Guard([&] {
    ttlstate::TtlRules rules;
    rules.enabled = ttl_enabled != 0;
    rules.ttl = ttl;
    rules.update_on_read = update_on_read != 0;
    rules.return_expired = return_expired != 0;
    rules.incremental_size = incremental_size;
    rules.incremental_per_record = incremental_per_record != 0;
    auto txn = std::make_shared<ttlstate::Txn>(db->db->core(), label, version, now, writable != 0, rules,
                                               cursor ? cursor->cursor : nullptr, log_operations != 0);
    *out = Make<ttl_txn>(std::move(txn));
  });
}

ttl_status ttl_db_snapshot(ttl_db* db, ttl_snapshot** out) {
  return Guard([&] { *out = Make<ttl_snapshot>(db->db->NewSnapshot()); });
}

ttl_status ttl_db_restore_builder(ttl_db* db, ttl_restore** out) {
  return Guard([&] { *out = Make<ttl_restore>(std::make_unique<ttlstate::RestoreBuilder>(db->db->core())); });
}

ttl_status ttl_db_apply_changelog_file(ttl_db* db, const char* path, ttl_key_hashes* hashes, int count_keys,
                                       size_t ingest_min_keys, uint64_t* records, int64_t* key_change,
                                       int64_t* internal_change) {
  return Guard([&] {
    ttlstate::KeyCount delta;
    std::tie(*records, delta) =
        db->db->ApplyChangelogFile(path, hashes ? &hashes->hashes : nullptr, ingest_min_keys, count_keys != 0);
    *key_change = delta.keys;
    *internal_change = delta.internal;
  });
}

int ttl_db_has_filter(const ttl_db* db) { return db->db->HasFilter() ? 1 : 0; }

void ttl_db_filter_metrics(const ttl_db* db, int64_t* entries_seen, int64_t* removed, int64_t* rewritten,
                           int64_t* time_queries) {
  const auto& c = db->db->Counters();
  *entries_seen = c.entries_seen.load();
  *removed = c.removed.load();
  *rewritten = c.rewritten.load();
  *time_queries = c.time_queries.load();
}

ttl_status ttl_db_close(ttl_db* db) { return Guard([&] { db->db->Close(); }); }

}  // extern "C"
