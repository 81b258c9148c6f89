// The native engine's C ABI: what python/ttlstate/_native.py binds with ctypes.
//
// A plain C ABI (rather than a CPython extension) makes one shared library serve every Python
// version: nothing here depends on the interpreter's ABI. Conventions:
// - Objects are opaque handles, created by a function of the API and freed by its ttl_*_free.
// - Every function that can fail returns a ttl_status; on failure ttl_last_error() is the
//   message (thread-local, valid until the thread's next call).
// - Bytes returned by a call are in a thread-local buffer, valid until the thread's next call:
//   `const char** data, size_t* size` out-parameters point into it.
// - Single values on the per-entry paths (ttl_*_get_into) are copied into the caller's buffer
//   instead, with no status: they return the size, -1 for none, -2 on failure (then
//   ttl_last_status); a value larger than the buffer is kept for ttl_take.
// - Lists, both ways: [u32 count][u32 offsets, count + 1, from the list's start][u8 present,
//   count][the entries' bytes], little-endian; an absent entry (None) is empty. A pair is two
//   entries.
// - Optional arguments: a NULL pointer means None.
#pragma once

#include <stddef.h>
#include <stdint.h>

#define TTL_API __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

// Which Python exception a failure raises (the pybind11 defaults the module had before).
typedef enum {
  TTL_OK = 0,
  TTL_ERR_RUNTIME = 1,    // RuntimeError
  TTL_ERR_STATE = 2,      // _native.StateError (a RuntimeError)
  TTL_ERR_PEER_GONE = 3,  // _native.PeerGone (a ConnectionError)
  TTL_ERR_VALUE = 4,      // ValueError
  TTL_ERR_MEMORY = 5,     // MemoryError
  TTL_ERR_INDEX = 6,      // IndexError
  TTL_ERR_OVERFLOW = 7,   // OverflowError
  TTL_ERR_CALLBACK = 8,   // the Python callback raised: the caller re-raises its exception
} ttl_status;

typedef struct ttl_db ttl_db;
typedef struct ttl_txn ttl_txn;
typedef struct ttl_scan ttl_scan;
typedef struct ttl_iterator ttl_iterator;
typedef struct ttl_snapshot ttl_snapshot;
typedef struct ttl_restore ttl_restore;
typedef struct ttl_key_hashes ttl_key_hashes;
typedef struct ttl_cursor ttl_cursor;
typedef struct ttl_connection ttl_connection;
typedef struct ttl_harness ttl_harness;
typedef struct ttl_reply ttl_reply;

TTL_API const char* ttl_last_error(void);
TTL_API int ttl_last_status(void);  // the ttl_status of the thread's last failed call
TTL_API void ttl_take(char* buf, size_t cap);  // the value a ttl_*_get_into kept

// Module level. ttl_constants: "NAME=integer" lines (the filter's, the formats', the protocol's).
TTL_API ttl_status ttl_constants(const char** data, size_t* size);
TTL_API ttl_status ttl_encode_ttl_value(int64_t ts, const char* user, size_t user_size, const char** data,
                                        size_t* size);
TTL_API int ttl_is_expired(int64_t ts, int64_t ttl, int64_t now);
TTL_API void ttl_key_hashes_of(const char* key, size_t key_size, uint32_t* h1, uint32_t* h2);
TTL_API ttl_status ttl_configure_memory(size_t total_bytes, double write_buffer_ratio);
TTL_API void ttl_memory_usage(uint64_t* budget_bytes, double* write_buffer_ratio, uint64_t* block_cache_bytes,
                              uint64_t* write_buffer_bytes);
// Hands memory the process's allocator holds free back to the OS (glibc's malloc_trim; elsewhere
// nothing); returns 1 if it released any.
TTL_API int ttl_release_free_memory(void);

// KeyHashes
TTL_API ttl_key_hashes* ttl_key_hashes_new(void);
TTL_API void ttl_key_hashes_free(ttl_key_hashes* h);
TTL_API ttl_status ttl_key_hashes_add(ttl_key_hashes* h, const char* key, size_t key_size);
TTL_API uint64_t ttl_key_hashes_len(const ttl_key_hashes* h);
TTL_API ttl_status ttl_key_hashes_bloom_words(const ttl_key_hashes* h, int bits_log2, int probes,
                                              const char** data, size_t* size);

// CleanupCursor
TTL_API ttl_cursor* ttl_cursor_new(void);
TTL_API void ttl_cursor_free(ttl_cursor* c);
TTL_API int ttl_cursor_next(const ttl_cursor* c, const char** data, size_t* size);  // 0: None

