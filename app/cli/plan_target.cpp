#include "plan_target.h"

#include <algorithm>
#include <cstdint>
#include <iostream>

#include "cli_common.h"
#include "core/backend/cpu/cpu_backend.h"
#include "core/backend/null/cuda_target.h"
#include "core/plugin/registry.h"
#include "core/util/error.h"

namespace remat::cli {

void TargetOptions::add(CLI::App& c) {
  c.add_option("--device", device,
               "the backend to predict for: cpu (this machine's, the default) or cuda (a CUDA rank: "
               "its workspace and its caching allocator's reserved bytes, predicted without a GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  c.add_option("--gpu-memory", gpu_memory,
               "with --device cuda: the GPU's memory, e.g. 80GiB; says whether the step fits");
}

std::optional<std::uint64_t> TargetOptions::capacity() const {
  if (gpu_memory.empty()) return std::nullopt;
  const std::uint64_t b = parse_bytes("gpu-memory", gpu_memory);
  if (b == 0) throw ConfigError("gpu-memory", "a GPU of 0 bytes holds nothing; give its memory, e.g. 80GiB");
  return b;
}

std::unique_ptr<Backend> TargetOptions::backend() const {
  if (!gpu_memory.empty() && !cuda()) throw Error("--gpu-memory needs --device cuda");
  capacity();  // a size it cannot read: refused before anything is planned
  if (cuda()) return std::make_unique<CudaTarget>();
  return std::make_unique<CpuBackend>(cpu_threads);
}

namespace {

// What the caching allocator needs from the driver: its reserved bytes where predicted; after it
// gives back its cache, its live blocks rounded to their classes.
std::uint64_t needed(const TargetFigures& f) { return f.reserved ? f.reserved : f.peak; }
std::uint64_t needed_after_release(const TargetFigures& f) { return f.rounded_peak ? f.rounded_peak : f.peak; }

}  // namespace

bool moves_to_host(const Schedule& s) {
  for (const Action& a : s.actions)
    if (a.kind == ActionKind::Offload) return true;
  return false;
}

void print_target(const TargetOptions& o, const TargetFigures& f) {
  if (!o.cuda()) return;
  std::cout << "device                cuda (predicted; not measured on a GPU)\n"
            << "  workspace           " << human_bytes(f.workspace) << " (cuBLASLt's "
            << human_bytes(kCudaGemmWorkspaceBytes) << " and the largest op scratch)\n";
  if (f.reserved)
    std::cout << "  reserved            " << (f.host_copies ? "at least " : "") << human_bytes(f.reserved) << " ("
              << f.reserved << " bytes the caching allocator holds from the driver" << f.where << "; "
              << human_bytes(f.reserved - f.reserved_rank_peak)
              << " above the peak: size-class rounding and cached blocks of other sizes"
              << (f.host_copies ? "; more while freed blocks wait for their offload copies" : "") << ")\n";
  else
    std::cout << "  reserved            not predicted: " << f.why_no_reserved << "\n";
  const std::optional<std::uint64_t> cap = o.capacity();
  if (!cap) return;
  std::string fits = "fits in " + human_bytes(*cap);
  fits.resize(std::max<std::size_t>(fits.size() + 1, 22), ' ');
  std::cout << fits;
  if (needed(f) <= *cap)
    std::cout << "yes (" << human_bytes(*cap - needed(f)) << " to spare"
              << (f.reserved ? "" : " at the peak, the allocator's rounding not counted") << "; the CUDA context and "
              << "communicator buffers not counted)\n";
  else if (needed_after_release(f) <= *cap)
    std::cout << "only when the allocator gives back its cache and retries (its live blocks at the peak, "
              << human_bytes(needed_after_release(f)) << ", fit; reserved " << human_bytes(f.reserved)
              << " does not)\n";
  else
    std::cout << "no (" << human_bytes(f.peak - *cap) << " over at the peak)\n";
}

void target_json(const TargetOptions& o, const TargetFigures& f, nlohmann::json& j) {
  j["device"] = o.device;
  if (!o.cuda()) return;
  j["measured_on_gpu"] = false;
  j["reserved_bytes"] = f.reserved ? nlohmann::json(f.reserved) : nlohmann::json(nullptr);
  j["rounded_peak_bytes"] = f.rounded_peak ? nlohmann::json(f.rounded_peak) : nlohmann::json(nullptr);
  j["reserved_is_lower_bound"] = f.host_copies;
  if (!f.reserved) j["reserved_not_predicted"] = f.why_no_reserved;
  if (const std::optional<std::uint64_t> cap = o.capacity()) {
    j["gpu_memory_bytes"] = *cap;
    j["fits"] = needed(f) <= *cap;
    j["fits_after_cache_release"] = needed_after_release(f) <= *cap;
  }
}

}  // namespace remat::cli
