// NcclCommunicator's collectives timed on one GPU (world size 1), buffer sizes 1 KiB to 256 MiB
// doubling: all-reduce, reduce-scatter, all-gather and broadcast of fp32 device buffers, each call
// timed on the host from the call to its return (the communicator returns once its stream has
// run the collective). Figures as nccl-tests defines them, with n ranks and S the buffer bytes
// (the whole buffer: the gathered result of an all-gather, the input of a reduce-scatter):
//   time   the median of the timed calls
//   algbw  S / time
//   busbw  algbw x 2(n-1)/n (all-reduce), x (n-1)/n (reduce-scatter, all-gather), x 1 (broadcast)
// With one rank nothing crosses a link: busbw is 0 but for the broadcast, and the times are
// what a call costs (enqueue, NCCL's one-rank path, the wait), not a bandwidth.
// Prints one JSON object per size and collective to --json FILE, and a table (a line per size).
//
// Usage: nccl_bench [--iters N] [--max-mib M] [--json FILE] [--device D]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <unistd.h>

#include "core/dist/nccl_communicator.h"
#include "core/util/error.h"

using namespace remat;

namespace {

struct Figure {
  double us = 0, algbw = 0, busbw = 0;  // GB/s as nccl-tests prints them (1e9 bytes/s)
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
Figure timed(int iters, std::size_t bytes, double bus_factor, F&& call) {
  for (int i = 0; i < 3; ++i) call();  // warm-up: NCCL sets up its buffers on first use
  std::vector<double> us;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                     .count());
  }
  Figure f;
  f.us = median(us);
  f.algbw = static_cast<double>(bytes) / (f.us * 1e-6) / 1e9;
  f.busbw = f.algbw * bus_factor;
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 20, device = 0;
  std::size_t max_mib = 256;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool more = i + 1 < argc;
    if (a == "--iters" && more) iters = std::max(1, std::atoi(argv[++i]));
    else if (a == "--max-mib" && more) max_mib = static_cast<std::size_t>(std::atoll(argv[++i]));
    else if (a == "--json" && more) json_path = argv[++i];
    else if (a == "--device" && more) device = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: nccl_bench [--iters N] [--max-mib M] [--json FILE] [--device D]\n");
      return 2;
    }
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count <= device) {
    std::fprintf(stderr, "nccl_bench: no CUDA device %d (%s)\n", device,
                 cudaGetErrorString(cudaGetLastError()));
    return 2;
  }
  const std::size_t max_bytes = std::max<std::size_t>(max_mib, 1) << 20;

  char tmpl[] = "/tmp/remat-nccl-bench-XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::perror("nccl_bench: mkdtemp");
    return 2;
  }
  int rc = 0;
  try {
    NcclOptions o;
    o.store_dir = tmpl;
    o.device = device;
    NcclCommunicator comm(o);
    const int n = comm.size();
    const double ring = n > 1 ? static_cast<double>(n - 1) / n : 0.0;
    if (cudaSetDevice(device) != cudaSuccess) throw Error("cudaSetDevice failed");
    float* buf = nullptr;
    if (cudaMalloc(&buf, max_bytes) != cudaSuccess) throw Error("cudaMalloc of the buffer failed");
    cudaMemset(buf, 0, max_bytes);
    cudaDeviceSynchronize();

    std::ofstream json;
    if (!json_path.empty()) json.open(json_path);
    std::printf("nccl (%d rank%s), fp32, median of %d calls; busbw as nccl-tests (GB/s)\n", n,
                n == 1 ? "" : "s", iters);
    std::printf("%9s %13s %6s %13s %6s %13s %6s %13s %6s\n", "size", "all_reduce us", "busbw",
                "red_scat us", "busbw", "all_gather us", "busbw", "broadcast us", "busbw");
    for (std::size_t bytes = 1024; bytes <= max_bytes; bytes *= 2) {
      const std::size_t elems = bytes / sizeof(float);
      const std::size_t shard = elems / static_cast<std::size_t>(n);
      const std::size_t shard_bytes = shard * static_cast<std::size_t>(n) * sizeof(float);
      struct Row {
        const char* name;
        Figure f;
      } rows[] = {
          {"all_reduce", timed(iters, bytes, 2.0 * ring,
                               [&] { comm.all_reduce_sum(buf, elems, "bench"); })},
          {"reduce_scatter", timed(iters, shard_bytes, ring,
                                   [&] { comm.reduce_scatter_sum(buf, shard, "bench"); })},
          {"all_gather", timed(iters, shard_bytes, ring, [&] { comm.all_gather(buf, shard, "bench"); })},
          {"broadcast", timed(iters, bytes, 1.0, [&] { comm.broadcast(buf, elems, 0, "bench"); })},
      };
      comm.clear_records();
      char size[32];
      if (bytes >= (1u << 20))
        std::snprintf(size, sizeof size, "%zu MiB", bytes >> 20);
      else
        std::snprintf(size, sizeof size, "%zu KiB", bytes >> 10);
      std::printf("%9s", size);
      for (const Row& r : rows) {
        std::printf(" %13.1f %6.1f", r.f.us, r.f.busbw);
        if (json.is_open())
          json << "{\"figure\": \"nccl\", \"collective\": \"" << r.name << "\", \"bytes\": " << bytes
               << ", \"ranks\": " << n << ", \"time_us\": " << r.f.us
               << ", \"algbw_GBps\": " << r.f.algbw << ", \"busbw_GBps\": " << r.f.busbw << "}\n";
      }
      std::printf("\n");
    }
    cudaFree(buf);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nccl_bench: %s\n", e.what());
    rc = 1;
  }
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
  return rc;
}
