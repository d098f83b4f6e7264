// A torch.cuda.memory._dump_snapshot pickle as a Trace (source "pytorch-snapshot"): the
// allocator's trace entries become memory events, its segments the reserved bytes
// (docs/trace-format.md, "Imported traces"). Read with the restricted pickle reader, so the
// file can never run code.
#pragma once
#include <string>

#include "core/io/pickle_reader.h"
#include "core/trace/trace.h"

namespace remat {

// Which layout the snapshot has.
enum class SnapshotLayout { Torch113, Torch2 };

// Throws Error naming `where` and the place in the snapshot (segment 3 block 2, trace entry 7
// of device 0) for a layout it does not know or an inconsistent trace.
Trace trace_from_torch_snapshot(const pickle::Document& doc, const std::string& where);
Trace import_torch_snapshot(const std::string& path);

}  // namespace remat