// Scan: a list of (key, value or None) pairs per chunk.
TTL_API void ttl_scan_free(ttl_scan* s);
TTL_API ttl_status ttl_scan_next_chunk(ttl_scan* s, size_t max_bytes, int* done, const char** data, size_t* size);

// Txn. Keys of multi_get: a list. committed: -1 None, 0 False, 1 True.
typedef enum {
  TTL_TXN_VERSION = 0,
  TTL_TXN_NOW = 1,
  TTL_TXN_WRITABLE = 2,
  TTL_TXN_PENDING_WRITES = 3,
  TTL_TXN_EXPIRED_ON_READ = 4,
  TTL_TXN_REMOVED_INCREMENTAL = 5,
  TTL_TXN_PENDING_BYTES = 6,
} ttl_txn_field;
TTL_API void ttl_txn_free(ttl_txn* t);
TTL_API int64_t ttl_txn_get_into(ttl_txn* t, const char* key, size_t key_size, char* buf, size_t cap);
TTL_API int64_t ttl_txn_get_entry_into(ttl_txn* t, const char* key, size_t key_size, int64_t* ts, char* buf,
                                       size_t cap);
TTL_API ttl_status ttl_txn_remove_if_expired(ttl_txn* t, const char* key, size_t key_size);
TTL_API ttl_status ttl_txn_multi_get(ttl_txn* t, const char* keys, size_t keys_size, const char** data,
                                     size_t* size);
TTL_API ttl_status ttl_txn_put(ttl_txn* t, const char* key, size_t key_size, const char* value, size_t value_size,
                               int committed);
TTL_API ttl_status ttl_txn_remove(ttl_txn* t, const char* key, size_t key_size);
TTL_API ttl_status ttl_txn_scan(ttl_txn* t, const char* lower, size_t lower_size, const char* upper,
                                size_t upper_size, ttl_scan** out);
TTL_API ttl_status ttl_txn_key_scan(ttl_txn* t, ttl_scan** out);
TTL_API ttl_status ttl_txn_advance_now(ttl_txn* t, int64_t now, int64_t* out);
TTL_API ttl_status ttl_txn_make_writable(ttl_txn* t);
TTL_API ttl_status ttl_txn_check_writable(ttl_txn* t);
TTL_API ttl_status ttl_txn_incremental_step(ttl_txn* t);
TTL_API ttl_status ttl_txn_write_changelog(ttl_txn* t, const char* path, const char* header_json,
                                           uint64_t* records);
// end: 0 leaves the transaction open (its pending writes readable by a concurrent
// ttl_txn_write_changelog) until ttl_txn_end(t, "committed").
TTL_API ttl_status ttl_txn_apply(ttl_txn* t, const char* sst_path, int end, int64_t* key_change);
// *known = 1 and *key_change set when the change in keys is known without the apply's lookups.
TTL_API ttl_status ttl_txn_known_delta(ttl_txn* t, int* known, int64_t* key_change);
TTL_API ttl_status ttl_txn_end(ttl_txn* t, const char* state);
TTL_API ttl_status ttl_txn_state(ttl_txn* t, const char** data, size_t* size);
TTL_API int64_t ttl_txn_field_of(const ttl_txn* t, ttl_txn_field field);

// Snapshot
TTL_API void ttl_snapshot_free(ttl_snapshot* s);
TTL_API ttl_status ttl_snapshot_write_record_file(ttl_snapshot* s, const char* path, const char* header_json,
                                                  int drop_expired, int64_t ttl, int64_t now, uint64_t* written,
                                                  uint64_t* dropped);

// RestoreBuilder
TTL_API void ttl_restore_free(ttl_restore* b);
TTL_API ttl_status ttl_restore_add_changelog(ttl_restore* b, const char* path, uint64_t* records);
TTL_API uint64_t ttl_restore_gathered_bytes(const ttl_restore* b);
TTL_API ttl_status ttl_restore_finish(ttl_restore* b, const char* snapshot_path, const char* sst_path,
                                      ttl_key_hashes* hashes, uint64_t* snapshot_records, uint64_t* keys);

// Connection. The forward callback answers a control-plane frame: it returns 0 for no reply,
// 1 after ttl_reply_set, -1 after ttl_reply_fail (it raised; Serve then fails with
// TTL_ERR_CALLBACK unless the native loop turns the failure into an error frame).
typedef int (*ttl_forward_fn)(void* ctx, uint8_t code, const char* payload, size_t payload_size, ttl_reply* reply);
TTL_API ttl_connection* ttl_connection_new(int fd);
TTL_API void ttl_connection_free(ttl_connection* c);
TTL_API ttl_status ttl_connection_serve(ttl_connection* c, ttl_forward_fn forward, void* ctx);
TTL_API void ttl_reply_set(ttl_reply* reply, uint8_t code, const char* payload, size_t payload_size);
TTL_API void ttl_reply_fail(ttl_reply* reply, const char* message);
TTL_API ttl_status ttl_connection_read_frame(ttl_connection* c, int* got, uint8_t* code, const char** data,
                                             size_t* size);
