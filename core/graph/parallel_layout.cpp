#include "core/graph/parallel_layout.h"

#include <utility>

#include "core/util/error.h"

namespace remat {

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

constexpr std::int64_t kMaxMicroBatches = 1 << 30;

void divisible(const char* field, const std::string& what, std::int64_t n, const char* by_name,
               std::int64_t by) {
  if (n % by != 0)
    throw ConfigError(field, what + " " + str(n) + " is not divisible by " + by_name + " " + str(by));
}

bool is_mask(const BlockGraph& g, int t) {
  const int p = g.tensors()[t].producer;
  return p >= 0 && g.steps()[p].op == OpKind::DropoutMask;
}

// Divides a count by d, which must divide it (the layout's validation guarantees it).
template <class T>
T exact(T v, std::int64_t d, const std::string& what) {
  if (static_cast<std::int64_t>(v) % d != 0)
    throw Error("per-rank block table: " + what + " (" + str(static_cast<std::int64_t>(v)) +
                ") is not divisible by " + str(d));
  return static_cast<T>(static_cast<std::int64_t>(v) / d);
}

}  // namespace

int ParallelLayout::micro_batches_of(const ModelConfig& m) const {
  if (micro_batches > 0) return micro_batches;
  if (global_batch > 0) return static_cast<int>(global_batch / (static_cast<std::int64_t>(dp) * m.batch));
  return pp;
}

int ParallelLayout::stage_layers(const ModelConfig& m, int stage) const {
  if (stage < 0 || stage >= pp)
    throw Error("stage " + str(stage) + " of " + str(pp) + " does not exist");
  if (stage == 0 && first_stage_layers > 0) return first_stage_layers;
  if (stage == pp - 1 && last_stage_layers > 0) return last_stage_layers;
  const int fixed = (first_stage_layers > 0 ? 1 : 0) + (last_stage_layers > 0 ? 1 : 0);
  return (m.layers - first_stage_layers - last_stage_layers) / (pp - fixed);
}

int ParallelLayout::stage_first_block(const ModelConfig& m, int stage) const {
  int b = 0;
  for (int i = 0; i < stage; ++i) b += stage_layers(m, i);
  return b;
}

std::string ParallelLayout::to_string() const {
  std::string s = "tp " + str(tp) + (sp ? " sp" : "") + ", pp " + str(pp) + ", dp " + str(dp) +
                  ", zero " + str(zero);
  if (distribute_saved_activations) s += ", distributed checkpoints";
  return s;
}

