#include "ttlstate/corruptions.h"

#include <deque>
#include <mutex>

namespace ttlstate {

namespace {

// Bounded: a DB that keeps failing fills nothing; the oldest notes go first.
constexpr size_t kMaxNotes = 256;

std::mutex g_mu;

std::deque<Corruption>& Notes() {  // under g_mu
  static std::deque<Corruption> notes;
  return notes;
}

// The path of the SST (or other) file RocksDB names: "... in /dir/000012.sst offset 0 size 4096",
// "... file: /dir/000012.sst", or a path at the end. Empty when none is named.
std::string NamedPath(const std::string& message) {
  const size_t start = message.find(" /");
  if (start == std::string::npos) return {};
  const size_t end = message.find_first_of(" ,:;)", start + 1);
  std::string path = message.substr(start + 1, end == std::string::npos ? std::string::npos : end - start - 1);
  while (!path.empty() && path.back() == '.') path.pop_back();  // "... /dir/000012.sst. Size ..."
  return path;
}

}  // namespace

void NoteCorruption(const std::string& message) {
  std::string path = NamedPath(message);
  if (path.empty()) return;
  std::lock_guard<std::mutex> lock(g_mu);
  for (const auto& note : Notes()) {
    if (note.path == path) return;
  }
  if (Notes().size() == kMaxNotes) Notes().pop_front();
  Notes().push_back({std::move(path), message});
}

std::vector<Corruption> TakeCorruptions(const std::string& dir) {
  std::string prefix = dir;
  while (prefix.size() > 1 && prefix.back() == '/') prefix.pop_back();
  prefix += '/';
  std::vector<Corruption> out;
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto it = Notes().begin(); it != Notes().end();) {
    if (it->path.compare(0, prefix.size(), prefix) == 0 && it->path.find('/', prefix.size()) == std::string::npos) {
      out.push_back(std::move(*it));
      it = Notes().erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

}  // namespace ttlstate
