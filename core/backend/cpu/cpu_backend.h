// The reference backend: our own loops for every op, GEMMs through OpenBLAS with a thread count
// fixed by the program. Deterministic: the same inputs give the same bits at a given thread count.
#pragma once
#include <memory>

#include "core/backend/backend.h"

namespace remat {

class CpuBackend final : public Backend {
 public:
  // threads: OpenBLAS threads (fixed for the whole run and recorded); 0 = 2.
  explicit CpuBackend(int threads = 0);
  ~CpuBackend() override;
  int threads() const;
  // (Declarations of every Backend override follow; implemented in cpu_*.cpp.)
};

}  // namespace remat
