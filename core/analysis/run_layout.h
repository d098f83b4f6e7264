// Where a run stands among ranks: its layout (tensor-parallel T, sequence parallelism,
// data-parallel D, ZeRO stage) and its rank, from its provenance (a rank's run directory has
// tp/dp world sizes and ranks; one read through its ranks directory also has sp and zero). So a
// single-process run and one rank of a distributed run can be compared like with like: the
// model they train is the global one (the rank's batch times D), the label says the layout.
#pragma once
#include <string>

#include "core/model/model_config.h"
#include "core/trace/trace.h"

namespace remat {

struct RunLayout {
  int tp = 1, dp = 1, zero = 0, pp = 1;
  bool sp = false;
  bool distributed_checkpoints = false;  // --distribute-saved-activations
  int rank = -1;  // the global rank ((pp_rank · dp + dp_rank) · tp + tp_rank), -1 for a single process
  bool distributed() const { return tp * dp * pp > 1; }
};

// Without `sp` in the provenance (a rank directory opened on its own), sequence parallelism is
// recognized by its reduce-scatters in the blocks on the tensor-parallel group.
RunLayout run_layout(const Trace& t);
// "tp 2 sp", "dp 2", "tp 2 dp 4 zero 1", "pp 2 dp 2", "tp 2 distributed ckpt"; "1 rank" for a
// single process.
std::string layout_label(const RunLayout& l);
// layout_label and the rank: "tp 2 sp, rank 1"; "" for a single process.
std::string rank_label(const RunLayout& l);
// The model of the whole run: the rank's model with the global batch (batch · D).
ModelConfig global_model(const Trace& t);

}  // namespace remat
