#include "core/engine/rank_weights.h"

#include <algorithm>
#include <utility>

#include "core/engine/data_parallel.h"
#include "core/engine/pipeline_stage.h"
#include "core/engine/tensor_parallel.h"
#include "core/io/safetensors.h"
#include "core/util/error.h"

namespace remat {

namespace {

bool staged(const RankPlace& p) { return p.stages && p.stages->pp > 1; }

// The parameter runs of tensor rank t at this rank's place, in the whole model's layout: its
// stage's parameters, its tensor-parallel slices, or every parameter whole.
std::vector<WeightRun> runs_of(const ModelConfig& whole, const RankPlace& p, int t) {
  if (staged(p)) return stage_weight_runs(whole, *p.stages, p.stage, t);
  return p.tp > 1 ? rank_weight_runs(whole, p.tp, t) : layout_weight_runs(ParamLayout(whole));
}

// The whole model's flat vector from the T tensor-parallel ranks' own (ranks[t] laid out as
// runs[t] place them): what every rank holds whole is rank 0's; zeros where no run lands.
std::vector<float> merge_slices(const ParamLayout& G, const std::vector<std::vector<WeightRun>>& runs,
                                const std::vector<std::vector<float>>& ranks) {
  std::vector<float> out(static_cast<std::size_t>(G.total()), 0.0f);
  for (std::size_t t = 0; t < ranks.size(); ++t) {
    const std::vector<float>& mine = ranks[t];
    for (const WeightRun& r : runs[t]) {
      const ParamSpec& g = G.params()[r.param];
      if (t > 0 && r.begin == 0 && r.end == g.numel()) continue;  // whole on every rank: rank 0's
      if (r.dst < 0 || r.dst + (r.end - r.begin) > static_cast<std::int64_t>(mine.size()))
        throw Error("weights: a run outside tensor rank " + std::to_string(t) + "'s values");
      std::copy(mine.data() + r.dst, mine.data() + r.dst + (r.end - r.begin), out.data() + g.offset + r.begin);
    }
  }
  return out;
}

// The elements [lo, hi) of the whole model's flat vector stage s owns: from its first block's
// first parameter (0 on the first stage: the embeddings) to the next stage's (the end on the
// last: the final norm and the output layer). The layout's order (embeddings, blocks, head)
// makes them contiguous and in stage order; a tied head's copy of the word embedding is not
// owned.
std::pair<std::int64_t, std::int64_t> owned_range(const ParamLayout& G, const ModelConfig& m,
                                                  const ParallelLayout& p, int s) {
  auto start = [&](int stage) -> std::int64_t {
    if (stage == 0) return 0;
    if (stage >= p.pp) return G.total();
    const int b = p.stage_first_block(m, stage);
    for (const ParamSpec& ps : G.params())
      if (ps.block == b) return ps.offset;
    throw Error("weights: block " + std::to_string(b) + " has no parameters");
  };
  return {start(s), start(s + 1)};
}

// The records a communicator made from `from` on are dropped when this ends.
class OffTheSteps {
 public:
  explicit OffTheSteps(Communicator* c) : c_(c), from_(c ? c->records().size() : 0) {}
  ~OffTheSteps() {
    if (c_) c_->drop_records_from(from_);
  }
  OffTheSteps(const OffTheSteps&) = delete;
  OffTheSteps& operator=(const OffTheSteps&) = delete;

