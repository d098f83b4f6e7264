// ZeRO's shards of the flat parameter vector (Rajbhandari et al. 2020): with D data-parallel
// ranks each rank owns the contiguous elements [r·c, min(n, (r + 1)·c)) of the n parameters,
// c = ceil(n / D), and holds a buffer of c elements for what its stage shards (the last rank's
// shard is shorter, its buffer is not: every rank allocates the same bytes, as the predictor
// counts them). Stage 1 shards the AdamW moments (and master weights), stage 2 the gradients
// too, stage 3 the parameters too.
//
// A bucket is a set of flat ranges in increasing order (a block's parameters, or the ones
// outside the blocks), held as one buffer of their elements in that order: a transient gradient
// bucket (stage 2) or gathered parameters (stage 3). Because the order is the flat order, each
// rank's part of a bucket is one contiguous run of it, so a variable-count reduce-scatter or
// all-gather over the bucket moves exactly the shards.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/model/param_layout.h"

namespace remat {

struct ZeroShard {
  int stage = 0;  // 0: nothing sharded
  int ranks = 1, rank = 0;
  std::int64_t total = 0;  // n: the flat vector's elements

  bool optimizer() const { return stage >= 1 && ranks > 1; }
  bool gradients() const { return stage >= 2 && ranks > 1; }
  bool parameters() const { return stage >= 3 && ranks > 1; }
  // c = ceil(n / D): the buffer of every rank's shard.
  std::int64_t shard() const { return ranks > 0 ? (total + ranks - 1) / ranks : total; }
  std::int64_t begin(int r) const;  // first element rank r owns
  std::int64_t count(int r) const;  // elements it owns (c, fewer on the last ranks)
  std::int64_t begin() const { return begin(rank); }
  std::int64_t count() const { return count(rank); }
};

// Throws ConfigError for a stage outside 0..3, no ranks or a rank outside them.
ZeroShard make_zero_shard(int stage, int ranks, int rank, std::int64_t total);

// One contiguous run copied between a bucket and this rank's shard buffer.
struct ZeroPiece {
  std::int64_t bucket = 0, shard = 0, numel = 0;  // offsets into each
};

class ZeroBucket {
 public:
  ZeroBucket() = default;
  // Ranges [offset, offset + numel), merged and sorted; empty ones dropped.
  explicit ZeroBucket(std::vector<std::pair<std::int64_t, std::int64_t>> ranges);

  std::int64_t numel() const { return numel_; }
  bool empty() const { return numel_ == 0; }
  // Position in the bucket of flat element `offset` with `n` elements after it inside one
  // range, or -1 when they are not all in it.
  std::int64_t position(std::int64_t offset, std::int64_t n) const;
  // Elements of each rank's shard inside the bucket, by rank (they add up to numel()).
  std::vector<std::size_t> counts(const ZeroShard& z) const;
  // This rank's runs: where they sit in the bucket and in its shard buffer.
  std::vector<ZeroPiece> pieces(const ZeroShard& z) const;
  const std::vector<std::pair<std::int64_t, std::int64_t>>& ranges() const { return ranges_; }

 private:
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges_;  // (offset, numel), increasing
  std::int64_t numel_ = 0;
};

// Block b's parameters (contiguous in the layout).
ZeroBucket zero_block_bucket(const ParamLayout& L, int block);
// Every parameter outside the blocks: the embeddings, the final norm, the output layer.
ZeroBucket zero_outer_bucket(const ParamLayout& L);

}  // namespace remat
