// Which SIMD kernel set runs (cpu_simd.h): the best this CPU supports, or the one REMAT_SIMD
// names, chosen once when first asked for.
#include "core/backend/cpu/cpu_simd.h"

#include <hwy/targets.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <mutex>

#include "core/util/error.h"

namespace remat::cpu::simd {

extern const Kernels* const kCompiledSets[];  // cpu_simd_kernels.cpp
extern const int kCompiledSetCount;

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::atomic<const Kernels*> g_active{nullptr};
std::once_flag g_once;

}  // namespace

std::vector<const Kernels*> available() {
  const std::int64_t supported = hwy::SupportedTargets();
  std::vector<const Kernels*> out;
  for (int i = 0; i < kCompiledSetCount; ++i) {
    const Kernels* k = kCompiledSets[i];
    if (!k || !(k->target & supported)) continue;
    bool seen = false;  // the fallback may repeat a listed target
    for (const Kernels* o : out) seen = seen || o == k;
    if (!seen) out.push_back(k);
  }
  return out;
}

const Kernels* by_name(const std::string& spec) {
  const std::string s = lower(spec);
  if (s == "scalar") return nullptr;
  const std::vector<const Kernels*> all = available();
  if (all.empty()) throw Error("REMAT_SIMD: no SIMD kernel set runs on this CPU");
  if (s.empty() || s == "best") return all.front();
  if (s == "baseline") {
    for (const Kernels* k : all)
      if (k->target == HWY_STATIC_TARGET) return k;
    return all.back();
  }
  std::string names;
  for (const Kernels* k : all) {
    if (lower(k->name) == s) return k;
    names += std::string(", ") + k->name;
  }
  throw Error("REMAT_SIMD=" + spec + ": expected scalar, baseline, best or a target this CPU runs (" +
              names.substr(2) + ")");
}

const Kernels* active() {
  std::call_once(g_once, [] {
    const char* env = std::getenv("REMAT_SIMD");
    g_active.store(by_name(env ? env : "best"));
  });
  return g_active.load();
}

std::string active_name() {
  const Kernels* k = active();
  return k ? k->name : "scalar";
}

void set_active(const Kernels* k) {
  active();  // the first choice must not overwrite this one later
  g_active.store(k);
}

}  // namespace remat::cpu::simd
