// Opening what PyTorch users already have: a torch.cuda memory snapshot pickle or a
// torch.profiler Chrome trace JSON, told apart by their first byte, as a Trace to write as a
// run directory or show like a run.
#pragma once
#include <string>

#include "core/trace/trace.h"

namespace remat {

// Throws Error naming `path` for a file that is neither, or that its reader refuses.
Trace import_trace_file(const std::string& path);

}  // namespace remat
