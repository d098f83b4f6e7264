// One-shot parallel loops for large host jobs outside the backends' ops (start-up: weight
// initialization). Each call starts threads - 1 helper threads and runs the first part itself;
// parts are contiguous, fixed by n and the thread count, and each output belongs to one part.
#pragma once
#include <cstdint>
#include <functional>

namespace remat {

// Calls f(begin, end) on up to `threads` contiguous parts of [0, n), at least `grain` items a
// part; returns when all are done. An exception thrown by a part is rethrown here.
void parallel_parts(int threads, std::int64_t n, std::int64_t grain,
                    const std::function<void(std::int64_t, std::int64_t)>& f);

}  // namespace remat
