#include "core/engine/rank_prediction.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "core/model/param_layout.h"
#include "core/util/error.h"

namespace remat {

namespace {

std::uint64_t u(std::int64_t v) { return static_cast<std::uint64_t>(v); }

// Each block parameter's divisor over T (by its name in the block; 1 where absent), from the step
// that uses it and its region.
std::map<std::string, std::int64_t> param_divisors(const ModelConfig& m, const ParallelLayout& p) {
  std::map<std::string, std::int64_t> div;
  if (p.tp <= 1) return div;
  const BlockGraph g(m);
  const BlockRegions r = block_regions(g);
  for (std::size_t s = 0; s < g.steps().size(); ++s) {
    const StepDef& st = g.steps()[s];
    // A per-head QK-norm's weights are every head's: held whole by each rank.
    const bool split = st.op == OpKind::Linear || (r.step[s] == Region::Tensor && st.op != OpKind::QkHeadNorm);
    if (!st.w.empty()) div[st.w] = split ? p.tp : 1;
    // A row-parallel linear adds its bias once, after the reduction: every rank holds all of it.
    if (!st.b.empty()) div[st.b] = split && !r.row_parallel[s] ? p.tp : 1;
  }
  return div;
}

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

}  // namespace

namespace {

// Every stage's parameter elements from one pass over the model's layout: the blocks' (as
// prefix sums over the blocks) and the parameters outside them, so a plan of thousands of
// stages reads the layout once.
class StageParams {
 public:
  StageParams(const ModelConfig& m, const ParallelLayout& p) : m_(m), p_(p) {
    const ParamLayout L(m);
    const std::map<std::string, std::int64_t> div = param_divisors(m, p);
    prefix_.assign(static_cast<std::size_t>(m.layers) + 1, 0);
    for (int b = 0; b < m.layers; ++b) {
      std::uint64_t n = 0;
      for (std::size_t i : L.block_params(b)) {
        const ParamSpec& ps = L.params()[i];
        const auto d = div.find(ps.local);
        n += u(ps.numel()) / u(d == div.end() ? 1 : d->second);
      }
      prefix_[static_cast<std::size_t>(b) + 1] = prefix_[static_cast<std::size_t>(b)] + n;
    }
    for (const ParamSpec& ps : L.params()) {
      if (ps.block >= 0) continue;
      const std::uint64_t e = u(ps.numel());
      if (ps.offset == L.wte) {
        // Replicated on every tensor-parallel rank (runs hold all of it); a tied head on a later
        // stage keeps its own copy.
        first_ += e;
        if (L.lm_head < 0) tied_head_ += e;
      } else if (ps.offset == L.lm_head || ps.offset == L.lnf_w || ps.offset == L.lnf_b) {
        last_ += e;
      } else {  // the learned positions
        first_ += e;
      }
    }
  }
  std::uint64_t elements(int stage) const {
    const int from = p_.stage_first_block(m_, stage), to = from + p_.stage_layers(m_, stage);
    std::uint64_t n = prefix_[static_cast<std::size_t>(to)] - prefix_[static_cast<std::size_t>(from)];
    const bool first = stage == 0, last = stage == p_.pp - 1;
    if (first) n += first_;
    if (last) n += last_;
    if (last && !first) n += tied_head_;
    return n;
  }

