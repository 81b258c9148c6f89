// The wire protocol constants the native data plane uses: generated at build time from their
// single definition and specification, python/ttlstate/server/protocol.py, by ttlstate.codegen
// (setup.py writes them under build/generated/include). Names: OP_ITER_NEXT -> kOpIterNext;
// kAll lists every constant by name.
#pragma once

#include "ttlstate/generated/protocol_constants.h"