TTL_API ttl_status ttl_connection_send(ttl_connection* c, uint8_t code, const char* payload, size_t payload_size);
TTL_API ttl_status ttl_connection_bind(ttl_connection* c, uint32_t handle, ttl_txn* txn);
TTL_API void ttl_connection_unbind(ttl_connection* c, uint32_t handle);
TTL_API uint64_t ttl_connection_native_requests(const ttl_connection* c);

// FilterHarness
TTL_API ttl_harness* ttl_harness_new(void);
TTL_API void ttl_harness_free(ttl_harness* h);
TTL_API ttl_status ttl_harness_configure(ttl_harness* h, int state_type, size_t timestamp_offset, int64_t ttl,
                                         int64_t query_time_after_num_entries, int64_t fixed_element_length,
                                         int variable_length_list, int* configured);
TTL_API ttl_status ttl_harness_new_run(ttl_harness* h);
TTL_API void ttl_harness_set_time(ttl_harness* h, int64_t now);
TTL_API ttl_status ttl_harness_decide(ttl_harness* h, int value_type, const char* value, size_t value_size,
                                      int* decision, int* changed, const char** data, size_t* size);
TTL_API int64_t ttl_harness_time_queries(const ttl_harness* h);

// Iterator: a list of (key, value) pairs per chunk.
TTL_API void ttl_iterator_free(ttl_iterator* it);
TTL_API ttl_status ttl_iterator_next_chunk(ttl_iterator* it, size_t max_bytes, const char** data, size_t* size);

// DB. Batches of write: a list of (key, value) pairs; an absent value deletes.
TTL_API ttl_status ttl_db_open(const char* path, int64_t ttl, int state_type, size_t timestamp_offset,
                               int64_t query_time_after_num_entries, uint64_t periodic_compaction_seconds,
                               int64_t fixed_element_length, int variable_length_list, int wall_clock,
                               ttl_db** out);
TTL_API void ttl_db_free(ttl_db* db);
TTL_API int64_t ttl_db_get_into(ttl_db* db, const char* key, size_t key_size, char* buf, size_t cap);
TTL_API ttl_status ttl_db_multi_get(ttl_db* db, const char* keys, size_t keys_size, const char** data,
                                    size_t* size);
TTL_API ttl_status ttl_db_write(ttl_db* db, const char* batch, size_t batch_size);
TTL_API ttl_status ttl_db_merge(ttl_db* db, const char* key, size_t key_size, const char* value,
                                size_t value_size);
TTL_API ttl_status ttl_db_iterator(ttl_db* db, const char* lower, size_t lower_size, const char* upper,
                                   size_t upper_size, ttl_iterator** out);
TTL_API ttl_status ttl_db_compact(ttl_db* db);
TTL_API ttl_status ttl_db_flush(ttl_db* db);
TTL_API ttl_status ttl_db_checkpoint(ttl_db* db, const char* dir);
TTL_API ttl_status ttl_db_add_key_hashes(ttl_db* db, ttl_key_hashes* hashes, uint64_t* keys);
TTL_API ttl_status ttl_db_int_property(ttl_db* db, const char* name, uint64_t* out);
TTL_API ttl_status ttl_db_count_keys(ttl_db* db, uint64_t* out);
TTL_API void ttl_db_set_time(ttl_db* db, int64_t now);
TTL_API ttl_status ttl_db_begin(ttl_db* db, const char* label, int64_t version, int64_t now, int writable,
                                int ttl_enabled, int64_t ttl, int update_on_read, int return_expired,
                                int64_t incremental_size, int incremental_per_record, const ttl_cursor* cursor,
                                ttl_txn** out);
TTL_API ttl_status ttl_db_snapshot(ttl_db* db, ttl_snapshot** out);
TTL_API ttl_status ttl_db_restore_builder(ttl_db* db, ttl_restore** out);
TTL_API ttl_status ttl_db_apply_changelog_file(ttl_db* db, const char* path, ttl_key_hashes* hashes, int count_keys,
                                               size_t ingest_min_keys, uint64_t* records, int64_t* key_change);
TTL_API int ttl_db_has_filter(const ttl_db* db);
TTL_API void ttl_db_filter_metrics(const ttl_db* db, int64_t* entries_seen, int64_t* removed, int64_t* rewritten,
                                   int64_t* time_queries);
TTL_API ttl_status ttl_db_close(ttl_db* db);

#ifdef __cplusplus
}
#endif
