#include "core/util/parallel.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace remat {

void parallel_parts(int threads, std::int64_t n, std::int64_t grain,
                    const std::function<void(std::int64_t, std::int64_t)>& f) {
  if (n <= 0) return;
  std::int64_t parts = grain > 0 ? (n + grain - 1) / grain : n;
  parts = std::max<std::int64_t>(1, std::min<std::int64_t>(parts, threads));
  if (parts == 1) {
    f(0, n);
    return;
  }
  std::exception_ptr error;
  std::mutex mu;
  auto part = [&](std::int64_t p) {
    try {
      f(n * p / parts, n * (p + 1) / parts);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> helpers;
  helpers.reserve(static_cast<std::size_t>(parts - 1));
  for (std::int64_t p = 1; p < parts; ++p) helpers.emplace_back(part, p);
  part(0);
  for (auto& t : helpers) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace remat
