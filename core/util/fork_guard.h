// Forking (core/plugin/child_process.h) and threaded OpenBLAS calls exclude each other.
// OpenBLAS shuts its worker threads down in a pthread_atfork handler; a GEMM running on another
// thread at that moment waits for those workers forever (seen as a hung desktop-app run while the
// app planned a prediction). Every BLAS call holds this lock shared; a fork holds it exclusively.
#pragma once
#include <shared_mutex>

namespace remat {

std::shared_mutex& fork_guard();

}  // namespace remat
