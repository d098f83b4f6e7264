// HeapMemory keeps what a step frees: once one exists, a freed 64 MiB block handed out again costs
// no page faults (its pages stay mapped), where malloc's defaults would map a fresh block and
// fault in every page of it again. REMAT_HOST_HEAP=system leaves the defaults.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/memory/memory_resource.h"
#include "under_asan.h"

namespace remat {
namespace {

// Under AddressSanitizer malloc is the sanitizer's own.
constexpr bool kOwnMalloc = REMAT_UNDER_ASAN != 0;

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

#if defined(__GLIBC__)
TEST(HostHeap, AFreedBlockComesBackWithoutPageFaults) {
  if (const char* e = std::getenv("REMAT_HOST_HEAP")) GTEST_SKIP() << "REMAT_HOST_HEAP=" << e;
  // AddressSanitizer's malloc ignores mallopt (and keeps freed blocks in quarantine).
  if (kOwnMalloc) GTEST_SKIP() << "the sanitizer's malloc has no such setting";
  HeapMemory heap;
  ASSERT_STREQ(host_heap_mode(), "retained");
  constexpr std::size_t kBytes = std::size_t{64} << 20;
  void* a = heap.allocate(kBytes);
  std::memset(a, 1, kBytes);
  heap.deallocate(a, kBytes);
  const long before = minor_faults();
  void* b = heap.allocate(kBytes);
  std::memset(b, 2, kBytes);
  const long faults = minor_faults() - before;
  heap.deallocate(b, kBytes);
  // A fresh mapping faults in all 16384 of its 4 KiB pages; the kept block none (a few for
  // whatever else the process touches meanwhile).
  EXPECT_LT(faults, 1024) << "the second 64 MiB block was faulted in again";
  EXPECT_EQ(heap.reserved_bytes(), 0u);
}

TEST(HostHeap, SystemModeLeavesMallocsDefaults) {
  // The mode is settled by a process's first HeapMemory, so this runs where none was made yet
  // (ctest runs each test in its own process), and in a child, so this process's mode stays.
  if (std::string(host_heap_mode()) != "system") GTEST_SKIP() << "a HeapMemory already exists";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("REMAT_HOST_HEAP", "system", 1);
    HeapMemory heap;
    _exit(std::string(host_heap_mode()) == "system" ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}
#endif

}  // namespace
}  // namespace remat