void validate_layout(const ParallelLayout& p, const ModelConfig& m) {
  if (p.tp < 1) throw ConfigError("tp", "must be at least 1, got " + str(p.tp));
  if (p.pp < 1) throw ConfigError("pp", "must be at least 1, got " + str(p.pp));
  if (p.dp < 1) throw ConfigError("dp", "must be at least 1, got " + str(p.dp));
  if (p.zero < 0 || p.zero > 3) throw ConfigError("zero", "must be 0, 1, 2 or 3, got " + str(p.zero));
  if (p.sp && p.tp < 2) throw ConfigError("sp", "sequence parallelism needs tp > 1 (tp is " + str(p.tp) + ")");
  if (p.distribute_saved_activations && p.tp < 2)
    throw ConfigError("distribute-saved-activations", "needs tp > 1 (tp is " + str(p.tp) + ")");
  if (p.distribute_saved_activations && p.sp)
    throw ConfigError("distribute-saved-activations",
                      "cannot be combined with sequence parallelism (the inputs are already split)");
  if (p.tp > 1 && m.moe.on())
    throw ConfigError("tp", "tensor parallelism of mixture-of-experts layers is not modelled yet (tp is " + str(p.tp) +
                                "; the model has " + str(m.moe.experts) + " experts)");
  if (p.tp > 1 && m.mla.on())
    throw ConfigError("tp", "tensor parallelism of multi-head latent attention is not modelled yet (tp is " + str(p.tp) + ")");
  const std::int64_t T = p.tp;
  divisible("tp", "heads", m.heads, "tp", T);
  divisible("tp", "kv-heads", m.kv_heads, "tp", T);
  divisible("tp", "ffn", m.ffn, "tp", T);
  divisible("tp", "vocab", m.vocab, "tp", T);
  if (p.sp) divisible("sp", "the sequence length", m.seq, "tp", T);
  if (p.first_stage_layers < 0 || p.last_stage_layers < 0)
    throw ConfigError("first-stage-layers", "the first and last stage's layers must be at least 1");
  const int fixed = (p.first_stage_layers > 0 ? 1 : 0) + (p.last_stage_layers > 0 ? 1 : 0);
  if (fixed == 0) {
    divisible("pp", "layers", m.layers, "pp", p.pp);
  } else {
    if (p.pp < fixed + 1)
      throw ConfigError("pp", "first or last stage layers need more than " + str(fixed) +
                                  " stages (pp is " + str(p.pp) + ")");
    const std::int64_t rest = static_cast<std::int64_t>(m.layers) - p.first_stage_layers - p.last_stage_layers;
    if (rest < p.pp - fixed)
      throw ConfigError("pp", str(m.layers) + " layers leave " + str(rest) + " for the other " +
                                  str(p.pp - fixed) + " stages");
    divisible("pp", "the layers of the other stages (" + str(m.layers) + " - first - last)", rest,
              "their count", p.pp - fixed);
  }
  if (p.micro_batches < 0) throw ConfigError("micro-batches", "must be at least 1, got " + str(p.micro_batches));
  if (p.global_batch < 0) throw ConfigError("global-batch", "must be at least 1, got " + str(p.global_batch));
  if (p.global_batch > 0) {
    divisible("global-batch", "the global batch", p.global_batch, "dp", p.dp);
    const std::int64_t per_replica = p.global_batch / p.dp;
    divisible("global-batch", "the batch per replica (global batch / dp)", per_replica,
              "the micro-batch size", m.batch);
    const std::int64_t n = per_replica / m.batch;
    if (n > kMaxMicroBatches)
      throw ConfigError("global-batch", "makes " + str(n) + " micro-batches per replica, more than " +
                                            str(kMaxMicroBatches));
    if (p.micro_batches > 0 && n != p.micro_batches)
      throw ConfigError("micro-batches", str(p.micro_batches) + " micro-batches of " + str(m.batch) +
                                             " on " + str(p.dp) + " replicas make " +
                                             str(static_cast<std::int64_t>(p.micro_batches) * m.batch * p.dp) +
                                             " sequences, the global batch is " + str(p.global_batch));
  }
  const int n = p.micro_batches_of(m);
  if (p.pp > 1 && n < p.pp)
    throw ConfigError("micro-batches", str(n) + " micro-batches are fewer than the " + str(p.pp) +
                                           " pipeline stages (1F1B needs at least one per stage)");
}

const char* to_string(Region r) { return r == Region::Tensor ? "tensor" : "sequence"; }

BlockRegions block_regions(const BlockGraph& g) {
  const auto& T = g.tensors();
  const auto& S = g.steps();
  BlockRegions r;
  r.tensor.assign(T.size(), Region::Sequence);
  r.step.assign(S.size(), Region::Sequence);
  r.row_parallel.assign(S.size(), false);
  std::vector<bool> known(T.size(), false);
  known[static_cast<std::size_t>(g.input())] = true;
  for (std::size_t s = 0; s < S.size(); ++s) {
    const StepDef& st = S[s];
    if (st.op == OpKind::DropoutMask) continue;  // placed with its reader below
    bool have = false;
    Region in = Region::Sequence;
    for (int t : st.in) {
      if (is_mask(g, t)) continue;
      if (!known[static_cast<std::size_t>(t)])
        throw Error("block table: step '" + st.name + "' reads '" + T[t].name + "' before it is made");
      if (have && r.tensor[t] != in)
        throw Error("block table: step '" + st.name + "' reads tensors of both the sequence and the "
                    "tensor-parallel region; it cannot be split over tensor-parallel ranks");
      in = r.tensor[t];
      have = true;
    }
    Region out = in;
    if (st.op == OpKind::Linear) {
      r.row_parallel[s] = in == Region::Tensor;
      out = in == Region::Tensor ? Region::Sequence : Region::Tensor;
    }
    r.step[s] = out;
    for (int t : st.out) {
      r.tensor[t] = out;
      known[t] = true;
    }
    for (int t : st.in)
      if (is_mask(g, t)) {
        r.tensor[t] = out;
        r.step[T[t].producer] = out;
        known[t] = true;
      }
  }
  return r;
}

