// ZeRO's shards in a step (zero_shard.h). Stage 1: AdamW updates this rank's shard of the
// parameters, then the parameters are all-gathered in place. Stage 2: each block's gradients
// go to a bucket allocated at its backward and reduce-scattered into the gradient shard right
// after it; the parameters outside the blocks share one bucket, open from the head (where
// their gradients start) to the embedding's backward. Stage 3: a block's parameters are
// gathered into a buffer before its forward, before each recompute and before its backward,
// and freed after; the embedding's (word embedding, learned positions) before the embedding's
// forward, the head's (final norm, output layer or the tied word embedding) before the head.
// Every buffer comes from the tracking allocator, so the simulator's walk predicts them.
#include <algorithm>

#include "core/engine/executor.h"
#include "core/util/error.h"

namespace remat {

namespace {

// Bytes of a rank's runs of a bucket.
std::uint64_t pieces_bytes(const std::vector<ZeroPiece>& pieces, DType dt) {
  std::uint64_t n = 0;
  for (const ZeroPiece& p : pieces) n += static_cast<std::uint64_t>(p.numel);
  return n * dtype_size(dt);
}

}  // namespace

void Executor::setup_zero() {
  zero_ = st_.zero();
  if (zero_.stage == 0 || zero_.ranks == 1) return;
  if (!opt_.comm || opt_.comm->size() != zero_.ranks || opt_.comm->rank() != zero_.rank)
    throw Error("ZeRO-" + std::to_string(zero_.stage) + " state of rank " + std::to_string(zero_.rank) +
                " of " + std::to_string(zero_.ranks) + " needs a data-parallel communicator of " +
                std::to_string(zero_.ranks) + " ranks");
  const ParamLayout& L = st_.layout();
  for (int b = 0; b < cfg_.layers; ++b) zero_blocks_.push_back(zero_block_bucket(L, b));
  zero_outer_ = zero_outer_bucket(L);
  const std::int64_t H = cfg_.hidden, V = cfg_.vocab;
  // A pipeline stage holds the embedding, the head, both or neither (pipeline_stage.h).
  std::vector<std::pair<std::int64_t, std::int64_t>> embed, head;
  auto add = [](std::vector<std::pair<std::int64_t, std::int64_t>>& r, std::int64_t offset, std::int64_t n) {
    if (offset >= 0) r.emplace_back(offset, n);
  };
  if (L.parts().embedding) {
    add(embed, L.wte, V * H);
    add(embed, L.wpe, static_cast<std::int64_t>(cfg_.positions) * H);
  }
  if (L.parts().head) {
    add(head, L.lnf_w, H);
    add(head, L.head_weight(), V * H);
    add(head, L.lnf_b, H);
  }
  zero_embed_ = ZeroBucket(embed);
  zero_head_ = ZeroBucket(head);
}

Tensor Executor::param_at(std::int64_t offset, std::int64_t numel) const {
  if (!zero_.parameters()) return st_.param(offset, numel);
  for (const ZeroLive& g : gathered_) {
    const std::int64_t p = g.bucket->position(offset, numel);
    if (p >= 0) return g.t.slice(p, numel);
  }
  throw Error("internal: parameters at " + std::to_string(offset) + " were not gathered (ZeRO-3)");
}

Tensor Executor::grad_at(std::int64_t offset, std::int64_t numel) const {
  if (!zero_.gradients()) return st_.grad(offset, numel);
  for (const ZeroLive& g : buckets_) {
    const std::int64_t p = g.bucket->position(offset, numel);
    if (p >= 0) return g.t.slice(p, numel);
  }
  throw Error("internal: gradients at " + std::to_string(offset) + " have no open bucket (ZeRO-2)");
}

Tensor Executor::param_at(int block, const std::string& local) const {
  const std::int64_t off = local.empty() ? -1 : st_.layout().offset(block, local);
  return off < 0 ? Tensor{} : param_at(off, st_.layout().numel(block, local));
}

Tensor Executor::grad_at(int block, const std::string& local) const {
  const std::int64_t off = local.empty() ? -1 : st_.layout().offset(block, local);
  return off < 0 ? Tensor{} : grad_at(off, st_.layout().numel(block, local));
}

void Executor::zero_gather(const ZeroBucket& bucket, int block) {
  ZeroLive g{&bucket, alloc_outer(cfg_.dtype, bucket.numel(), Category::Parameters, "zero.params", block), block};
  gathered_.push_back(g);
  const std::vector<ZeroPiece> mine = bucket.pieces(zero_);
  op("zero.shard.copy", "copy", block, 0, 2 * pieces_bytes(mine, cfg_.dtype), Stream::Compute, [&] {
    for (const ZeroPiece& p : mine) be_.copy(g.t.slice(p.bucket, p.numel), st_.params.slice(p.shard, p.numel));
  });
  const std::vector<std::size_t> counts = bucket.counts(zero_);
  gather_v("zero.all_gather", block, g.t, counts, *opt_.comm, "zero.params");
}

void Executor::zero_release_gathered() {
  for (ZeroLive& g : gathered_) release(g.t);
  gathered_.clear();
}

void Executor::zero_open_bucket(const ZeroBucket& bucket, int block) {
  for (const ZeroLive& g : buckets_)
    if (g.bucket == &bucket) return;  // a pipeline stage's outer bucket, open for the step
  if (bucket.empty()) return;
  ZeroLive g{&bucket, alloc_outer(cfg_.dtype, bucket.numel(), Category::Gradients, "zero.grads", block), block};
  buckets_.push_back(g);
  op("zero.grads.zero", "zero", block, 0, g.t.bytes(), Stream::Compute, [&] { be_.fill_zero(g.t); });
}

void Executor::zero_close_bucket(int block) {
  for (ZeroLive& g : buckets_) {
    if (g.block != block) continue;
    const std::vector<std::size_t> counts = g.bucket->counts(zero_);
    collective_f32("grads.reduce_scatter", "reduce_scatter", g.block, g.t,
                   [&](float* f) { opt_.comm->reduce_scatter_sum_v(f, counts, "zero.grads"); });
    const std::vector<ZeroPiece> mine = g.bucket->pieces(zero_);
    // One process: every element is in exactly one bucket a step, its summed gradient copied.
    // Pipeline stages close a block's bucket once per micro-batch: the sums add up in the shard
    // (zeroed by the step's first op).
    const bool add = pp_ > 1;
    op("zero.grads.shard", add ? "add" : "copy", g.block, 0, (add ? 3 : 2) * pieces_bytes(mine, cfg_.dtype),
       Stream::Compute, [&] {
         for (const ZeroPiece& p : mine) {
           const Tensor dst = st_.grads.slice(p.shard, p.numel), src = g.t.slice(p.bucket, p.numel);
           if (add) be_.add_into(dst, src);
           else be_.copy(dst, src);
         }
       });
    release(g.t);
  }
  buckets_.erase(std::remove_if(buckets_.begin(), buckets_.end(), [](const ZeroLive& g) { return !g.t; }),
                 buckets_.end());
}

void Executor::zero_optimizer(const AdamArgs& a) {
  // This rank's shard of every buffer: [lo, lo + c) of the flat vector, at 0 in a shard buffer.
  const std::int64_t lo = zero_.begin(), c = zero_.count();
  const Tensor p = zero_.parameters() ? st_.params.slice(0, c) : st_.params.slice(lo, c);
  const Tensor g = zero_.gradients() ? st_.grads.slice(0, c) : st_.grads.slice(lo, c);
  const Tensor m = st_.m.slice(0, c), v = st_.v.slice(0, c);
  const Tensor master = st_.master.id ? st_.master.slice(0, c) : Tensor{};
  std::vector<AdamSegment> segs;
  for (const AdamSegment& s : segments_) {
    const std::int64_t from = std::max(lo, s.offset), to = std::min(lo + c, s.offset + s.numel);
    if (to > from) segs.push_back({from - lo, to - from, s.decay});
  }
  const std::uint64_t bytes = (p.bytes() + g.bytes() + master.bytes() + m.bytes() + v.bytes()) * 2;
  op("adamw", "adamw", -1, 12 * static_cast<std::uint64_t>(c), bytes, Stream::Compute, [&] {
    if (c > 0) be_.adamw(p, g, st_.master.id ? &master : nullptr, m, v, segs, a);
  });
  if (zero_.parameters()) return;
  // Every rank's updated shard to every rank: the whole parameter vector, in place.
  const ZeroBucket all({{0, zero_.total}});
  const std::vector<std::size_t> counts = all.counts(zero_);
  gather_v("zero.params.all_gather", -1, st_.params, counts, *opt_.comm, "zero.params");
}

}  // namespace remat