 private:
  const ModelConfig& m_;
  const ParallelLayout& p_;
  std::vector<std::uint64_t> prefix_;
  std::uint64_t first_ = 0, last_ = 0, tied_head_ = 0;
};

RankStatic static_of(const ModelConfig& m, const ParallelLayout& p, std::uint64_t elements) {
  RankStatic r;
  r.param_elements = elements;
  const std::uint64_t n = r.param_elements, D = u(p.dp);
  auto part = [&](int from_stage) { return p.zero >= from_stage ? ceil_div(n, D) : n; };
  r.parameters = part(3) * dtype_size(m.dtype);
  r.gradients = part(2) * dtype_size(m.dtype);
  r.master_weights = m.dtype == DType::F32 ? 0 : part(1) * 4;
  r.optimizer_state = part(1) * 8;
  return r;
}

}  // namespace

std::uint64_t rank_param_elements(const ModelConfig& m, const ParallelLayout& p, int stage) {
  return StageParams(m, p).elements(stage);
}

RankStatic rank_static(const ModelConfig& m, const ParallelLayout& p, int stage) {
  return static_of(m, p, rank_param_elements(m, p, stage));
}

// Megatron distributes only the inputs of blocks recomputed in full.
void check_distributed_schedule(const Schedule& s, int blocks) {
  std::vector<bool> seen(static_cast<std::size_t>(blocks), false);
  for (const Action& a : s.actions) {
    if (a.kind == ActionKind::Offload || a.kind == ActionKind::Prefetch)
      throw ConfigError("distribute-saved-activations",
                        "policy '" + s.policy + "' moves block " + std::to_string(a.block) +
                            "'s tensors to the host; distributed checkpoints keep them split on the device "
                            "instead (drop one of the two)");
    if (a.kind != ActionKind::Forward || a.block < 0 || a.block >= blocks || seen[a.block]) continue;
    seen[a.block] = true;
    const bool ok = a.keep.kind == KeepKind::Input || a.keep.kind == KeepKind::None;
    if (!ok && a.block != blocks - 1)
      throw ConfigError("distribute-saved-activations",
                        "policy '" + s.policy + "' keeps '" + a.keep.to_string() + "' in block " +
                            std::to_string(a.block) + "'s forward; distributed checkpoints need every "
                            "block but the last recomputed from its input (e.g. uniform:segments=" +
                            std::to_string(blocks) + ")");
  }
}

namespace {

// Per block of stage i, its block table and whether it has the model's window: two stages of as
// many blocks plan and walk alike only when these agree (dense layers among experts, windows).
std::vector<int> stage_block_kinds(const BlockGraph& whole, const ParallelLayout& p, const ModelConfig& m, int i) {
  std::vector<int> k;
  const int first = p.stage_first_block(m, i);
  for (int b = first; b < first + p.stage_layers(m, i); ++b) k.push_back(2 * whole.table_index(b) + (whole.windowed(b) ? 1 : 0));
  return k;
}

// A stage's 1F1B step, walked short: its warm-up forwards, at most kSteadyPairs + 1
// forward-backward pairs (every later pair repeats the last one: the same buffers are allocated
// and freed) and its cool-down; a stage with more than kExactWarmup warm-up forwards from walks
// with 2, 3 and 4 of them and as many pairs, whose peaks grow by the same bytes per micro-batch
// in flight (checked; else walked).
constexpr int kSteadyPairs = 3;
constexpr int kExactWarmup = 4;

struct StageWalk {
  std::uint64_t peak = 0, activation_peak = 0, held = 0, reserved = 0, rounded_peak = 0;
};

class StageWalker {
 public:
  StageWalker(const ModelConfig& m, const ParallelLayout& p, const Backend* mirror)
      : m_(m), p_(p), mirror_(mirror), n_(p.micro_batches_of(m)), whole_(m) {}

