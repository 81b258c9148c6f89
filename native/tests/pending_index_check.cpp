// PendingIndex against std::map, with a real hash and with hashes that collide on purpose
// (every key one hash; 7 hashes): finds, inserts across many growths, record positions and
// insertion order. Compiled and run by tests/native/test_pending_index.py; exits non-zero
// naming the first difference.
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <string_view>

#include "ttlstate/pending_index.h"

namespace {

struct OneHash {
  size_t operator()(std::string_view) const { return 42; }
};

struct SevenHashes {
  size_t operator()(std::string_view key) const { return std::hash<std::string_view>{}(key) % 7; }
};

int failures = 0;

void Check(bool ok, const char* what, const char* hash, int step) {
  if (ok) return;
  std::fprintf(stderr, "%s hash, step %d: %s\n", hash, step, what);
  ++failures;
}

template <typename Hash>
void Run(const char* name, int keys, int steps) {
  ttlstate::PendingIndex<int, Hash> index;
  std::map<std::string, int> model;            // key -> value
  std::map<std::string, size_t> position;      // key -> insertion position
  std::deque<std::string> owned;               // the keys' bytes, as the arena keeps them
  std::mt19937 rnd(7);
  for (int step = 0; step < steps; ++step) {
    const std::string key = "k" + std::to_string(rnd() % keys);
    if (rnd() % 3 == 0) {
      auto* r = index.Find(key);
      const auto it = model.find(key);
      Check((r != nullptr) == (it != model.end()), "Find disagrees on presence", name, step);
      if (r != nullptr && it != model.end()) Check(r->value == it->second && r->key == key, "Find's record", name, step);
      continue;
    }
    const size_t before = index.size();
    auto& r = index.FindOrInsert(key, [&](std::string_view k) {
      owned.emplace_back(k);
      return std::string_view(owned.back());
    });
    const bool inserted = model.find(key) == model.end();
    Check(index.size() == before + (inserted ? 1 : 0), "size after FindOrInsert", name, step);
    if (inserted) {
      Check(r.value == 0, "a new record's value is not Value()", name, step);
      position[key] = before;
    } else {
      Check(r.value == model[key], "FindOrInsert found another record", name, step);
    }
    r.value = step + 1;
    model[key] = step + 1;
  }
  Check(index.size() == model.size(), "final size", name, steps);
  for (const auto& [key, pos] : position) {
    Check(index[pos].key == key && index[pos].value == model[key], "record at its insertion position", name, steps);
  }
  size_t seen = 0;
  for (const auto& record : index) {
    Check(position.at(std::string(record.key)) == seen++, "iteration is not in insertion order", name, steps);
  }
  index.Clear();
  Check(index.size() == 0 && index.Find("k1") == nullptr, "Clear", name, steps);
}

}  // namespace

int main() {
  Run<std::hash<std::string_view>>("real", 50000, 200000);
  Run<SevenHashes>("seven", 3000, 20000);
  Run<OneHash>("one", 500, 5000);
  if (failures == 0) std::puts("pending_index_check: ok");
  return failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
