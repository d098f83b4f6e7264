// Tensor and sequence parallelism inside the blocks (Megatron-LM): a column-parallel linear
// reads the whole sequence region (gathered over the T ranks with sp) and writes its share of
// the tensor region; a row-parallel linear's partial sums are all-reduced (reduce-scattered to
// the rows with sp), its bias added once, by tensor-parallel rank 0, before the sum. The
// backward mirrors them: the column-parallel input gradient summed over T, the sequence region's
// gradients gathered and scattered. QK-norm's row statistics span the T ranks' heads: their
// partial sums are all-reduced between the op's two parts (Backend::qk_norm_sums, qk_norm_split),
// forward and backward; per-head QK-norm (Qwen3) runs on a rank's own heads, its weights'
// gradients summed over the ranks. Every exchange goes through collective() and every buffer
// through the tracking allocator, so the simulator (a null communicator of T ranks) walks it.
#include "core/engine/executor.h"
#include "core/util/error.h"

namespace remat {

Tensor Executor::tp_gather(int block, const Tensor& shard, const std::string& name) {
  const std::int64_t n = shard.numel;
  Tensor full = alloc_outer(shard.dtype, n * tp_, Category::Workspace, name, block);
  collective(name, "all_gather", block, full.bytes(), [&] {
    be_.copy(full.slice(n * tp_rank_, n), shard);
    be_.synchronize();
    // A 16-bit tensor moves as its bits (a gather sums nothing).
    if (full.dtype == DType::F32) opt_.tp_comm->all_gather(full.as<float>(), static_cast<std::size_t>(n), name);
    else opt_.tp_comm->all_gather(full.as<std::uint16_t>(), static_cast<std::size_t>(n), name);
  });
  return full;
}

void Executor::tp_reduce_scatter(int block, Tensor& full, const Tensor& shard, bool acc,
                                 const std::string& name) {
  const std::int64_t n = shard.numel;
  if (full.numel != n * tp_)
    throw Error("internal: " + name + " scatters " + std::to_string(full.numel) + " elements to shards of " +
                std::to_string(n));
  if (full.dtype != DType::F32) {
    collective_f32(name, "reduce_scatter", block, full,
                   [&](float* f) { opt_.tp_comm->reduce_scatter_sum(f, static_cast<std::size_t>(n), name); });
    op(name + ".shard", acc ? "add" : "copy", block, 0, (acc ? 3 : 2) * shard.bytes(), Stream::Compute, [&] {
      if (acc) be_.add_into(shard, full.slice(n * tp_rank_, n));
      else be_.copy(shard, full.slice(n * tp_rank_, n));
    });
    release(full);
    return;
  }
  collective(name, "reduce_scatter", block, full.bytes(), [&] {
    opt_.tp_comm->reduce_scatter_sum(full.as<float>(), static_cast<std::size_t>(n), name);
    if (acc) be_.add_into(shard, full.slice(n * tp_rank_, n));
    else be_.copy(shard, full.slice(n * tp_rank_, n));
  });
  release(full);
}

void Executor::tp_all_reduce(int block, const Tensor& t, const std::string& name) {
  collective_f32(name, "all_reduce", block, t,
                 [&](float* f) { opt_.tp_comm->all_reduce_sum(f, static_cast<std::size_t>(t.numel), name); });
}

void Executor::tp_linear_forward(int b, const StepDef& s, const std::vector<Tensor>& t) {
  const std::size_t i = static_cast<std::size_t>(&s - table_of(b).steps().data());
  const bool row = regions(b).row_parallel[i];
  OpParams params;
  OpArgs a = op_args(b, s, t, params);
  const std::string name = "h" + std::to_string(b) + "." + s.name;
  Tensor full;  // with sp: the gathered input, or the partial output before its scatter
  if (!row && sp_) {
    full = tp_gather(b, t[s.in[0]], name + ".all_gather");
    a.in[0] = &full;
  }
  if (row) {
    if (tp_rank_ != 0) a.b = nullptr;  // the bias once in the sum
    if (sp_) {
      full = alloc_outer(cfg_.dtype, s.M * s.N, Category::Workspace, name + ".partial", b);
      a.out[0] = &full;
    }
  }
  op(name, s.name, b, s.fwd_flops(graph_.windowed(b)), step_bytes(b, s), Stream::Compute,
     [&] { be_.run(s.op, Pass::Forward, a); });
  if (row && sp_) tp_reduce_scatter(b, full, t[s.out[0]], false, name + ".reduce_scatter");
  else if (row) tp_all_reduce(b, t[s.out[0]], name + ".all_reduce");
  else if (full) release(full);
}

void Executor::tp_linear_backward(int b, const StepDef& s, const std::vector<Tensor>& t,
                                  const std::vector<Tensor>& g, const std::vector<bool>& acc) {
  const std::size_t i = static_cast<std::size_t>(&s - table_of(b).steps().data());
  const bool row = regions(b).row_parallel[i];
  const std::string name = "h" + std::to_string(b) + "." + s.name;
  OpParams params;
  OpArgs a = op_args(b, s, t, params);
  Tensor dW = grad_at(b, s.w);
  Tensor dB = grad_at(b, s.b);
  a.dw = dW ? &dW : nullptr;
  a.db = dB ? &dB : nullptr;
  a.din[0] = g[s.in[0]] ? &g[s.in[0]] : nullptr;
  a.acc[0] = acc[0];
  a.dout[0] = g[s.out[0]] ? &g[s.out[0]] : nullptr;
  Tensor x, dx, dy;  // with sp: the gathered input and its whole gradient; the gathered dout
  if (!row) {
    if (sp_) {
      x = tp_gather(b, t[s.in[0]], name + ".backward.all_gather");
      a.in[0] = &x;
      if (a.din[0]) {
        dx = alloc_outer(cfg_.dtype, s.M * s.K, Category::Workspace, name + ".backward.partial", b);
        a.din[0] = &dx;
        a.acc[0] = false;
      }
    } else if (a.din[0] && acc[0]) {
      // The input is read by another step too (post-norm blocks: the residual), whose gradient is
      // already there and whole: this linear's part is summed over T on its own, then added.
      dx = alloc_outer(cfg_.dtype, s.M * s.K, Category::Workspace, name + ".backward.partial", b);
      a.din[0] = &dx;
      a.acc[0] = false;
    }
  } else if (sp_ && a.dout[0]) {
    dy = tp_gather(b, g[s.out[0]], name + ".backward.grad.all_gather");
    a.dout[0] = &dy;
  }
  op(name + ".backward", s.name, b, s.bwd_flops(graph_.windowed(b)), step_bytes(b, s) * 2, Stream::Compute,
     [&] { be_.run(s.op, Pass::Backward, a); });
  if (dy) release(dy);
  if (x) release(x);
  if (row || !g[s.in[0]]) return;
  if (sp_) {
    tp_reduce_scatter(b, dx, g[s.in[0]], acc[0], name + ".backward.reduce_scatter");
  } else if (dx) {
    tp_all_reduce(b, dx, name + ".backward.all_reduce");
    op(name + ".backward.add", "add", b, 0, dx.bytes() * 2, Stream::Compute, [&] { be_.add_into(g[s.in[0]], dx); });
    release(dx);
  } else {
    tp_all_reduce(b, g[s.in[0]], name + ".backward.all_reduce");
  }
}

void Executor::tp_qk_norm_forward(int b, const StepDef& s, const std::vector<Tensor>& t) {
  OpParams params;
  const OpArgs a = op_args(b, s, t, params);
  const std::string name = "h" + std::to_string(b) + "." + s.name;
  Tensor sums = alloc_outer(DType::F32, 2 * s.M, Category::Workspace, name + ".sums", b);
  op(name + ".sums", s.name, b, 0, t[s.in[0]].bytes(), Stream::Compute,
     [&] { be_.qk_norm_sums(Pass::Forward, a, sums); });
  tp_all_reduce(b, sums, name + ".sums.all_reduce");
  op(name, s.name, b, s.fwd_flops(graph_.windowed(b)), step_bytes(b, s), Stream::Compute,
     [&] { be_.qk_norm_split(Pass::Forward, a, sums, full_cfg_.q_width(), full_cfg_.kv_width()); });
  release(sums);
}

void Executor::tp_qk_norm_backward(int b, const StepDef& s, const std::vector<Tensor>& t,
                                   const std::vector<Tensor>& g, const std::vector<bool>& acc) {
  OpParams params;
  OpArgs a = op_args(b, s, t, params);
  Tensor dW = grad_at(b, s.w), dB = grad_at(b, s.b);
  a.dw = &dW;
  a.db = &dB;
  a.din[0] = &g[s.in[0]];
  a.acc[0] = acc[0];
  a.dout[0] = &g[s.out[0]];
  const std::string name = "h" + std::to_string(b) + "." + s.name + ".backward";
  Tensor sums = alloc_outer(DType::F32, 4 * s.M, Category::Workspace, name + ".sums", b);
  op(name + ".sums", s.name, b, 0, t[s.in[0]].bytes() * 2, Stream::Compute,
     [&] { be_.qk_norm_sums(Pass::Backward, a, sums); });
  tp_all_reduce(b, sums, name + ".sums.all_reduce");
  op(name, s.name, b, s.bwd_flops(graph_.windowed(b)), step_bytes(b, s) * 2, Stream::Compute,
     [&] { be_.qk_norm_split(Pass::Backward, a, sums, full_cfg_.q_width(), full_cfg_.kv_width()); });
  release(sums);
}

void Executor::sync_tensor_parallel_gradients() {
  // ZeRO-2 sums them per block, before the block's bucket is reduce-scattered.
  if (zero_.gradients()) return;
  for (int b = 0; b < cfg_.layers; ++b) sync_tensor_parallel_gradients(b);
}

void Executor::sync_tensor_parallel_gradients(int b) {
  if (tp_ <= 1) return;
  // Norm weights and biases of the sequence region saw only this rank's rows (with sp); a
  // per-head QK-norm's weights, only this rank's heads.
  for (std::size_t i = 0; i < table_of(b).steps().size(); ++i) {
    const StepDef& s = table_of(b).steps()[i];
    const bool rows = sp_ && s.op != OpKind::Linear && regions(b).step[i] == Region::Sequence;
    if (!rows && s.op != OpKind::QkHeadNorm) continue;
    for (const std::string* param : {&s.w, &s.b})
      if (!param->empty() && st_.has(b, *param))
        tp_all_reduce(b, grad_at(b, *param), "h" + std::to_string(b) + "." + s.name + ".grad.all_reduce");
  }
}

void Executor::split_checkpoint(int b) {
  BlockMemory& bs = blocks_[static_cast<std::size_t>(b)];
  Held& h = bs.held[table_of(b).input()];
  const std::int64_t n = h.t.numel;
  if (n % tp_ != 0)
    throw Error("distributed checkpoints: block " + std::to_string(b) + "'s input of " + std::to_string(n) +
                " elements does not split over " + std::to_string(tp_) + " ranks");
  const std::int64_t c = n / tp_;
  const std::string name = "h" + std::to_string(b) + ".checkpoint";
  Tensor mine = alloc_outer(h.t.dtype, c, Category::Checkpoints, name + ".shard", b);
  op(name + ".split", "copy", b, 0, 2 * mine.bytes(), Stream::Compute,
     [&] { be_.copy(mine, h.t.slice(c * tp_rank_, c)); });
  release(h.t);
  h.t = mine;
  if (h.ledger >= 0) ledger_[static_cast<std::size_t>(h.ledger)].bytes = mine.bytes();
  bs.split_input = mine.id;
}

void Executor::gather_checkpoint(int b) {
  BlockMemory& bs = blocks_[static_cast<std::size_t>(b)];
  Held& h = bs.held[table_of(b).input()];
  const bool split = bs.split_input != 0 && h.t.id == bs.split_input;
  bs.split_input = 0;
  if (!split) return;  // not split, or dropped since
  Tensor whole = tp_gather(b, h.t, "h" + std::to_string(b) + ".checkpoint.all_gather");
  alloc_.retag(whole, h.category);
  release(h.t);
  h.t = whole;
}

}  // namespace remat
