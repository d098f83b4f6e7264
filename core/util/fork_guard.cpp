#include "core/util/fork_guard.h"

namespace remat {

std::shared_mutex& fork_guard() {
  static std::shared_mutex m;
  return m;
}

}  // namespace remat