  StageWalk stage(int i, const Schedule& s) {
    const int w = std::min(p_.pp - i - 1, n_);
    // Its forward-backward pairs: the step's, up to 1 + kSteadyPairs (a step with fewer pairs
    // than that, one whose warm-up takes almost every micro-batch, peaks differently).
    const int pairs = std::min(n_ - w, 1 + kSteadyPairs);
    if (w <= kExactWarmup) return walk(i, s, w, pairs);
    const StageWalk a = walk(i, s, kExactWarmup - 2, pairs), b = walk(i, s, kExactWarmup - 1, pairs),
                    c = walk(i, s, kExactWarmup, pairs);
    // The peak is the highest of the step's moments, each of whose bytes grows with the warm-up
    // or not at all: three peaks in a line that rises are the rising moments', and stay so. A
    // level peak while the activations grow is a moment that does not grow (the optimizer's,
    // say), which a longer warm-up may overtake: that stage is walked whole (as one whose peaks
    // are not in a line).
    // A CUDA target's reserved bytes (blocks per size class) the same: in a line that rises.
    const bool linear = b.peak - a.peak == c.peak - b.peak &&
                        b.activation_peak - a.activation_peak == c.activation_peak - b.activation_peak &&
                        c.peak >= b.peak && c.activation_peak >= b.activation_peak &&
                        (c.peak > b.peak || c.activation_peak == b.activation_peak) &&
                        b.reserved - a.reserved == c.reserved - b.reserved && c.reserved >= b.reserved &&
                        b.rounded_peak - a.rounded_peak == c.rounded_peak - b.rounded_peak &&
                        c.rounded_peak >= b.rounded_peak;
    if (!linear) return walk(i, s, w, pairs);
    const std::uint64_t more = static_cast<std::uint64_t>(w - kExactWarmup);
    return {c.peak + more * (c.peak - b.peak), c.activation_peak + more * (c.activation_peak - b.activation_peak),
            c.held, c.reserved + more * (c.reserved - b.reserved),
            c.rounded_peak + more * (c.rounded_peak - b.rounded_peak)};
  }

 private:
  // Stage i's rank with w warm-up forwards and then `pairs` forward-backward pairs, in a
  // pipeline order that keeps its role (first, middle or last).
  StageWalk walk(int i, const Schedule& s, int w, int pairs) {
    const int role = i == 0 ? 0 : i == p_.pp - 1 ? 2 : 1;
    const int n = w + pairs;
    const auto key = std::make_tuple(role, stage_block_kinds(whole_, p_, m_, i), w, n);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    int stages = 0, at = 0;
    if (role == 0) stages = w + 1, at = 0;
    else if (role == 1) stages = w + 2, at = 1;
    else stages = 2, at = 1;  // the last stage warms up with nothing
    if (stages == p_.pp) at = i;  // the step's own order
    const Prediction pr = simulate_stage_order(m_, p_, i, s, mirror_, stages, at, n);
    return cache_[key] = {pr.peak_bytes, pr.activation_peak_bytes, pr.held_after_forward_bytes, pr.reserved_bytes,
                          pr.rounded_peak_bytes};
  }

