// The parts of the NCCL communicator that need no GPU: the unique-id file exchange of the
// rendezvous (atomic publish, wait, timeout, a bad directory or file) and the constructor's
// refusals before any CUDA call; and check_data_parallel's choice between a host-memory and a
// device-memory communicator.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "core/backend/null/null_backend.h"
#include "core/dist/nccl_communicator.h"
#include "core/engine/data_parallel.h"
#include "core/util/error.h"

namespace remat {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("remat-nccl-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  fs::path path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string id_bytes() {
  std::string b(128, '\0');
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>(i * 7 + 3);
  return b;
}

TEST(NcclRendezvous, PublishedIdIsReadBackWhole) {
  TempDir d;
  const std::string id = id_bytes();
  nccl_rendezvous::publish(d.str(), "k", id, 0, 2);
  EXPECT_EQ(nccl_rendezvous::wait_for(d.str(), "k", id.size(), 1, 2, milliseconds(100)), id);
  // Only the renamed file is left: the temporary one is gone.
  int files = 0;
  for (const auto& e : fs::directory_iterator(d.path())) {
    ++files;
    EXPECT_EQ(e.path().filename(), "k");
  }
  EXPECT_EQ(files, 1);
}

TEST(NcclRendezvous, WaiterSeesAnIdWrittenLater) {
  TempDir d;
  const std::string id = id_bytes();
  std::thread writer([&] {
    std::this_thread::sleep_for(milliseconds(50));
    nccl_rendezvous::publish(d.str(), "later", id, 0, 3);
  });
  std::string got;
  EXPECT_NO_THROW(got = nccl_rendezvous::wait_for(d.str(), "later", id.size(), 2, 3,
                                                  milliseconds(10000)));
  writer.join();
  EXPECT_EQ(got, id);
}

TEST(NcclRendezvous, TimeoutNamesTheRankAndTheFile) {
  TempDir d;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = error_of(
      [&] { nccl_rendezvous::wait_for(d.str(), "never", 128, 1, 2, milliseconds(100)); });
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(100));
  EXPECT_NE(e.find("timed out"), std::string::npos) << e;
  EXPECT_NE(e.find("rank 1 of 2"), std::string::npos) << e;
  EXPECT_NE(e.find((d.path() / "never").string()), std::string::npos) << e;
  EXPECT_NE(e.find("rank 0 writes it"), std::string::npos) << e;
}

TEST(NcclRendezvous, FileOfAnotherSizeIsRefusedAtOnce) {
  TempDir d;
  std::ofstream(d.path() / "short") << "not an id";
  const std::string e = error_of(
      [&] { nccl_rendezvous::wait_for(d.str(), "short", 128, 1, 2, milliseconds(60000)); });
  EXPECT_NE(e.find("holds 9 bytes, not the 128"), std::string::npos) << e;
  std::ofstream(d.path() / "long") << std::string(200, 'x');
  const std::string e2 = error_of(
      [&] { nccl_rendezvous::wait_for(d.str(), "long", 128, 1, 2, milliseconds(60000)); });
  EXPECT_NE(e2.find("129 or more bytes"), std::string::npos) << e2;
}

TEST(NcclRendezvous, BadDirectoryIsNamed) {
  TempDir d;
  const std::string missing = (d.path() / "absent").string();
  std::string e = error_of([&] { nccl_rendezvous::check_dir(missing, 0, 1); });
  EXPECT_NE(e.find("'" + missing + "' does not exist"), std::string::npos) << e;
  std::ofstream(d.path() / "file") << "x";
  const std::string file = (d.path() / "file").string();
  e = error_of([&] { nccl_rendezvous::check_dir(file, 0, 1); });
  EXPECT_NE(e.find("'" + file + "' is not a directory"), std::string::npos) << e;
  e = error_of([&] { nccl_rendezvous::check_dir("", 0, 1); });
  EXPECT_NE(e.find("needs a store directory"), std::string::npos) << e;
  // Writing into a directory that is gone fails with the path, and leaves nothing behind.
  e = error_of([&] { nccl_rendezvous::publish(missing, "k", id_bytes(), 0, 1); });
  EXPECT_NE(e.find("could not write '" + missing), std::string::npos) << e;
}

// These fail before any CUDA or NCCL call, so they run without a GPU.
TEST(NcclCommunicatorSetup, BadRendezvousDirectoryIsAClearError) {
  TempDir d;
  NcclOptions o;
  o.store_dir = (d.path() / "nowhere").string();
  std::string e = error_of([&] { NcclCommunicator c(o); });
  EXPECT_NE(e.find("rank 0 of 1"), std::string::npos) << e;
  EXPECT_NE(e.find("does not exist"), std::string::npos) << e;
  o.store_dir.clear();
  e = error_of([&] { NcclCommunicator c(o); });
  EXPECT_NE(e.find("needs a store directory"), std::string::npos) << e;
  o.store_dir = d.str();
  o.key = "a/b";
  e = error_of([&] { NcclCommunicator c(o); });
  EXPECT_NE(e.find("bad key 'a/b'"), std::string::npos) << e;
}

TEST(NcclCommunicatorSetup, BadRankIsRefused) {
  TempDir d;
  NcclOptions o;
  o.store_dir = d.str();
  o.rank = 2;
  o.size = 2;
  EXPECT_NE(error_of([&] { NcclCommunicator c(o); }).find("rank 2 of a world of 2"),
            std::string::npos);
}

TEST(NcclCommunicatorSetup, RankWaitingForAnAbsentRankZeroTimesOut) {
  TempDir d;
  NcclOptions o;
  o.store_dir = d.str();
  o.rank = 1;
  o.size = 2;
  o.timeout = milliseconds(150);
  const std::string e = error_of([&] { NcclCommunicator c(o); });
  EXPECT_NE(e.find("rank 1 of 2 timed out after 0.15 s"), std::string::npos) << e;
  EXPECT_NE(e.find("rematlab-nccl-id"), std::string::npos) << e;
}

// A communicator of two ranks that moves nothing but says which memory it takes.
class TwoRanks final : public Communicator {
 public:
  explicit TwoRanks(bool device) : device_(device) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  bool moves_data() const override { return true; }
  bool device_memory() const override { return device_; }

 protected:
  void do_all_reduce(void*, std::size_t, Elem) override {}
  void do_reduce_scatter(float*, std::size_t) override {}
  void do_all_gather(float*, std::size_t) override {}
  void do_broadcast(float*, std::size_t, int) override {}
  void do_barrier() override {}

 private:
  bool device_;
};

TEST(DataParallelCheck, DeviceMemoryCommunicatorTakesADeviceBackend) {
  NullBackend device_backend;  // its memory is not host-addressable, as CUDA's
  ASSERT_FALSE(device_backend.host_addressable());
  ModelConfig m;
  m.dtype = DType::F32;
  EXPECT_NO_THROW(check_data_parallel(m, device_backend, TwoRanks(true)));
  const std::string e = error_of([&] { check_data_parallel(m, device_backend, TwoRanks(false)); });
  EXPECT_NE(e.find("not host-addressable (use --device cpu)"), std::string::npos) << e;
  // Any dtype: 16-bit gradients are summed as fp32 copies (Executor::collective_f32).
  m.dtype = DType::BF16;
  EXPECT_NO_THROW(check_data_parallel(m, device_backend, TwoRanks(true)));
  EXPECT_NE(error_of([&] { check_data_parallel(m, device_backend, TwoRanks(false)); }).find("not host-addressable"),
            std::string::npos);
}

}  // namespace
}  // namespace remat
