// The wire protocol constants the native data plane uses. The specification and the source of
// truth are python/ttlstate/server/protocol.py; tests/unit/test_cross_language.py checks every
// value here against it (through _native.protocol_constants()).
#pragma once

#include <cstdint>

namespace ttlstate::protocol {

constexpr uint32_t kMaxFrame = 1u << 30;

constexpr uint8_t kOpLoad = 3;
constexpr uint8_t kOpGet = 5;
constexpr uint8_t kOpMultiGet = 6;
constexpr uint8_t kOpWrites = 7;
constexpr uint8_t kOpIter = 8;
constexpr uint8_t kOpIterNext = 9;
constexpr uint8_t kOpIterClose = 10;
constexpr uint8_t kOpClose = 17;
constexpr uint8_t kOpKeys = 18;
constexpr uint8_t kOpGetEntries = 23;

constexpr uint8_t kRespOk = 64;
constexpr uint8_t kRespError = 65;

constexpr uint8_t kWritePut = 1;
constexpr uint8_t kWriteRemove = 2;
constexpr uint8_t kWritePutNew = 3;
constexpr uint8_t kWriteRemoveExpired = 4;
constexpr uint8_t kWritePutPresent = 5;

constexpr uint32_t kIterChunkBytes = 256 * 1024;

constexpr uint16_t kErrInternal = 1;
constexpr uint16_t kErrBadRequest = 2;
constexpr uint16_t kErrState = 7;
constexpr uint16_t kErrEngine = 8;

}  // namespace ttlstate::protocol
