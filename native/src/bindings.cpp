// pybind11 module `ttlstate._native`: the RocksDB engine with the TTL filter, and a harness
// that exposes one filter instance's decisions to Python tests.
//
// pybind11 (rather than nanobind): already a build dependency, header-only, mature support for
// the GIL release and bytes conversions used here; the binding is thin so speed is RocksDB's.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ttlstate/compaction_filter.h"
#include "ttlstate/connection.h"
#include "ttlstate/db.h"
#include "ttlstate/errors.h"
#include "ttlstate/protocol.h"
#include "ttlstate/record_file.h"
#include "ttlstate/restore.h"
#include "ttlstate/ttl_value.h"
#include "ttlstate/txn.h"

namespace py = pybind11;
using ttlstate::Db;
using ttlstate::DbOptions;
using ttlstate::StateType;

namespace {

py::object BytesOrNone(const std::optional<std::string>& v) {
  if (!v) return py::none();
  return py::bytes(*v);
}

// One filter instance (one compaction run) with its own holder, clock and counters.
class FilterHarness {
 public:
  FilterHarness()
      : holder_(std::make_shared<ttlstate::ConfigHolder>()),
        time_(std::make_shared<ttlstate::TimeSource>()),
        counters_(std::make_shared<ttlstate::FilterCounters>()) {
    NewRun();
  }

  bool Configure(int state_type, size_t timestamp_offset, int64_t ttl, int64_t query_time_after_num_entries,
                 int64_t fixed_element_length, bool variable_length_list) {
    return holder_->Configure(ttlstate::MakeFilterConfig(static_cast<StateType>(state_type), timestamp_offset,
                                                         ttl, query_time_after_num_entries,
                                                         fixed_element_length, variable_length_list));
  }

  void NewRun() { filter_ = std::make_unique<ttlstate::TtlCompactionFilter>(holder_, time_, counters_); }
  void SetTime(int64_t now) { time_->Set(now); }

  py::tuple Decide(int value_type, const std::string& value) {
    std::string new_value;
    std::string skip_until;
    const auto decision = filter_->FilterV2(0, rocksdb::Slice(), static_cast<rocksdb::CompactionFilter::ValueType>(value_type),
                                            value, &new_value, &skip_until);
    py::object changed = decision == rocksdb::CompactionFilter::Decision::kChangeValue
                             ? py::object(py::bytes(new_value)) : py::object(py::none());
    return py::make_tuple(static_cast<int>(decision), changed);
  }

  int64_t TimeQueries() const { return counters_->time_queries.load(); }

 private:
  std::shared_ptr<ttlstate::ConfigHolder> holder_;
  std::shared_ptr<ttlstate::TimeSource> time_;
  std::shared_ptr<ttlstate::FilterCounters> counters_;
  std::unique_ptr<ttlstate::TtlCompactionFilter> filter_;
};

std::optional<std::string> OptionalBytes(const py::handle& h) {
  if (h.is_none()) return std::nullopt;
  return h.cast<std::string>();
}

std::string_view View(const py::bytes& b) {
  char* data = nullptr;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(b.ptr(), &data, &size) != 0) throw py::error_already_set();
  return std::string_view(data, static_cast<size_t>(size));
}

// Txn::End takes a state name with static storage.
const char* EndState(const std::string& state) {
  static const char* const kStates[] = {"aborted", "released", "superseded", "closed", "committed"};
  for (const char* s : kStates) {
    if (state == s) return s;
  }
  throw std::invalid_argument("unknown end state " + state);
}

py::tuple ScanChunk(ttlstate::Scan& scan, size_t max_bytes) {
  std::vector<std::pair<std::string, std::optional<std::string>>> entries;
  bool done = false;
  {
    py::gil_scoped_release release;
    done = scan.Next(max_bytes, [&](std::string_view key, const std::string* value) {
      entries.emplace_back(std::string(key), value ? std::optional<std::string>(*value) : std::nullopt);
    });
  }
  py::list out(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    out[i] = py::make_tuple(py::bytes(entries[i].first), BytesOrNone(entries[i].second));
  }
  return py::make_tuple(done, out);
}

