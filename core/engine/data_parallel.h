// Data parallelism inside one step: each replica runs its slice of the global batch (the model's
// `batch` is the slice), dropout masks are keyed by the element's place in the global batch, the
// loss gradient is scaled by the global token count, the gradients are summed over the replicas
// before AdamW (so every replica applies the global mean gradient) and the reported loss is the
// global mean. With a null communicator the same calls move nothing, so the simulator walks a
// replica's step exactly as it runs.
#pragma once
#include <cstdint>
#include <vector>

#include "core/backend/backend.h"
#include "core/data/corpus.h"
#include "core/dist/communicator.h"
#include "core/model/model_config.h"

namespace remat {

// Replica index and count of a communicator (0 and 1 without one).
int replica_of(const Communicator* c);
int replicas_of(const Communicator* c);

// Elements of one replica's mask at a dropout site: tokens × hidden for the embedding and the
// residuals, batch × heads × seq × seq for the attention probabilities. Every mask is
// batch-major, so replica r's elements start at r times this in the global batch's mask.
std::uint64_t dropout_mask_elements(const ModelConfig& m, DropoutSite site);
std::uint64_t dropout_offset(const ModelConfig& m, DropoutSite site, int replica);

// Refuses what a data-parallel step cannot sum: a backend whose memory the host cannot address
// under a communicator that sums host memory (Gloo; NCCL's takes device memory). Any dtype:
// 16-bit tensors are summed and moved as fp32 copies (Executor::collective_f32).
void check_data_parallel(const ModelConfig& m, const Backend& b, const Communicator& c);

// Rows [replica·b, (replica + 1)·b) of a global batch of `replicas`·b rows of `seq` tokens.
std::vector<std::int32_t> replica_rows(const std::vector<std::int32_t>& global, int b, int seq,
                                       int replica);

// This replica's rows of step `step`'s global batch (replicas × m.batch rows drawn as one batch
// is drawn), so D replicas train on exactly the sequences one process with the global batch does.
void replica_batch(const Corpus& corpus, std::uint64_t seed, int step, const ModelConfig& m,
                   const Communicator* c, std::vector<std::int32_t>& tokens,
                   std::vector<std::int32_t>& targets);

// The global mean of per-replica means of equal slices.
double global_mean(Communicator* c, double local);

}  // namespace remat
