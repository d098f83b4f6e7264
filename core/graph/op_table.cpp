#include "core/graph/op_table.h"

#include "core/graph/block_graph.h"

namespace remat {

namespace {

const OpTraits kOps[] = {
#define OP(id, nm, kind, rin, rout, always, ffwd, fbwd)                            \
  {nm, StepKind::kind, rin, rout, always,                                          \
   [](const StepDef& s) -> std::uint64_t { return static_cast<std::uint64_t>(ffwd); }, \
   [](const StepDef& s) -> std::uint64_t { return static_cast<std::uint64_t>(fbwd); }},
#include "core/graph/ops.def"
#undef OP
};
static_assert(sizeof(kOps) / sizeof(kOps[0]) == kOpCount);

}  // namespace

const OpTraits& op_traits(OpKind k) { return kOps[static_cast<int>(k)]; }

const char* to_string(OpKind k) { return op_traits(k).name; }

const char* to_string(StepKind k) {
  static const char* n[] = {"gemm", "norm", "softmax", "dropout", "activation", "attention",
                            "elementwise"};
  return n[static_cast<int>(k)];
}

}  // namespace remat