 private:
  Communicator* c_;
  std::size_t from_;
};

}  // namespace

std::vector<float> take_runs(const ParamLayout& layout, const std::vector<WeightRun>& runs,
                             const std::vector<float>& global, std::int64_t n) {
  if (static_cast<std::int64_t>(global.size()) != layout.total())
    throw Error("weights: " + std::to_string(global.size()) + " values, the model has " +
                std::to_string(layout.total()));
  std::vector<float> out(static_cast<std::size_t>(n), 0.0f);
  for (const WeightRun& r : runs) {
    if (r.param >= layout.params().size() || r.begin < 0 || r.end < r.begin ||
        r.end > layout.params()[r.param].numel() || r.dst < 0 || r.dst + (r.end - r.begin) > n)
      throw Error("weights: a run outside its parameter or the rank's buffer");
    const float* src = global.data() + layout.params()[r.param].offset;
    std::copy(src + r.begin, src + r.end, out.data() + r.dst);
  }
  return out;
}

std::vector<float> whole_from_rank_slices(const ModelConfig& whole, int tp,
                                          const std::vector<std::vector<float>>& ranks) {
  const ParamLayout G(whole), R(tensor_rank_model(whole, tp));
  if (static_cast<int>(ranks.size()) != tp)
    throw Error("weights: " + std::to_string(ranks.size()) + " ranks' values, " + std::to_string(tp) +
                " tensor-parallel ranks");
  std::vector<std::vector<WeightRun>> runs;
  for (int t = 0; t < tp; ++t) {
    const std::vector<float>& mine = ranks[static_cast<std::size_t>(t)];
    if (static_cast<std::int64_t>(mine.size()) != R.total())
      throw Error("weights: rank " + std::to_string(t) + " has " + std::to_string(mine.size()) +
                  " values, a rank's model " + std::to_string(R.total()));
    runs.push_back(rank_weight_runs(whole, tp, t));
  }
  return merge_slices(G, runs, ranks);
}

void load_rank_weights(const WeightFiles& files, ModelState& state, const ModelConfig& whole,
                       const RankPlace& place) {
  const ParamLayout G(whole);
  const std::vector<float> global = weight_values(files, G, whole.family);
  std::vector<WeightRun> runs = runs_of(whole, place, place.t);
  const ZeroShard& z = state.zero();
  std::int64_t n = state.layout().total();
  if (z.parameters()) {
    runs = runs_within(runs, z.begin(), z.count());
    n = z.shard();
  }
  state.write_params(take_runs(G, runs, global, n));
}

std::vector<float> gather_whole(const ModelState& state, const ModelConfig& whole, const RankPlace& place,
                                bool grads) {
  const ZeroShard& z = state.zero();
  const std::int64_t n = state.layout().total();
  if ((z.ranks > 1 && !place.comm) || (place.tp > 1 && !place.tp_comm))
    throw Error("weights: a rank of " + std::to_string(z.ranks) + " replicas and " + std::to_string(place.tp) +
                " tensor-parallel ranks without their communicators");
  std::vector<float> mine = grads ? state.read_grads() : state.read_params();
  // A ZeRO shard: the data-parallel ranks' shards make this tensor-parallel rank's vector.
  if (grads ? z.gradients() : z.parameters() || state.master_sharded()) {
    OffTheSteps quiet(place.comm);
    const std::size_t c = static_cast<std::size_t>(z.shard());
    std::vector<float> all(c * static_cast<std::size_t>(z.ranks));
    std::copy(mine.begin(), mine.begin() + static_cast<std::ptrdiff_t>(c), all.begin() + static_cast<std::ptrdiff_t>(c * z.rank));
    place.comm->all_gather(all.data(), c, grads ? "grads.save.all_gather" : "params.save.all_gather");
    all.resize(static_cast<std::size_t>(n));
    mine = std::move(all);
  }
  if (static_cast<std::int64_t>(mine.size()) != n)
    throw Error("weights: a rank holds " + std::to_string(mine.size()) + " values, its model " + std::to_string(n));
  if (replica_of(place.comm) != 0) return {};
  if (place.tp <= 1 && !staged(place)) return mine;
  std::vector<std::vector<float>> ranks;
  if (place.tp > 1) {
    // Replica 0's tensor-parallel ranks: their vectors make the whole model's (the stage's).
    OffTheSteps quiet(place.tp_comm);
    const std::size_t per = static_cast<std::size_t>(n);
    std::vector<float> all(per * static_cast<std::size_t>(place.tp));
    std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(per * place.t));
    place.tp_comm->all_gather(all.data(), per, grads ? "grads.save.tp_all_gather" : "params.save.tp_all_gather");
    if (place.t != 0) return {};
    for (int t = 0; t < place.tp; ++t)
      ranks.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(per * t),
                         all.begin() + static_cast<std::ptrdiff_t>(per * (t + 1)));
  } else {
    ranks.push_back(std::move(mine));
  }
  if (!staged(place)) return whole_from_rank_slices(whole, place.tp, ranks);
  // A stage's values in the whole layout, then every stage's own range of it to every stage.
  const ParamLayout G(whole);
  std::vector<std::vector<WeightRun>> runs;
  for (int t = 0; t < place.tp; ++t) runs.push_back(runs_of(whole, place, t));
  std::vector<float> out = merge_slices(G, runs, ranks);
  if (!place.pp_comm || place.pp_comm->size() != place.stages->pp)
    throw Error("weights: a pipeline stage without its communicator of " + std::to_string(place.stages->pp) + " stages");
  std::vector<std::size_t> counts;
  for (int s = 0; s < place.stages->pp; ++s) {
    const auto r = owned_range(G, whole, *place.stages, s);
    counts.push_back(static_cast<std::size_t>(r.second - r.first));
  }
  OffTheSteps quiet(place.pp_comm);
  place.pp_comm->all_gather_v(out.data(), counts, grads ? "grads.save.pp_all_gather" : "params.save.pp_all_gather");
  if (place.stage != 0) return {};
  return out;
}

void save_rank_file(const std::string& path, const ModelState& state, const ModelConfig& whole,
                    const RankPlace& place, bool grads, std::uint64_t shard_bytes, const InputFiles& inputs,
                    const std::string& what) {
  const std::vector<float> flat = gather_whole(state, whole, place, grads);
  if (replica_of(place.comm) == 0 && place.t == 0 && place.stage == 0)
    write_weights(path, flat, ParamLayout(whole), shard_bytes, inputs, what);
}

}  // namespace remat
