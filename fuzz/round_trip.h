// What an importer accepts must be a run directory that compare and export read back: the
// imported trace is written as `import` writes it and read again. A write or read that fails is a
// finding (the target aborts with the message), as a crash would be.
#pragma once
#include "core/trace/trace.h"

namespace remat::fuzz {

void write_and_read_back(const Trace& t, const char* target);

}  // namespace remat::fuzz