py::dict ProtocolConstants() {
  namespace p = ttlstate::protocol;
  py::dict d;
  d["MAX_FRAME"] = p::kMaxFrame;
  d["OP_LOAD"] = p::kOpLoad;
  d["OP_GET"] = p::kOpGet;
  d["OP_MULTI_GET"] = p::kOpMultiGet;
  d["OP_WRITES"] = p::kOpWrites;
  d["OP_ITER"] = p::kOpIter;
  d["OP_ITER_NEXT"] = p::kOpIterNext;
  d["OP_ITER_CLOSE"] = p::kOpIterClose;
  d["OP_CLOSE"] = p::kOpClose;
  d["OP_KEYS"] = p::kOpKeys;
  d["RESP_OK"] = p::kRespOk;
  d["RESP_ERROR"] = p::kRespError;
  d["WRITE_PUT"] = p::kWritePut;
  d["WRITE_REMOVE"] = p::kWriteRemove;
  d["WRITE_PUT_NEW"] = p::kWritePutNew;
  d["WRITE_PUT_PRESENT"] = p::kWritePutPresent;
  d["WRITE_REMOVE_EXPIRED"] = p::kWriteRemoveExpired;
  d["ITER_CHUNK_BYTES"] = p::kIterChunkBytes;
  d["ERR_INTERNAL"] = p::kErrInternal;
  d["ERR_BAD_REQUEST"] = p::kErrBadRequest;
  d["ERR_STATE"] = p::kErrState;
  d["ERR_ENGINE"] = p::kErrEngine;
  return d;
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "ttlstate native engine: RocksDB with the TTL compaction filter";
  m.attr("STATE_DISABLED") = static_cast<int>(StateType::kDisabled);
  m.attr("STATE_VALUE") = static_cast<int>(StateType::kValue);
  m.attr("STATE_LIST") = static_cast<int>(StateType::kList);
  m.attr("VALUE") = static_cast<int>(rocksdb::CompactionFilter::ValueType::kValue);
  m.attr("MERGE_OPERAND") = static_cast<int>(rocksdb::CompactionFilter::ValueType::kMergeOperand);
  m.attr("BLOB_INDEX") = static_cast<int>(rocksdb::CompactionFilter::ValueType::kBlobIndex);
  m.attr("KEEP") = static_cast<int>(rocksdb::CompactionFilter::Decision::kKeep);
  m.attr("REMOVE") = static_cast<int>(rocksdb::CompactionFilter::Decision::kRemove);
  m.attr("CHANGE_VALUE") = static_cast<int>(rocksdb::CompactionFilter::Decision::kChangeValue);
  m.attr("INVALID_OFFSET") = ttlstate::kInvalidOffset;
  m.attr("RECORD_FORMAT_VERSION") = ttlstate::kRecordFormatVersion;
  m.def("protocol_constants", &ProtocolConstants, "The wire constants the native data plane uses.");
  m.def("encode_ttl_value", [](int64_t ts, const py::bytes& user) {
    return py::bytes(ttlstate::EncodeTtlValue(ts, View(user)));
  }, "The native TtlValue codec, for the cross-language test.");
  m.def("is_expired", &ttlstate::IsExpired, py::arg("ts"), py::arg("ttl"), py::arg("now"),
        "The native expiry rule (the one the filter and the read path use), for the cross-check.");
  m.def("key_hashes", [](const py::bytes& key) {
    const std::string_view k = View(key);
    return std::make_pair(ttlstate::Murmur3x86_32(k, ttlstate::kKeyHashSeed1),
                          ttlstate::Murmur3x86_32(k, ttlstate::kKeyHashSeed2));
  }, "The key filter's two hashes of a key, for the cross-language test.");
  m.def("configure_memory", [](size_t total_bytes, double write_buffer_ratio) {
    ttlstate::ConfigureMemory({total_bytes, write_buffer_ratio});
  }, py::arg("total_bytes"), py::arg("write_buffer_ratio"),
        "The process-wide block cache and write-buffer budget of every DB opened afterwards.");
  m.def("memory_usage", []() {
    py::dict d;
    const auto budget = ttlstate::CurrentMemory();
    d["budget_bytes"] = budget.total_bytes;
    d["write_buffer_ratio"] = budget.write_buffer_ratio;
    d["block_cache_bytes"] = ttlstate::SharedBlockCacheUsage();
    d["write_buffer_bytes"] = ttlstate::SharedWriteBufferUsage();
    return d;
  });

  py::register_exception<ttlstate::StateError>(m, "StateError", PyExc_RuntimeError);
  py::register_exception<ttlstate::PeerGone>(m, "PeerGone", PyExc_ConnectionError);

  py::class_<ttlstate::KeyHashes>(m, "KeyHashes",
      "The key filter hashes of the keys a restore loads, for the shim's filter.")
      .def(py::init<>())
      .def("add", [](ttlstate::KeyHashes& h, const py::bytes& key) { h.Add(View(key)); }, py::arg("key"))
      .def("__len__", &ttlstate::KeyHashes::size)
      .def("bloom_words", [](const ttlstate::KeyHashes& h, int bits_log2, int probes) {
        if (bits_log2 < 6 || bits_log2 > 36 || probes < 1 || probes > 32) {
          throw std::invalid_argument("key filter layer of 2^" + std::to_string(bits_log2) + " bits and " +
                                      std::to_string(probes) + " probes: allowed 2^6..2^36 bits, 1..32 probes");
        }
        std::string words;
        {
          py::gil_scoped_release release;
          words = h.BloomWords(bits_log2, probes);
        }
        return py::bytes(words);
      }, py::arg("bits_log2"), py::arg("probes"),
           "The bits of a key filter layer holding every key added (little-endian u64 words).");
  py::class_<ttlstate::CleanupCursor, std::shared_ptr<ttlstate::CleanupCursor>>(m, "CleanupCursor")
      .def(py::init<>())
      .def_property_readonly("next", [](const ttlstate::CleanupCursor& c) { return BytesOrNone(c.next); });

  py::class_<ttlstate::Scan>(m, "Scan")
      .def("next_chunk", &ScanChunk, py::arg("max_bytes") = 1 << 16,
           "(done, [(key, value or None)...]) of about max_bytes");

  py::class_<ttlstate::Txn, std::shared_ptr<ttlstate::Txn>>(m, "Txn")
      .def("get", [](ttlstate::Txn& t, const py::bytes& key) {
        std::optional<std::string> v;
        {
          const auto k = View(key);
          py::gil_scoped_release release;
          v = t.Get(k);
        }
        return BytesOrNone(v);
      })
      .def("get_entry", [](ttlstate::Txn& t, const py::bytes& key) {
        std::optional<std::string> v;
        int64_t ts = 0;
        {
          const auto k = View(key);
          py::gil_scoped_release release;
          v = t.GetEntry(k, &ts);
        }
        return py::make_tuple(BytesOrNone(v), ts);
      }, "(value or None, its last-access time after the read, 0 if absent)")
      .def("remove_if_expired", [](ttlstate::Txn& t, const py::bytes& key) { t.RemoveIfExpired(View(key)); })
      .def("multi_get", [](ttlstate::Txn& t, const std::vector<std::string>& keys) {
        std::vector<std::optional<std::string>> values;
        {
          py::gil_scoped_release release;
          values = t.MultiGet(std::vector<std::string_view>(keys.begin(), keys.end()));
        }
        py::list out(values.size());
        for (size_t i = 0; i < values.size(); ++i) out[i] = BytesOrNone(values[i]);
        return out;
      })
      .def("put", [](ttlstate::Txn& t, const py::bytes& key, const py::bytes& value, std::optional<bool> committed) {
        // committed: what the caller proved about the key in the committed DB (None: nothing)
        using C = ttlstate::Txn::Committed;
        t.Put(View(key), View(value), !committed ? C::kUnknown : *committed ? C::kPresent : C::kAbsent);
      }, py::arg("key"), py::arg("value"), py::arg("committed") = py::none())
      .def("remove", [](ttlstate::Txn& t, const py::bytes& key) { t.Remove(View(key)); })
      .def("scan", [](ttlstate::Txn& t, std::optional<std::string> lower, std::optional<std::string> upper) {
        py::gil_scoped_release release;
        return t.NewScan(std::move(lower), std::move(upper));
      }, py::arg("lower") = py::none(), py::arg("upper") = py::none())
      .def("key_scan", [](ttlstate::Txn& t) {
        py::gil_scoped_release release;
        return t.NewKeyScan();
      })
      .def("advance_now", &ttlstate::Txn::AdvanceNow, py::arg("now"))
      .def("make_writable", &ttlstate::Txn::MakeWritable)
      .def("check_writable", &ttlstate::Txn::CheckWritable)
      .def("incremental_step", [](ttlstate::Txn& t) {
        py::gil_scoped_release release;
        t.IncrementalStep();
      })
      .def("write_changelog", [](ttlstate::Txn& t, const std::string& path, const std::string& header_json) {
        py::gil_scoped_release release;
        return t.WriteChangelog(path, header_json);
      })
      .def("apply", [](ttlstate::Txn& t, const std::string& sst_path) {
        py::gil_scoped_release release;
        return t.Apply(sst_path);
      }, py::arg("sst_path") = "",
         "Apply the pending writes atomically (a large batch bulk-loaded through an SST file at "
         "`sst_path`, when given); the change in the number of keys.")
      .def("end", [](ttlstate::Txn& t, const std::string& state) { t.End(EndState(state)); })
      .def_property_readonly("state", &ttlstate::Txn::state)
      .def_property_readonly("version", &ttlstate::Txn::version)
      .def_property_readonly("now", &ttlstate::Txn::now)
      .def_property_readonly("writable", &ttlstate::Txn::writable)
      .def_property_readonly("pending_writes", &ttlstate::Txn::pending_writes)
      .def_property_readonly("expired_on_read", [](const ttlstate::Txn& t) { return t.counters().expired_on_read; })
      .def_property_readonly("removed_incremental",
                             [](const ttlstate::Txn& t) { return t.counters().removed_incremental; })
      .def_property_readonly("pending_bytes", [](const ttlstate::Txn& t) { return t.counters().pending_bytes; });

  py::class_<ttlstate::DbSnapshot>(m, "Snapshot")
      .def("write_record_file", [](ttlstate::DbSnapshot& s, const std::string& path, const std::string& header_json,
                                   bool drop_expired, int64_t ttl, int64_t now) {
        py::gil_scoped_release release;
        return s.WriteRecordFile(path, header_json, drop_expired, ttl, now);
      }, py::arg("path"), py::arg("header_json"), py::arg("drop_expired"), py::arg("ttl"), py::arg("now"),
           "Write the pinned view as a snapshot record file; (records written, expired ones dropped).");

  py::class_<ttlstate::RestoreBuilder>(m, "RestoreBuilder",
      "Builds a version from nothing: changelogs gathered in memory, merged with the snapshot into one SST.")
      .def("add_changelog", [](ttlstate::RestoreBuilder& b, const std::string& path) {
        py::gil_scoped_release release;
        return b.AddChangelog(path);
      }, py::arg("path"), "Gather a changelog file's records (files in version order); returns their count.")
      .def_property_readonly("gathered_bytes", &ttlstate::RestoreBuilder::gathered_bytes)
      .def("finish", [](ttlstate::RestoreBuilder& b, const std::string& snapshot_path, const std::string& sst_path,
                        ttlstate::KeyHashes* hashes) {
        py::gil_scoped_release release;
        const auto r = b.Finish(snapshot_path, sst_path, hashes);
        return std::make_pair(r.snapshot_records, r.keys);
      }, py::arg("snapshot_path"), py::arg("sst_path"), py::arg("hashes") = nullptr,
           "Load the snapshot ('' for none) with the gathered changelogs over it; (snapshot records, keys).");

  py::class_<ttlstate::Connection>(m, "Connection")
      .def(py::init<int>(), py::arg("fd"))
      .def("serve", [](ttlstate::Connection& c, py::object handler) {
        ttlstate::Connection::Forward forward = [&handler](uint8_t code, std::string payload)
            -> ttlstate::Connection::Reply {
          py::gil_scoped_acquire acquire;
          py::object reply = handler(code, py::bytes(payload));
          if (reply.is_none()) return std::nullopt;
          auto t = reply.cast<py::tuple>();
          return std::make_pair(t[0].cast<uint8_t>(), t[1].cast<std::string>());
        };
        py::gil_scoped_release release;
        c.Serve(forward);
      }, "Serve frames until the peer closes; `handler(code, payload)` answers the control plane.")
      .def("read_frame", [](ttlstate::Connection& c) -> py::object {
        uint8_t code = 0;
        std::string payload;
        bool got = false;
        {
          py::gil_scoped_release release;
          got = c.ReadFrame(&code, &payload);
        }
        if (!got) return py::none();
        return py::make_tuple(code, py::bytes(payload));
      })
      .def("send", [](ttlstate::Connection& c, uint8_t code, const py::bytes& payload) {
        const auto v = View(payload);
        py::gil_scoped_release release;
        c.Send(code, v);
      })
      .def("bind", &ttlstate::Connection::Bind)
      .def("unbind", &ttlstate::Connection::Unbind)
      .def_property_readonly("native_requests", &ttlstate::Connection::native_requests);

  py::class_<FilterHarness>(m, "FilterHarness")
      .def(py::init<>())
      .def("configure", &FilterHarness::Configure, py::arg("state_type"), py::arg("timestamp_offset"),
           py::arg("ttl"), py::arg("query_time_after_num_entries"), py::arg("fixed_element_length") = -1,
           py::arg("variable_length_list") = false,
           "One-shot: False if already configured (the new config is then discarded).")
      .def("new_run", &FilterHarness::NewRun, "A new filter instance (a new compaction run), same config holder.")
      .def("set_time", &FilterHarness::SetTime)
      .def("decide", &FilterHarness::Decide, py::arg("value_type"), py::arg("value"),
           "(decision, new value or None) for one entry")
      .def_property_readonly("time_queries", &FilterHarness::TimeQueries);

  py::class_<ttlstate::Iterator>(m, "Iterator")
      .def("next_chunk", [](ttlstate::Iterator& it, size_t max_bytes) {
        std::vector<ttlstate::Entry> chunk;
        {
          py::gil_scoped_release release;
          chunk = it.NextChunk(max_bytes);
        }
        py::list out(chunk.size());
        for (size_t i = 0; i < chunk.size(); ++i) {
          out[i] = py::make_tuple(py::bytes(chunk[i].first), py::bytes(chunk[i].second));
        }
        return out;
      }, py::arg("max_bytes") = 1 << 16);

  py::class_<Db>(m, "DB")
      .def(py::init([](const std::string& path, int64_t ttl, int state_type, size_t timestamp_offset,
                       int64_t query_time_after_num_entries, uint64_t periodic_compaction_seconds,
                       int64_t fixed_element_length, bool variable_length_list, bool wall_clock) {
             DbOptions o;
             o.ttl = ttl;
             o.state_type = static_cast<StateType>(state_type);
             o.timestamp_offset = timestamp_offset;
             o.query_time_after_num_entries = query_time_after_num_entries;
             o.periodic_compaction_seconds = periodic_compaction_seconds;
             o.fixed_element_length = fixed_element_length;
             o.variable_length_list = variable_length_list;
             o.wall_clock = wall_clock;
             py::gil_scoped_release release;
             return std::make_unique<Db>(path, o);
           }),
           py::arg("path"), py::arg("ttl") = 0, py::arg("state_type") = static_cast<int>(StateType::kValue),
           py::arg("timestamp_offset") = 0, py::arg("query_time_after_num_entries") = 1000,
           py::arg("periodic_compaction_seconds") = 30ull * 24 * 3600, py::arg("fixed_element_length") = -1,
           py::arg("variable_length_list") = false, py::arg("wall_clock") = false)
      .def("get", [](Db& db, const std::string& key) {
        std::optional<std::string> v;
        {
          py::gil_scoped_release release;
          v = db.Get(key);
        }
        return BytesOrNone(v);
      })
      .def("multi_get", [](Db& db, const std::vector<std::string>& keys) {
        std::vector<std::optional<std::string>> values;
        {
          py::gil_scoped_release release;
          values = db.MultiGet(keys);
        }
        py::list out(values.size());
        for (size_t i = 0; i < values.size(); ++i) out[i] = BytesOrNone(values[i]);
        return out;
      })
      .def("write", [](Db& db, const py::iterable& batch) {
        std::vector<std::pair<std::string, std::optional<std::string>>> ops;
        for (const auto& item : batch) {
          auto pair = item.cast<py::tuple>();
          ops.emplace_back(pair[0].cast<std::string>(), OptionalBytes(pair[1]));
        }
        py::gil_scoped_release release;
        db.Write(ops);
      }, "Apply (key, value) puts and (key, None) deletes atomically, in order.")
      .def("merge", [](Db& db, const std::string& key, const std::string& value) {
        py::gil_scoped_release release;
        db.Merge(key, value);
      })
      .def("iterator", [](Db& db, std::optional<std::string> lower, std::optional<std::string> upper) {
        py::gil_scoped_release release;
        return db.NewIterator(std::move(lower), std::move(upper));
      }, py::arg("lower") = py::none(), py::arg("upper") = py::none())
      .def("compact", [](Db& db) {
        py::gil_scoped_release release;
        db.CompactAll();
      })
      .def("flush", [](Db& db) {
        py::gil_scoped_release release;
        db.Flush();
      })
      .def("int_property", [](Db& db, const std::string& name) {
        py::gil_scoped_release release;
        return db.IntProperty(name);
      })
      .def("count_keys", [](Db& db) {
        py::gil_scoped_release release;
        return db.CountKeys();
      })
      .def("set_time", &Db::SetTime)
      .def("begin", [](Db& db, const std::string& label, int64_t version, int64_t now, bool writable, bool ttl_enabled,
                       int64_t ttl, bool update_on_read, bool return_expired, int64_t incremental_size,
                       bool incremental_per_record, std::shared_ptr<ttlstate::CleanupCursor> cursor) {
        ttlstate::TtlRules rules;
        rules.enabled = ttl_enabled;
        rules.ttl = ttl;
        rules.update_on_read = update_on_read;
        rules.return_expired = return_expired;
        rules.incremental_size = incremental_size;
        rules.incremental_per_record = incremental_per_record;
        return std::make_shared<ttlstate::Txn>(db.core(), label, version, now, writable, rules, std::move(cursor));
      }, py::arg("label"), py::arg("version"), py::arg("now"), py::arg("writable"), py::arg("ttl_enabled"),
         py::arg("ttl"), py::arg("update_on_read"), py::arg("return_expired"), py::arg("incremental_size"),
         py::arg("incremental_per_record"), py::arg("cursor"),
         "A transaction over one loaded version: the native data plane of one StateStore.")
      .def("snapshot", [](Db& db) {
        py::gil_scoped_release release;
        return db.NewSnapshot();
      }, "A pinned consistent view, to write a snapshot file from without holding the store.")
      .def("restore_builder", [](Db& db) { return std::make_unique<ttlstate::RestoreBuilder>(db.core()); },
           "A builder of this (empty) DB's state from a snapshot and the changelogs after it.")
      .def("apply_changelog_file", [](Db& db, const std::string& path, ttlstate::KeyHashes* hashes,
                                      size_t ingest_min_keys) {
        py::gil_scoped_release release;
        return db.ApplyChangelogFile(path, hashes, ingest_min_keys);
      }, py::arg("path"), py::arg("hashes") = nullptr, py::arg("ingest_min_keys") = ttlstate::DbCore::kIngestMinKeys)
      .def_property_readonly("has_filter", &Db::HasFilter)
      .def("filter_metrics", [](Db& db) {
        const auto& c = db.Counters();
        py::dict d;
        d["filter_entries_seen"] = c.entries_seen.load();
        d["filter_removed"] = c.removed.load();
        d["filter_rewritten"] = c.rewritten.load();
        d["filter_time_queries"] = c.time_queries.load();
        return d;
      })
      .def("close", [](Db& db) {
        py::gil_scoped_release release;
        db.Close();
      });
}
