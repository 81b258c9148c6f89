#include "ttlstate/db.h"

#include <stdexcept>

#include "rocksdb/merge_operator.h"
#include "rocksdb/options.h"
#include "rocksdb/table.h"
#include "rocksdb/write_batch.h"

namespace ttlstate {
namespace {

void Check(const rocksdb::Status& s, const char* what) {
  if (!s.ok()) throw std::runtime_error(std::string("rocksdb ") + what + ": " + s.ToString());
}

// List values grow by merge: ttlstate's length-prefixed elements concatenate as they are;
// Flink-layout fixed elements are joined with ','.
class ListAppendOperator : public rocksdb::AssociativeMergeOperator {
 public:
  explicit ListAppendOperator(std::string delimiter) : delimiter_(std::move(delimiter)) {}
  bool Merge(const rocksdb::Slice& /*key*/, const rocksdb::Slice* existing, const rocksdb::Slice& value,
             std::string* new_value, rocksdb::Logger* /*logger*/) const override {
    new_value->clear();
    if (existing != nullptr) {
      new_value->assign(existing->data(), existing->size());
      new_value->append(delimiter_);
    }
    new_value->append(value.data(), value.size());
    return true;
  }
  const char* Name() const override { return "TtlstateListAppend"; }

 private:
  std::string delimiter_;
};

}  // namespace

std::unique_ptr<FilterConfig> MakeFilterConfig(StateType state_type, size_t timestamp_offset, int64_t ttl,
                                               int64_t query_time_after_num_entries,
                                               int64_t fixed_element_length, bool variable_length_list) {
  auto config = std::make_unique<FilterConfig>();
  config->state_type = state_type;
  config->timestamp_offset = timestamp_offset;
  config->ttl = ttl;
  config->query_time_after_num_entries = query_time_after_num_entries;
  if (variable_length_list) {
    config->list_element_filter_factory = std::make_unique<VariableListElementFilterFactory>();
  } else if (fixed_element_length > 0) {
    config->list_element_filter_factory =
        std::make_unique<FixedListElementFilterFactory>(static_cast<size_t>(fixed_element_length), timestamp_offset);
  }
  return config;
}

Iterator::Iterator(std::shared_ptr<DbCore> core, std::optional<std::string> lower,
                   std::optional<std::string> upper)
    : core_(std::move(core)), lower_(std::move(lower)), upper_(std::move(upper)) {
  rocksdb::ReadOptions ro;
  if (lower_) {
    lower_slice_ = rocksdb::Slice(*lower_);
    ro.iterate_lower_bound = &lower_slice_;
  }
  if (upper_) {
    upper_slice_ = rocksdb::Slice(*upper_);
    ro.iterate_upper_bound = &upper_slice_;
  }
  std::unique_lock<std::shared_mutex> lock(core_->mu);
  if (!core_->db) throw std::runtime_error("rocksdb: database is closed");
  it_.reset(core_->db->NewIterator(ro));  // pins an implicit snapshot: a point-in-time view
  if (lower_) it_->Seek(lower_slice_); else it_->SeekToFirst();
  core_->iterators.insert(this);
}

Iterator::~Iterator() {
  std::unique_lock<std::shared_mutex> lock(core_->mu);
  it_.reset();
  core_->iterators.erase(this);
}

std::vector<Entry> Iterator::NextChunk(size_t max_bytes) {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  if (!it_) throw std::runtime_error("rocksdb: iterator used after its database was closed");
  std::vector<Entry> out;
  size_t bytes = 0;
  while (it_->Valid() && (out.empty() || bytes < max_bytes)) {
    out.emplace_back(it_->key().ToString(), it_->value().ToString());
    bytes += it_->key().size() + it_->value().size();
    it_->Next();
  }
  Check(it_->status(), "iterate");
  return out;
}

Db::Db(const std::string& path, const DbOptions& o) {
  // Options, explicitly: leveled compaction on block-based tables (so periodic compaction
  // and the filter behave as documented for Flink), lz4 for blocks, a modest write buffer.
  rocksdb::Options options;
  options.create_if_missing = true;
  options.compaction_style = rocksdb::kCompactionStyleLevel;
  options.compression = rocksdb::kLZ4Compression;
  options.write_buffer_size = 32 << 20;
  options.max_background_jobs = 2;
  options.max_open_files = -1;
  rocksdb::BlockBasedTableOptions table;
  table.block_size = 16 * 1024;
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  if (o.state_type == StateType::kList) {
    options.merge_operator = std::make_shared<ListAppendOperator>(o.variable_length_list ? "" : ",");
  }
  if (o.wall_clock) time_->UseWallClock();
  if (o.ttl > 0) {
    auto holder = std::make_shared<ConfigHolder>();
    holder->Configure(MakeFilterConfig(o.state_type, o.timestamp_offset, o.ttl, o.query_time_after_num_entries,
                                       o.fixed_element_length, o.variable_length_list));
    options.compaction_filter_factory = std::make_shared<TtlCompactionFilterFactory>(holder, time_, counters_);
    options.periodic_compaction_seconds = o.periodic_compaction_seconds;  // 0 = off
    has_filter_ = true;
  }
  rocksdb::DB* raw = nullptr;
  Check(rocksdb::DB::Open(options, path, &raw), "open");
  core_->db.reset(raw);
}

Db::~Db() { Close(); }

void Db::Close() {
  std::unique_lock<std::shared_mutex> lock(core_->mu);
  for (Iterator* it : core_->iterators) it->Invalidate();
  if (core_->db) {
    core_->db->Close().PermitUncheckedError();
    core_->db.reset();
  }
}

rocksdb::DB* Db::Handle() {
  if (!core_->db) throw std::runtime_error("rocksdb: database is closed");
  return core_->db.get();
}

std::optional<std::string> Db::Get(const std::string& key) {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  std::string value;
  const auto s = Handle()->Get(rocksdb::ReadOptions(), key, &value);
  if (s.IsNotFound()) return std::nullopt;
  Check(s, "get");
  return value;
}

std::vector<std::optional<std::string>> Db::MultiGet(const std::vector<std::string>& keys) {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  std::vector<rocksdb::Slice> slices(keys.begin(), keys.end());
  std::vector<std::string> values;
  const auto statuses = Handle()->MultiGet(rocksdb::ReadOptions(), slices, &values);
  std::vector<std::optional<std::string>> out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (statuses[i].IsNotFound()) continue;
    Check(statuses[i], "multi_get");
    out[i] = std::move(values[i]);
  }
  return out;
}

