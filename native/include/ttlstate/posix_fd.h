// A POSIX file descriptor owned by one object (closed with it), a whole positioned read, and
// errno as a message.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

namespace ttlstate {

class UniqueFd {
 public:
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// Reads `n` bytes at `offset` (pread, retried when interrupted or short): how many there were
// before the end of the file, or -1 with errno set.
inline ssize_t PreadUpTo(int fd, char* out, size_t n, uint64_t offset) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, out + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return static_cast<ssize_t>(got);
}

// "<what>: <strerror(errno)>", for the failure of the call that just set errno.
inline std::string ErrnoMessage(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace ttlstate
