#include "tests/gpu/gpu_test_util.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/util/bf16.h"
#include "core/util/error.h"

namespace remat::gputest {

int device_count(std::string* why) {
  char buf[1024] = {0};
  int n = remat_cuda_device_count(buf, sizeof buf);
  if (why) *why = buf;
  return n;
}

std::vector<std::uint8_t> to_bytes(DType dt, const std::vector<float>& v) {
  std::vector<std::uint8_t> out(v.size() * dtype_size(dt));
  for (std::size_t i = 0; i < v.size(); ++i) {
    switch (dt) {
      case DType::F32:
        std::memcpy(out.data() + 4 * i, &v[i], 4);
        break;
      case DType::BF16: {
        const std::uint16_t b = float_to_bf16(v[i]);
        std::memcpy(out.data() + 2 * i, &b, 2);
        break;
      }
      case DType::U8:
        out[i] = static_cast<std::uint8_t>(v[i]);
        break;
      case DType::I32: {
        const std::int32_t x = static_cast<std::int32_t>(v[i]);
        std::memcpy(out.data() + 4 * i, &x, 4);
        break;
      }
    }
  }
  return out;
}

std::vector<float> uniform(std::int64_t n, float lo, float hi, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& ref) {
  if (a.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const bool fa = std::isfinite(a[i]), fr = std::isfinite(ref[i]);
    if (fa != fr) return std::numeric_limits<double>::infinity();
    if (!fa) continue;
    const double d = static_cast<double>(a[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  if (den == 0.0) return std::sqrt(num);
  return std::sqrt(num / den);
}

Dual::Dual(std::size_t workspace_bytes) {
  char err[1024] = {0};
  Backend* b = remat_cuda_backend_create(0, err, sizeof err);
  if (!b) throw Error(std::string("remat_cuda_backend_create: ") + err);
  gpu.reset(dynamic_cast<cuda::CudaBackend*>(b));
  Tensor wc = cpu_alloc(DType::U8, static_cast<std::int64_t>(workspace_bytes));
  cpu.set_workspace(wc);
  Tensor wg = gpu_alloc(DType::U8, static_cast<std::int64_t>(workspace_bytes));
  gpu->set_workspace(wg);
}

Dual::~Dual() {
  if (gpu) gpu->synchronize();
  for (auto it = owned_.rbegin(); it != owned_.rend(); ++it)
    it->be->memory(it->t.space).deallocate(it->t.data, it->t.bytes());
}

Tensor Dual::gpu_alloc(DType dt, std::int64_t n, Space s) {
  Tensor t;
  t.dtype = dt;
  t.numel = n;
  t.space = s;
  t.data = gpu->memory(s).allocate(static_cast<std::size_t>(n) * dtype_size(dt));
  owned_.push_back({gpu.get(), t});
  return t;
}

Tensor Dual::cpu_alloc(DType dt, std::int64_t n) {
  Tensor t;
  t.dtype = dt;
  t.numel = n;
  t.space = Space::Device;
  t.data = cpu.memory(Space::Device).allocate(static_cast<std::size_t>(n) * dtype_size(dt));
  owned_.push_back({&cpu, t});
  return t;
}

Both Dual::alloc(DType dt, std::int64_t n) {
  Both b;
  b.dt = dt;
  b.n = n;
  b.c = cpu_alloc(dt, n);
  b.g = gpu_alloc(dt, n);
  return b;
}

Both Dual::upload(DType dt, const std::vector<float>& v) {
  Both b = alloc(dt, static_cast<std::int64_t>(v.size()));
  const std::vector<std::uint8_t> bytes = to_bytes(dt, v);
  cpu.write_bytes(b.c, bytes.data());
  gpu->write_bytes(b.g, bytes.data());
  return b;
}

Both Dual::random(DType dt, std::int64_t n, float lo, float hi, std::uint64_t seed) {
  return upload(dt, uniform(n, lo, hi, seed));
}

Both Dual::poisoned(DType dt, std::int64_t n) {
  Both b = alloc(dt, n);
  std::vector<std::uint8_t> ff(static_cast<std::size_t>(n) * dtype_size(dt), 0xFF);
  cpu.write_bytes(b.c, ff.data());
  gpu->write_bytes(b.g, ff.data());
  return b;
}

std::vector<float> Dual::cpu_read(const Both& b) {
  std::vector<float> v;
  cpu.read(b.c, v);
  return v;
}

std::vector<float> Dual::gpu_read(const Both& b) {
  std::vector<float> v;
  gpu->read(b.g, v);
  return v;
}

std::vector<std::uint8_t> Dual::gpu_bytes(const Tensor& t) {
  std::vector<std::uint8_t> v(t.bytes());
  gpu->read_bytes(t, v.data());
  return v;
}

double Dual::rel(const Both& b) { return rel_l2(gpu_read(b), cpu_read(b)); }

}  // namespace remat::gputest