Share tensor_share(const BlockGraph& g, const BlockRegions& r, int tensor, const ParallelLayout& p) {
  if (p.tp <= 1) return {};
  if (r.tensor[tensor] == Region::Tensor || p.sp) return {1, p.tp};
  (void)g;
  return {};
}

ModelConfig stage_model(const ModelConfig& m, const ParallelLayout& p, int stage) {
  ModelConfig s = m;
  s.layers = p.stage_layers(m, stage);
  return s;
}

ModelConfig tensor_rank_model(const ModelConfig& m, int tp) {
  if (tp <= 1) return m;
  ModelConfig r = m;
  r.head_size = m.head_dim();
  r.heads = exact(m.heads, tp, "heads");
  r.kv_heads = exact(m.kv_heads, tp, "kv-heads");
  r.ffn = exact(m.ffn, tp, "ffn");
  return r;
}

namespace {

// One table of a model (g) as a tensor-parallel rank holds it; rg: the same table of a rank's
// model (a/T heads, kv/T kv-heads, ffn/T).
BlockGraph rank_table(const BlockGraph& g, const BlockGraph& rg, const ModelConfig& rm, const ParallelLayout& p) {
  const BlockRegions r = block_regions(g);
  const std::int64_t Tp = p.tp;
  if (rg.tensors().size() != g.tensors().size() || rg.steps().size() != g.steps().size())
    throw Error("per-rank block table: the model's block does not keep its shape with " + str(Tp) +
                " tensor-parallel ranks");
  std::vector<TensorDef> tensors = g.tensors();
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    const Share sh = tensor_share(g, r, static_cast<int>(t), p);
    if (sh.den == 1) continue;
    TensorDef& d = tensors[t];
    d.numel = exact(d.numel * sh.num, sh.den, "tensor '" + d.name + "'");
    d.bytes = static_cast<std::uint64_t>(d.numel) * dtype_size(d.dtype);
    if (r.tensor[t] == Region::Tensor && rg.tensors()[t].numel != d.numel)
      throw Error("per-rank block table: tensor '" + d.name + "' has " + str(rg.tensors()[t].numel) +
                  " elements on a rank's model, " + str(d.numel) + " as its share");
    d.formula += "/t";
  }
  std::vector<StepDef> steps = g.steps();
  for (std::size_t s = 0; s < steps.size(); ++s) {
    StepDef& st = steps[s];
    const std::string what = "step '" + st.name + "'";
    const StepDef& rs = rg.steps()[s];
    if (st.op == OpKind::Linear) {
      if (r.row_parallel[s]) st.K = exact(st.K, Tp, what + " input features");
      else st.N = exact(st.N, Tp, what + " output features");
    } else if (r.step[s] == Region::Tensor) {
      // As a rank's model runs it: heads or the ffn width split.
      st.M = rs.M;
      st.K = rs.K;
      st.N = rs.N;
      st.rows = rs.rows;
    } else if (p.sp) {
      // The sequence region on 1/T of the token rows.
      if (st.M % Tp == 0) {
        st.M /= Tp;
      } else {
        st.K = exact(st.K, Tp, what + " width");
        st.N = exact(st.N, Tp, what + " width");
      }
    }
  }
  return BlockGraph::from_table(rm, std::move(tensors), std::move(steps), g.input(), g.output());
}

}  // namespace

BlockGraph per_rank_graph(const ModelConfig& m, const ParallelLayout& p, int stage) {
  const ModelConfig sm = stage_model(m, p, stage);
  BlockGraph g(sm);
  g.set_first_block(p.stage_first_block(m, stage));
  if (p.tp <= 1) return g;
  // The tensor region as one rank's model has it, the sequence region as the whole model's,
  // split on the rows with sp; each of the model's tables alike.
  const ModelConfig rm = tensor_rank_model(sm, p.tp);
  const BlockGraph rg(rm);
  BlockGraph out = rank_table(g, rg, rm, p);
  std::vector<BlockGraph> variants;
  for (int i = 1; i < g.table_count(); ++i) variants.push_back(rank_table(g.table(i), rg.table(i), rm, p));
  out.set_first_block(g.first_block());
  return BlockGraph::with_variants(std::move(out), std::move(variants), g);
}

}  // namespace remat
