#include "core/engine/data_parallel.h"

#include "core/util/error.h"

namespace remat {

int replica_of(const Communicator* c) { return c ? c->rank() : 0; }
int replicas_of(const Communicator* c) { return c ? c->size() : 1; }

std::uint64_t dropout_mask_elements(const ModelConfig& m, DropoutSite site) {
  if (site == kSiteAttentionProbs)
    return static_cast<std::uint64_t>(m.batch) * static_cast<std::uint64_t>(m.heads) *
           static_cast<std::uint64_t>(m.seq) * static_cast<std::uint64_t>(m.seq);
  return static_cast<std::uint64_t>(m.tokens()) * static_cast<std::uint64_t>(m.hidden);
}

std::uint64_t dropout_offset(const ModelConfig& m, DropoutSite site, int replica) {
  return static_cast<std::uint64_t>(replica) * dropout_mask_elements(m, site);
}

void check_data_parallel(const ModelConfig& m, const Backend& b, const Communicator& c) {
  if (c.size() == 1 || !c.moves_data()) return;
  // A device-memory communicator (NCCL) sums the backend's device buffers; the others (Gloo)
  // sum in host memory, so the host must reach the gradients.
  if (!b.host_addressable() && !c.device_memory())
    throw Error("data-parallel runs sum gradients in host memory; the " + b.name() +
                " backend's memory is not host-addressable (use --device cpu)");
  (void)m;
}

std::vector<std::int32_t> replica_rows(const std::vector<std::int32_t>& global, int b, int seq,
                                       int replica) {
  const std::size_t n = static_cast<std::size_t>(b) * static_cast<std::size_t>(seq);
  const std::size_t first = n * static_cast<std::size_t>(replica);
  if (first + n > global.size())
    throw Error("replica " + std::to_string(replica) + " has no rows in a batch of " +
                std::to_string(global.size()) + " tokens");
  return {global.begin() + static_cast<std::ptrdiff_t>(first),
          global.begin() + static_cast<std::ptrdiff_t>(first + n)};
}

void replica_batch(const Corpus& corpus, std::uint64_t seed, int step, const ModelConfig& m,
                   const Communicator* c, std::vector<std::int32_t>& tokens,
                   std::vector<std::int32_t>& targets) {
  const int d = replicas_of(c);
  if (d == 1) return corpus.batch(seed, step, m.batch, m.seq, m.vocab, tokens, targets);
  std::vector<std::int32_t> tok, tgt;
  corpus.batch(seed, step, m.batch * d, m.seq, m.vocab, tok, tgt);
  tokens = replica_rows(tok, m.batch, m.seq, replica_of(c));
  targets = replica_rows(tgt, m.batch, m.seq, replica_of(c));
}

double global_mean(Communicator* c, double local) {
  if (!c || c->size() == 1) return local;
  double v = local;
  c->all_reduce_sum(&v, 1, "loss");
  return v / static_cast<double>(c->size());
}

}  // namespace remat
