#include "core/trace/import_trace.h"

#include <fcntl.h>
#include <unistd.h>

#include "core/trace/profiler_trace.h"
#include "core/trace/torch_snapshot.h"
#include "core/util/error.h"
#include "core/util/json_io.h"

namespace remat {

Trace import_trace_file(const std::string& path) {
  struct stat st;
  int fd = open_regular_file(path, st);
  unsigned char first = 0;
  ssize_t n = 0;
  // The first byte that is not white space tells a pickle (PROTO 0x80) from JSON ('{').
  while ((n = ::read(fd, &first, 1)) == 1 && (first == ' ' || first == '\n' || first == '\r' || first == '\t')) {}
  ::close(fd);
  if (n != 1) throw Error(path + ": empty; not a torch memory snapshot nor a profiler trace");
  if (first == 0x80) return import_torch_snapshot(path);
  if (first == '{' || first == '[') return import_profiler_trace(path);
  throw Error(path + ": neither a torch memory snapshot (a pickle, from torch.cuda.memory._dump_snapshot) nor a "
                     "torch.profiler trace (JSON, from export_chrome_trace)");
}

}  // namespace remat
