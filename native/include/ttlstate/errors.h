// Errors that carry the protocol's error code, so the wire layer answers with the right one.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "ttlstate/protocol.h"

namespace ttlstate {

class StoreError : public std::runtime_error {
 public:
  StoreError(uint16_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  uint16_t code() const { return code_; }

 private:
  uint16_t code_;
};

// A call the store's lifecycle does not allow (write after commit, superseded handle, ...).
class StateError : public StoreError {
 public:
  explicit StateError(const std::string& message) : StoreError(protocol::kErrState, message) {}
};

}  // namespace ttlstate
