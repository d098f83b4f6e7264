// How long this process has existed: from the kernel's start of it (exec) to now.
#pragma once

namespace remat {

// Milliseconds since the process started (the kernel's start time, in clock ticks: about 10 ms
// of resolution); a negative number when it cannot be read.
double ms_since_process_start();

}  // namespace remat
