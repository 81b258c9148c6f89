"""The native library's C ABI, declared once: every function, status code, handle and field.

`python -m ttlstate.codegen cpp` writes the C declarations from this table
(`ttlstate/generated/c_api_functions.h`, included by native/include/ttlstate/c_api.h, where the
ABI's conventions are), so the compiler holds native/src/c_api.cpp to it, and `_native_lib`
derives the ctypes signatures from it when it loads the library: a function's declaration, its
binding and whether its call releases the GIL are written here and nowhere else.

Each function is its C prototype, as the header declares it, and how Python calls it:
`keep_gil` for calls that never block (in-memory work: calling them without releasing the GIL
saves releasing and taking it back), `checked=False` for per-entry calls that return a
ttl_status the caller checks itself (an errcheck costs a Python call per call), `by_address`
for pointer parameters a per-entry path passes as a plain address (no ctypes object per call).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Param:
    c_type: str  # as C declares it, e.g. "const char*"
    name: str


@dataclass(frozen=True)
class Function:
    result: str  # the C result type; "ttl_status": a status, raised as its exception when checked
    name: str
    params: tuple[Param, ...]
    keep_gil: bool = False
    checked: bool = True
    by_address: frozenset[str] = frozenset()
    comment: str = ""  # the header's comment above the declaration
    group: str = ""  # starts a group of declarations: the header's comment above it

    @property
    def declaration(self) -> str:
        params = ", ".join(f"{p.c_type} {p.name}" for p in self.params) or "void"
        return f"{self.result} {self.name}({params})"


_DECLARATION = re.compile(r"^\s*(.+?)\s*\b(\w+)\s*\((.*)\)\s*$", re.S)
_PARAM = re.compile(r"^\s*(.+?)\s*\b(\w+)\s*$", re.S)


def parse_declaration(text: str) -> tuple[str, str, tuple[Param, ...]]:
    """(result type, name, parameters) of a C prototype without its `;` (spaces around `*`
    normalised to `T* name`)."""
    m = _DECLARATION.match(text)
    if m is None:
        raise ValueError(f"not a C prototype: {text!r}")
    result, name, params = m.groups()
    parsed: list[Param] = []
    if params.strip() not in ("", "void"):
        for p in params.split(","):
            pm = _PARAM.match(p)
            if pm is None:
                raise ValueError(f"not a C parameter: {p!r} in {text!r}")
            parsed.append(Param(_normalise(pm.group(1)), pm.group(2)))
    return _normalise(result), name, tuple(parsed)


def _normalise(c_type: str) -> str:
    return re.sub(r"\s*\*", "*", " ".join(c_type.split()))


def fn(declaration: str, *, keep_gil: bool = False, checked: bool = True,
       by_address: tuple[str, ...] = (), comment: str = "", group: str = "") -> Function:
    result, name, params = parse_declaration(declaration)
    unknown = set(by_address) - {p.name for p in params}
    if unknown:
        raise ValueError(f"{name}: by_address names no parameter {sorted(unknown)}")
    return Function(result, name, params, keep_gil, checked, frozenset(by_address), comment, group)


@dataclass(frozen=True)
class Status:
    name: str
    value: int
    raises: str  # the Python exception (a builtin, or one of _native_lib's)


# Which Python exception a failure raises (the pybind11 defaults the module had before).
STATUSES = (
    Status("TTL_OK", 0, ""),
    Status("TTL_ERR_RUNTIME", 1, "RuntimeError"),
    Status("TTL_ERR_STATE", 2, "StateError"),  # a RuntimeError
    Status("TTL_ERR_PEER_GONE", 3, "PeerGone"),  # a ConnectionError
    Status("TTL_ERR_VALUE", 4, "ValueError"),
    Status("TTL_ERR_MEMORY", 5, "MemoryError"),
    Status("TTL_ERR_INDEX", 6, "IndexError"),
    Status("TTL_ERR_OVERFLOW", 7, "OverflowError"),
    # The Python callback raised: the caller re-raises its exception.
    Status("TTL_ERR_CALLBACK", 8, "NativeFailure"),
)

# Opaque handles: created by a function of the API, freed by its ttl_*_free.
HANDLES = ("ttl_db", "ttl_txn", "ttl_scan", "ttl_iterator", "ttl_snapshot", "ttl_restore",
           "ttl_key_hashes", "ttl_cursor", "ttl_connection", "ttl_harness", "ttl_reply")

# ttl_txn_field_of's fields of a transaction.
TXN_FIELDS = ("VERSION", "NOW", "WRITABLE", "PENDING_WRITES", "EXPIRED_ON_READ",
              "REMOVED_INCREMENTAL", "PENDING_BYTES")

# The callback type ttl_connection_serve takes (a typedef: every pointer reaches Python as an
# address).
FORWARD = fn("int ttl_forward_fn(void* ctx, uint8_t code, const char* payload, size_t payload_size, "
             "ttl_reply* reply)",
             comment="The forward callback of ttl_connection_serve answers a control-plane frame: "
                     "it returns 0 for no reply, 1 after ttl_reply_set, -1 after ttl_reply_fail (it "
                     "raised; serve then fails with TTL_ERR_CALLBACK unless the native loop turns "
                     "the failure into an error frame).")

FUNCTIONS: tuple[Function, ...] = (
    fn("const char* ttl_last_error(void)", keep_gil=True),
    fn("int ttl_last_status(void)", keep_gil=True,
       comment="the ttl_status of the thread's last failed call"),
    fn("void ttl_take(char* buf, size_t cap)", keep_gil=True, comment="the value a ttl_*_get_into kept"),
    fn("ttl_status ttl_constants(const char** data, size_t* size)", keep_gil=True,
       group="Module level. ttl_constants: \"NAME=integer\" lines (the filter's, the formats', "
               "the protocol's)."),
    fn("ttl_status ttl_encode_ttl_value(int64_t ts, const char* user, size_t user_size, "
       "const char** data, size_t* size)", keep_gil=True),
    fn("int ttl_is_expired(int64_t ts, int64_t ttl, int64_t now)", keep_gil=True),
    fn("void ttl_key_hashes_of(const char* key, size_t key_size, uint32_t* h1, uint32_t* h2)", keep_gil=True),
    fn("ttl_status ttl_configure_memory(size_t total_bytes, double write_buffer_ratio)"),
    fn("void ttl_memory_usage(uint64_t* budget_bytes, double* write_buffer_ratio, "
       "uint64_t* block_cache_bytes, uint64_t* write_buffer_bytes)", keep_gil=True),
    fn("ttl_status ttl_mapped_file_add(const char* local, const char* socket, const char* uri, "
       "uint64_t size)", keep_gil=True,
       group="SST files read in place through the shim's range service (mapped_files.h)."),
    fn("int64_t ttl_mapped_file_source(const char* local, char* buf, size_t cap)", keep_gil=True,
       comment="The checkpoint file a placeholder reads (-1: not one)."),
    fn("ttl_status ttl_mapped_file_crc32(const char* socket, const char* uri, uint64_t size, int* outcome, "
       "uint64_t* read_bytes, uint32_t* crc, const char** data, size_t* size_out)",
       comment="Reads the whole file: its bytes and the CRC-32 of its first `size` (outcome RANGE_DATA), "
               "or that it is missing (RANGE_MISSING) or its file system's checksums reject it "
               "(RANGE_CORRUPT, why: data)."),
    fn("ttl_status ttl_mapped_file_fill(const char* local, const char* uri, uint32_t crc, int* read, "
       "int* switched, int* outcome, uint64_t* read_bytes, uint32_t* read_crc, const char** data, "
       "size_t* size_out)",
       comment="Fills a placeholder from its checkpoint file (read 0: not its placeholder any more), "
               "switching its reads to the local disk when the copy is whole (switched 1); what was "
               "read as ttl_mapped_file_crc32 says."),
    fn("void ttl_mapped_files_forget(const char* dir)", keep_gil=True),
    fn("void ttl_mapped_reads(uint64_t* requests, uint64_t* bytes, uint64_t* connections)", keep_gil=True),
    fn("void ttl_mapped_reads_take(const char* dir, uint64_t* requests, uint64_t* bytes, "
       "uint64_t* local_requests, uint64_t* local_bytes)", keep_gil=True,
       comment="The reads of the SST files in `dir` since the last call: of checkpoint files in "
               "place, and of the local disk."),
    fn("ttl_status ttl_mapped_file_evict(const char* local, const char* socket, const char* uri, "
       "uint64_t size, uint64_t* freed)",
       comment="The uploaded local SST file read from its copy from now on, its blocks freed "
               "(EvictToSource; socket empty: uri is a local path)."),
    fn("ttl_status ttl_corruptions_take(const char* dir, const char** data, size_t* size)", keep_gil=True,
       comment="Pairs (the file, RocksDB's message) of the corruption reads and writes met in files "
               "of the directory `dir` since the last call (corruptions.h)."),
    fn("int ttl_block_cache_shard_bits(uint64_t capacity)", keep_gil=True,
       comment="log2 of the shards a block cache of this capacity gets (each big enough for a "
               "large SST's Bloom filter)."),
    fn("int ttl_release_free_memory(void)",
       comment="Hands memory the process's allocator holds free back to the OS (glibc's "
               "malloc_trim; elsewhere nothing); returns 1 if it released any."),
    fn("ttl_key_hashes* ttl_key_hashes_new(void)", keep_gil=True, group="KeyHashes"),
    fn("void ttl_key_hashes_free(ttl_key_hashes* h)"),
    fn("ttl_status ttl_key_hashes_add(ttl_key_hashes* h, const char* key, size_t key_size)", keep_gil=True),
    fn("uint64_t ttl_key_hashes_len(const ttl_key_hashes* h)", keep_gil=True),
    fn("ttl_status ttl_key_hashes_settle(ttl_key_hashes* h, int bits_log2, int probes)",
       comment="From now on keeps the bits of that layer (the largest asked for) instead of hash pairs."),
    fn("ttl_status ttl_key_hashes_bloom_words(const ttl_key_hashes* h, int bits_log2, int probes, "
       "const char** data, size_t* size)"),
    fn("ttl_cursor* ttl_cursor_new(void)", keep_gil=True, group="CleanupCursor"),
    fn("void ttl_cursor_free(ttl_cursor* c)"),
    fn("int ttl_cursor_next(const ttl_cursor* c, const char** data, size_t* size)", keep_gil=True,
       comment="0: None"),
    fn("void ttl_scan_free(ttl_scan* s)", group="Scan: a list of (key, value or None) pairs per chunk."),
    fn("ttl_status ttl_scan_next_chunk(ttl_scan* s, size_t max_bytes, int* done, const char** data, "
       "size_t* size)"),
    fn("void ttl_txn_free(ttl_txn* t)",
       group="Txn. Keys of multi_get: a list. committed: -1 None, 0 False, 1 True."),
    fn("int64_t ttl_txn_get_into(ttl_txn* t, const char* key, size_t key_size, char* buf, size_t cap)"),
    fn("int64_t ttl_txn_get_entry_into(ttl_txn* t, const char* key, size_t key_size, int64_t* ts, "
       "char* buf, size_t cap)", by_address=("ts",)),
    fn("ttl_status ttl_txn_remove_if_expired(ttl_txn* t, const char* key, size_t key_size)"),
    fn("ttl_status ttl_txn_multi_get(ttl_txn* t, const char* keys, size_t keys_size, const char** data, "
       "size_t* size)"),
    fn("ttl_status ttl_txn_put(ttl_txn* t, const char* key, size_t key_size, const char* value, "
       "size_t value_size, int committed)", keep_gil=True, checked=False),
    fn("ttl_status ttl_txn_append(ttl_txn* t, const char* key, size_t key_size, const char* more, "
       "size_t more_size)"),
    fn("ttl_status ttl_txn_put_entry(ttl_txn* t, const char* key, size_t key_size, const char* ttl_value, "
       "size_t ttl_value_size)", keep_gil=True),
    fn("ttl_status ttl_txn_remove(ttl_txn* t, const char* key, size_t key_size)", keep_gil=True,
       checked=False),
    fn("ttl_status ttl_txn_scan(ttl_txn* t, const char* lower, size_t lower_size, const char* upper, "
       "size_t upper_size, ttl_scan** out)"),
    fn("ttl_status ttl_txn_key_scan(ttl_txn* t, ttl_scan** out)"),
    fn("ttl_status ttl_txn_advance_now(ttl_txn* t, int64_t now, int64_t* out)", keep_gil=True),
    fn("ttl_status ttl_txn_make_writable(ttl_txn* t)", keep_gil=True),
    fn("ttl_status ttl_txn_check_writable(ttl_txn* t)", keep_gil=True),
    fn("ttl_status ttl_txn_incremental_step(ttl_txn* t)"),
    fn("ttl_status ttl_txn_write_changelog(ttl_txn* t, const char* path, const char* header_json, "
       "uint64_t* records)"),
    fn("ttl_status ttl_txn_apply(ttl_txn* t, const char* sst_path, int end, int64_t* key_change, "
       "int64_t* internal_change)",
       comment="end: 0 leaves the transaction open (its pending writes readable by a concurrent "
               "ttl_txn_write_changelog) until ttl_txn_end(t, \"committed\")."),
    fn("ttl_status ttl_txn_known_delta(ttl_txn* t, int* known, int64_t* key_change, "
       "int64_t* internal_change)",
       comment="*known = 1 and *key_change set when the change in keys is known without the "
               "apply's lookups. *internal_change: of it, the internal column families' keys'."),
    fn("ttl_status ttl_txn_end(ttl_txn* t, const char* state)", keep_gil=True),
    fn("ttl_status ttl_txn_state(ttl_txn* t, const char** data, size_t* size)", keep_gil=True),
    fn("int64_t ttl_txn_field_of(const ttl_txn* t, ttl_txn_field field)", keep_gil=True),
    fn("void ttl_snapshot_free(ttl_snapshot* s)", group="Snapshot"),
    fn("ttl_status ttl_snapshot_write_record_file(ttl_snapshot* s, const char* path, "
       "const char* header_json, int drop_expired, int64_t ttl, int64_t now, uint64_t* written, "
       "uint64_t* dropped)"),
    fn("void ttl_restore_free(ttl_restore* b)", group="RestoreBuilder"),
    fn("ttl_status ttl_restore_add_changelog(ttl_restore* b, const char* path, uint64_t* records)"),
    fn("uint64_t ttl_restore_gathered_bytes(const ttl_restore* b)", keep_gil=True),
    fn("ttl_status ttl_restore_finish(ttl_restore* b, const char* snapshot_path, const char* sst_path, "
       "ttl_key_hashes* hashes, uint64_t* snapshot_records, uint64_t* keys, uint64_t* internal_keys)"),
    fn("ttl_connection* ttl_connection_new(int fd)", group="Connection (see ttl_forward_fn)."),
    fn("void ttl_connection_free(ttl_connection* c)"),
    fn("ttl_status ttl_connection_serve(ttl_connection* c, ttl_forward_fn forward, void* ctx)"),
    fn("void ttl_reply_set(ttl_reply* reply, uint8_t code, const char* payload, size_t payload_size)",
       keep_gil=True),
    fn("void ttl_reply_fail(ttl_reply* reply, const char* message)", keep_gil=True),
    fn("ttl_status ttl_connection_read_frame(ttl_connection* c, int* got, uint8_t* code, "
       "const char** data, size_t* size)"),
    fn("ttl_status ttl_connection_send(ttl_connection* c, uint8_t code, const char* payload, "
       "size_t payload_size)"),
    fn("ttl_status ttl_connection_bind(ttl_connection* c, uint32_t handle, ttl_txn* txn)", keep_gil=True),
    fn("void ttl_connection_unbind(ttl_connection* c, uint32_t handle)", keep_gil=True),
    fn("uint64_t ttl_connection_native_requests(const ttl_connection* c)", keep_gil=True),
    fn("ttl_harness* ttl_harness_new(void)", group="FilterHarness"),
    fn("void ttl_harness_free(ttl_harness* h)"),
    fn("ttl_status ttl_harness_configure(ttl_harness* h, int state_type, size_t timestamp_offset, "
       "int64_t ttl, int64_t query_time_after_num_entries, int64_t fixed_element_length, "
       "int variable_length_list, int* configured)", keep_gil=True),
    fn("ttl_status ttl_harness_new_run(ttl_harness* h)", keep_gil=True),
    fn("void ttl_harness_set_time(ttl_harness* h, int64_t now)", keep_gil=True),
    fn("ttl_status ttl_harness_decide(ttl_harness* h, int value_type, const char* value, "
       "size_t value_size, int* decision, int* changed, const char** data, size_t* size)", keep_gil=True),
    fn("int64_t ttl_harness_time_queries(const ttl_harness* h)", keep_gil=True),
    fn("void ttl_iterator_free(ttl_iterator* it)", group="Iterator: a list of (key, value) pairs per chunk."),
    fn("ttl_status ttl_iterator_next_chunk(ttl_iterator* it, size_t max_bytes, const char** data, "
       "size_t* size)"),
    fn("ttl_status ttl_db_open(const char* path, int64_t ttl, int state_type, size_t timestamp_offset, "
       "int64_t query_time_after_num_entries, uint64_t periodic_compaction_seconds, "
       "int64_t fixed_element_length, int variable_length_list, int wall_clock, int mapped_reads, "
       "ttl_db** out)",
       group="DB. Batches of write: a list of (key, value) pairs; an absent value deletes."),
    fn("void ttl_db_free(ttl_db* db)"),
    fn("int64_t ttl_db_get_into(ttl_db* db, const char* key, size_t key_size, char* buf, size_t cap)"),
    fn("ttl_status ttl_db_multi_get(ttl_db* db, const char* keys, size_t keys_size, const char** data, "
       "size_t* size)"),
    fn("ttl_status ttl_db_write(ttl_db* db, const char* batch, size_t batch_size)"),
    fn("ttl_status ttl_db_merge(ttl_db* db, const char* key, size_t key_size, const char* value, "
       "size_t value_size)"),
    fn("ttl_status ttl_db_iterator(ttl_db* db, const char* lower, size_t lower_size, const char* upper, "
       "size_t upper_size, ttl_iterator** out)"),
    fn("ttl_status ttl_db_compact(ttl_db* db)"),
    fn("ttl_status ttl_db_flush(ttl_db* db)"),
    fn("ttl_status ttl_db_warm_metadata(ttl_db* db, int threads)"),
    fn("ttl_status ttl_db_checkpoint(ttl_db* db, const char* dir)"),
    fn("ttl_status ttl_db_add_key_hashes(ttl_db* db, ttl_key_hashes* hashes, uint64_t* keys)"),
    fn("ttl_status ttl_db_int_property(ttl_db* db, const char* name, uint64_t* out)"),
    fn("ttl_status ttl_db_count_keys(ttl_db* db, uint64_t* out, uint64_t* internal)"),
    fn("void ttl_db_set_time(ttl_db* db, int64_t now)", keep_gil=True),
    fn("ttl_status ttl_db_begin(ttl_db* db, const char* label, int64_t version, int64_t now, int writable, "
       "int ttl_enabled, int64_t ttl, int update_on_read, int return_expired, int64_t incremental_size, "
       "int incremental_per_record, const ttl_cursor* cursor, int log_operations, ttl_txn** out)",
       comment="log_operations: the changelog logs every put, delete and append in order (Txn)."),
    fn("ttl_status ttl_db_snapshot(ttl_db* db, ttl_snapshot** out)"),
    fn("ttl_status ttl_db_restore_builder(ttl_db* db, ttl_restore** out)"),
    fn("ttl_status ttl_db_apply_changelog_file(ttl_db* db, const char* path, ttl_key_hashes* hashes, "
       "int count_keys, size_t ingest_min_keys, uint64_t* records, int64_t* key_change, "
       "int64_t* internal_change)"),
    fn("int ttl_db_has_filter(const ttl_db* db)", keep_gil=True),
    fn("void ttl_db_filter_metrics(const ttl_db* db, int64_t* entries_seen, int64_t* removed, "
       "int64_t* rewritten, int64_t* time_queries)", keep_gil=True),
    fn("ttl_status ttl_db_close(ttl_db* db)"),
)
