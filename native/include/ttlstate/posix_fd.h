// A POSIX file descriptor owned by one object (closed with it), and errno as a message.
#pragma once

#include <unistd.h>

#include <cerrno>
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

// "<what>: <strerror(errno)>", for the failure of the call that just set errno.
inline std::string ErrnoMessage(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace ttlstate
