// Host-side argument checks of the CUDA ops (dtype, space, element counts), run before anything
// is queued; shared by the files of the ops (cuda_ops.cpp, cuda_op_dispatch.cpp, and the .cu
// files that hold an op's CudaBackend members, e.g. kernels/geglu.cu).
#pragma once
#include <initializer_list>
#include <string>

#include "core/backend/tensor.h"
#include "core/graph/op_table.h"
#include "core/util/error.h"
#include "kernels/launch.cuh"

namespace remat::cuda {

using kernels::FType;

inline std::string describe(const Tensor& t) {
  return std::string(to_string(t.dtype)) + "[" + std::to_string(t.numel) + "] in " +
         to_string(t.space) + " space";
}

inline void check_common(const Tensor& t, const char* op, const char* name, std::int64_t need) {
  if (t.space != Space::Device)
    throw Error(std::string("cuda ") + op + ": " + name + " is " + describe(t) +
                "; compute ops take device tensors");
  if (need < 0 || t.numel < need)
    throw Error(std::string("cuda ") + op + ": " + name + " is " + describe(t) + ", needs " +
                std::to_string(need) + " elements");
  if (need > 0 && t.data == nullptr)
    throw Error(std::string("cuda ") + op + ": " + name + " has no data");
}

inline void check_float(const Tensor& t, const char* op, const char* name, std::int64_t need) {
  if (t.dtype != DType::F32 && t.dtype != DType::BF16)
    throw Error(std::string("cuda ") + op + ": " + name + " is " + describe(t) +
                ", expected f32 or bf16");
  check_common(t, op, name, need);
}

inline void check_dtype(const Tensor& t, DType dt, const char* op, const char* name,
                        std::int64_t need) {
  if (t.dtype != dt)
    throw Error(std::string("cuda ") + op + ": " + name + " is " + describe(t) + ", expected " +
                to_string(dt));
  check_common(t, op, name, need);
}

// All float operands of an op share one storage type.
inline void check_same(const Tensor& ref, std::initializer_list<const Tensor*> others,
                       const char* op) {
  for (const Tensor* t : others)
    if (t && *t && t->dtype != ref.dtype)
      throw Error(std::string("cuda ") + op + ": mixed dtypes (" + to_string(ref.dtype) +
                  " and " + to_string(t->dtype) + "); the CUDA ops take one model dtype");
}

inline void check_n(std::int64_t n, const char* op) {
  if (n < 0) throw Error(std::string("cuda ") + op + ": negative element count");
}

// A gated activation's operands: gu [rows, 2F], y (forward) or dy [rows, F], dgu [rows, 2F].
inline void check_gated(const char* op, const Tensor& gu, const Tensor& y, const Tensor* dgu,
                        std::int64_t rows, int F) {
  if (rows < 0 || F <= 0)
    throw Error(std::string("cuda ") + op + ": bad shape rows=" + std::to_string(rows) +
                " F=" + std::to_string(F));
  check_float(gu, op, "gu", rows * 2 * F);
  check_float(y, op, dgu ? "dy" : "y", rows * F);
  if (dgu) check_float(*dgu, op, "dgu", rows * 2 * F);
  check_same(gu, {&y, dgu}, op);
}

// Norm ops whose CUDA kernels take no (w_offset + w) weight.
inline void check_no_offset(const OpArgs& a, const char* op) {
  if (a.w_offset != 0.0f)
    throw Error(std::string("cuda ") + op + ": a (w_offset + w) weight is not supported");
}

inline FType ft(const Tensor& t) { return t.dtype == DType::BF16 ? FType::BF16 : FType::F32; }

// Attention sinks (gpt-oss): one logit per head in the model's dtype, or null; the backward
// needs their gradient (accumulated), in the same dtype.
inline void check_sinks(const Tensor& qkv, const AttnDims& a, const Tensor* sinks,
                        const Tensor* dsinks, bool backward, const char* op) {
  if (!sinks) return;
  check_float(*sinks, op, "sinks", a.heads);
  if (backward && !dsinks)
    throw Error(std::string("cuda ") + op + ": attention sinks without their gradient");
  if (backward) check_float(*dsinks, op, "sink gradient", a.heads);
  check_same(qkv, {sinks, backward ? dsinks : nullptr}, op);
}

}  // namespace remat::cuda