void Db::Write(const std::vector<std::pair<std::string, std::optional<std::string>>>& ops) {
  rocksdb::WriteBatch batch;
  for (const auto& [key, value] : ops) {
    if (value) Check(batch.Put(key, *value), "put"); else Check(batch.Delete(key), "delete");
  }
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;  // the local DB is a cache; durability comes from the checkpoint
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  Check(Handle()->Write(wo, &batch), "write");
}

void Db::Merge(const std::string& key, const std::string& value) {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  Check(Handle()->Merge(wo, key, value), "merge");
}

std::unique_ptr<Iterator> Db::NewIterator(std::optional<std::string> lower, std::optional<std::string> upper) {
  return std::make_unique<Iterator>(core_, std::move(lower), std::move(upper));
}

void Db::CompactAll() {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  rocksdb::CompactRangeOptions cro;
  cro.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  Check(Handle()->CompactRange(cro, nullptr, nullptr), "compact_range");
}

void Db::Flush() {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  Check(Handle()->Flush(rocksdb::FlushOptions()), "flush");
}

uint64_t Db::IntProperty(const std::string& name) {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  uint64_t v = 0;
  if (!Handle()->GetIntProperty(name, &v)) throw std::runtime_error("rocksdb: unknown property " + name);
  return v;
}

uint64_t Db::CountKeys() {
  std::shared_lock<std::shared_mutex> lock(core_->mu);
  std::unique_ptr<rocksdb::Iterator> it(Handle()->NewIterator(rocksdb::ReadOptions()));
  uint64_t n = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
  Check(it->status(), "count");
  return n;
}

}  // namespace ttlstate
