#include "core/trace/import_trace.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/trace/profiler_trace.h"
#include "core/trace/torch_snapshot.h"
#include "core/util/error.h"
#include "core/util/json_io.h"

namespace remat {

Trace import_trace_file(const std::string& path) {
  struct stat st;
  int fd = open_regular_file(path, st);
  // The first byte that is not white space tells a pickle (PROTO 0x80) from JSON ('{'), read a
  // block at a time (white space can run for gigabytes).
  unsigned char buf[1 << 16];
  unsigned char first = 0;
  ssize_t n = 0;
  bool found = false;
  while (!found) {
    n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n && !found; ++i)
      if (buf[i] != ' ' && buf[i] != '\n' && buf[i] != '\r' && buf[i] != '\t') first = buf[i], found = true;
  }
  const int read_errno = n < 0 ? errno : 0;
  ::close(fd);
  if (read_errno != 0) throw Error(path + ": cannot be read (" + std::strerror(read_errno) + ")");
  if (!found) throw Error(path + ": empty; not a torch memory snapshot nor a profiler trace");
  if (first == 0x80) return import_torch_snapshot(path);
  if (first == '{' || first == '[') return import_profiler_trace(path);
  throw Error(path + ": neither a torch memory snapshot (a pickle, from torch.cuda.memory._dump_snapshot) nor a "
                     "torch.profiler trace (JSON, from export_chrome_trace)");
}

}  // namespace remat
