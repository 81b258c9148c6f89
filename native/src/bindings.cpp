// pybind11 module `ttlstate._native`: the RocksDB engine with the TTL filter, and a harness
// that exposes one filter instance's decisions to Python tests.
//
// pybind11 (rather than nanobind): already a build dependency, header-only, mature support for
// the GIL release and bytes conversions used here; the binding is thin so speed is RocksDB's.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ttlstate/compaction_filter.h"
#include "ttlstate/db.h"

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