  const ModelConfig& m_;
  const ParallelLayout& p_;
  const Backend* mirror_;
  int n_;
  BlockGraph whole_;  // the model's tables, for each stage's block kinds
  std::map<std::tuple<int, std::vector<int>, int, int>, StageWalk> cache_;
};

}  // namespace

RankPrediction predict_ranks(const ModelConfig& m, const ParallelLayout& p, const StagePlanner& plan,
                             const Backend* mirror) {
  validate_layout(p, m);
  RankPrediction r;
  r.layout = p;
  r.micro_batches = p.micro_batches_of(m);
  StageWalker walker(m, p, mirror);
  const StageParams params(m, p);
  const BlockGraph whole(m);
  for (int i = 0; i < p.pp; ++i) {
    StagePrediction st;
    st.stage = i;
    st.blocks = p.stage_layers(m, i);
    st.in_flight = std::min(p.pp - i, r.micro_batches);
    st.micro_batch = -1;
    const std::vector<int> kinds = stage_block_kinds(whole, p, m, i);
    for (std::size_t k = 0; k < r.micro_batch.size(); ++k)
      if (r.micro_batch[k].blocks == st.blocks && r.micro_batch[k].kinds == kinds) st.micro_batch = static_cast<int>(k);
    if (st.micro_batch < 0) {
      MicroBatchPrediction mb;
      mb.blocks = st.blocks;
      mb.kinds = kinds;
      const BlockGraph g = per_rank_graph(m, p, i);
      mb.schedule = plan(g);
      if (p.distribute_saved_activations) check_distributed_schedule(mb.schedule, st.blocks);
      mb.sim = simulate(g, mb.schedule, mirror, p);
      for (std::uint64_t b : mb.sim.saved_bytes_per_block) mb.held_bytes += b;
      st.micro_batch = static_cast<int>(r.micro_batch.size());
      r.micro_batch.push_back(std::move(mb));
    }
    const MicroBatchPrediction& mb = r.micro_batch[static_cast<std::size_t>(st.micro_batch)];
    st.statics = static_of(m, p, params.elements(i));
    const std::uint64_t waiting = static_cast<std::uint64_t>(st.in_flight - 1) * mb.held_bytes;
    st.activation_bytes = waiting + mb.sim.activation_peak_bytes;
    st.held_bytes = mb.held_bytes;
    st.peak_bytes = st.statics.total() + waiting + (mb.sim.peak_bytes - mb.sim.static_bytes);
    if (st.peak_bytes == mb.sim.peak_bytes) {  // the walk is the stage's
      st.reserved_bytes = mb.sim.reserved_bytes;
      st.rounded_peak_bytes = mb.sim.rounded_peak_bytes;
    }
    if (p.pp > 1) {
      // The stage's 1F1B step walked as a run executes it (simulate_stage_order): its
      // micro-batches' buffers, the sends and receives between stages, the head on the last
      // stage and ZeRO's gathered parameters and gradient buckets, to the byte of a run; the sum
      // above is its outline. Walked short (StageWalker), so plan's time and memory stay those
      // of a few micro-batches whatever the stages and micro-batches.
      const StageWalk w = walker.stage(i, mb.schedule);
      st.activation_bytes = w.activation_peak;
      st.peak_bytes = w.peak;
      st.held_bytes = w.held;
      st.reserved_bytes = w.reserved;
      st.rounded_peak_bytes = w.rounded_peak;
    }
    if (st.peak_bytes > r.peak_bytes) {
      r.peak_bytes = st.peak_bytes;
      r.peak_stage = i;
    }
    r.stages.push_back(st);
  }
  return r;
}

std::uint64_t layer_activation_bytes(const BlockGraph& g, Strategy s) {
  switch (s) {
    case Strategy::Store: return g.saved_bytes();
    case Strategy::Selective: return g.saved_bytes_without(g.default_selective());
    case Strategy::Full: return g.tensors()[g.input()].bytes;
  }
  return 0;
}

std::vector<StrategyRow> paper_strategies(const ModelConfig& m, const ParallelLayout& base) {
  ParallelLayout p = base;
  p.sp = false;
  p.distribute_saved_activations = false;
  validate_layout(p, m);
  const struct { const char* name; bool sp; Strategy s; } rows[] = {
      {"tensor parallel (baseline)", false, Strategy::Store},
      {"+ sequence parallel", true, Strategy::Store},
      {"+ selective recomputation", false, Strategy::Selective},
      {"+ sequence parallel + selective", true, Strategy::Selective},
      {"full recomputation", false, Strategy::Full}};
  std::vector<StrategyRow> out;
  for (const auto& row : rows) {
    ParallelLayout q = p;
    q.sp = row.sp && p.tp > 1;
    if (row.sp) validate_layout(q, m);
    StrategyRow r;
    r.name = row.name;
    r.sp = q.sp;
    r.strategy = row.s;
    // Each block by its own table (dense and mixture-of-experts layers differ); layer_bytes is
    // the largest of the stage's.
    const BlockGraph g = per_rank_graph(m, q, 0);
    std::uint64_t stage = 0;
    for (int b = 0; b < q.stage_layers(m, 0); ++b) {
      const std::uint64_t lb = layer_activation_bytes(g.of(b), row.s);
      stage += lb;
      r.layer_bytes = std::max(r.layer_bytes, lb);
    }
    const std::uint64_t in_flight = static_cast<std::uint64_t>(std::min(q.pp, q.micro_batches_of(m)));
    r.first_stage_bytes = in_flight * stage;
    out.push_back(r);
  }
  for (auto& r : out)
    r.percent = out[0].first_stage_bytes ? 100.0 * static_cast<double>(r.first_stage_bytes) /
                                               static_cast<double>(out[0].first_stage_bytes)
                                         : 0.0;
  return out;
}

}  // namespace remat
