// Where a pipeline stage's sends leave. NCCL's communicator keeps a send back until the rank's
// next recv (one group with it) or wait_sends (nccl_communicator.h), so the executor
// must not begin any other work while a send waits: a compute op or another group's collective
// could wait on the peer whose receive waits for that send. Every stage of a step is walked over
// the null backend with a communicator that keeps sends back that way and a profiler that notes
// each op begun while one waits; only the pipeline's own transfers may begin then (the receive
// that takes the sends along). Without the executor's wait_sends calls the first stage's
// forwards after its first (each starting with the embedding) begin with a send waiting. A
// model with a load-balancing loss sends its routing statistics after each activation and each
// input gradient: kept with it, they travel in the same group.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/backend/moe_aux.h"
#include "core/backend/null/null_backend.h"
#include "core/engine/executor.h"
#include "core/engine/model_state.h"
#include "core/engine/pipeline_stage.h"
#include "core/graph/parallel_layout.h"
#include "core/memory/tracking_allocator.h"
#include "core/schedule/schedule.h"
#include "policy_test_util.h"

namespace remat {
namespace {

// The null communicator (counts every call, moves nothing) whose sends wait until a recv or
// wait_sends of this rank.
class KeepsSends final : public NullCommunicator {
 public:
  using NullCommunicator::NullCommunicator;
  int waiting = 0, waits = 0, sends = 0;
  std::vector<std::size_t> sent_bytes;

 protected:
  void do_send(const void*, std::size_t bytes, int) override {
    ++waiting;
    ++sends;
    sent_bytes.push_back(bytes);
  }
  void do_recv(const std::vector<RecvPart>&, int) override { waiting = 0; }
  void do_wait_sends() override {
    if (waiting) ++waits;
    waiting = 0;
  }
};

class WatchesSends final : public Profiler {
 public:
  explicit WatchesSends(const KeepsSends& c) : comm_(c) {}
  void begin_op(const OpInfo& op) override {
    ++ops;
    const bool own = op.name == "pp.activation.recv" || op.name == "pp.grad.recv";
    if (comm_.waiting && !own) begun_while_waiting.push_back(op.name);
  }
  void end_op(const OpInfo&) override {}
  std::vector<OpRecord> collect() override { return {}; }
  std::string name() const override { return "watches-sends"; }
  int ops = 0;
  std::vector<std::string> begun_while_waiting;

 private:
  const KeepsSends& comm_;
};

struct StageWalk {
  int sends = 0, waits = 0, ops = 0;
  std::vector<std::string> begun_while_waiting;
  std::vector<std::size_t> sent_bytes;
};

// One step of stage `stage` of P stages, N micro-batches of `whole`'s batch, T tensor ranks.
StageWalk walk_stage(const ModelConfig& whole, int P, int N, int T, int stage, const std::string& policy) {
  ModelConfig micro = whole;
  micro.batch = whole.batch / N;
  ParallelLayout p;
  p.pp = P;
  p.tp = T;
  p.micro_batches = N;
  check_pipeline(micro, p);
  const BlockGraph graph = per_rank_graph(micro, p, stage);
  const Schedule s = policy == "none" ? store_all_schedule(graph.config().layers) : test::plan(policy, graph.config());
  NullBackend be(nullptr);
  LogicalClock clock;
  TrackingAllocator alloc(be.memory(Space::Device), be.memory(Space::Host), clock);
  ModelState state(graph.config(), be, alloc, make_zero_shard(0, 1, 0, 0), stage_cut(micro, p, stage).parts);
  KeepsSends pp(stage, P);
  NullCommunicator tie(stage == 0 ? 0 : 1, 2), tp(0, T);
  ExecOptions eo;
  eo.pp_comm = &pp;
  if (T > 1) eo.tp_comm = &tp;
  if (micro.tied_embeddings && (stage == 0 || stage == P - 1)) eo.tie_comm = &tie;
  eo.micro_batches = N;
  eo.first_block = p.stage_first_block(micro, stage);
  eo.model_blocks = micro.layers;
  WatchesSends prof(pp);
  Executor ex(state, be, alloc, &prof, eo, graph);
  const std::vector<std::int32_t> tok(static_cast<std::size_t>(micro.tokens() * N), 0);
  ex.run_step(s, 0, tok, tok);
  return {pp.sends, pp.waits, prof.ops, prof.begun_while_waiting, pp.sent_bytes};
}

std::string names(const std::vector<std::string>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size() && i < 5; ++i) s += (i ? ", " : "") + v[i];
  return s + (v.size() > 5 ? ", ..." : "");
}

TEST(PipelineSends, NoOpBeginsWhileASendWaits) {
  struct Case {
    Family family;
    int P, N, T;
    const char* policy;
    double aux = 0.0;  // a Mixtral's load-balancing loss
  };
  const Case cases[] = {{Family::Gpt2, 2, 2, 1, "none"},         {Family::Gpt2, 3, 4, 1, "none"},
                        {Family::Gpt2, 3, 4, 1, "uniform:segments=2"}, {Family::Llama, 2, 4, 1, "selective"},
                        {Family::Gpt2, 2, 2, 2, "none"},         {Family::Mixtral, 2, 2, 1, "none", 0.1},
                        {Family::Mixtral, 3, 4, 1, "selective:modules=moe", 0.1}};
  for (const Case& c : cases) {
    ModelConfig m = test::tiny(c.family, AttentionImpl::Naive, 6);
    m.dtype = DType::F32;
    m.batch = 4;
    m.moe.aux_loss_coef = c.aux;
    for (int stage = 0; stage < c.P; ++stage) {
      const StageWalk w = walk_stage(m, c.P, c.N, c.T, stage, c.policy);
      const std::string what = std::string(to_string(c.family)) + " P " + std::to_string(c.P) +
                               " N " + std::to_string(c.N) + " T " + std::to_string(c.T) + " " + c.policy +
                               ", stage " + std::to_string(stage);
      EXPECT_TRUE(w.begun_while_waiting.empty())
          << what << ": " << w.begun_while_waiting.size() << " ops begun while a send waited: "
          << names(w.begun_while_waiting);
      EXPECT_GT(w.ops, 0) << what;
      // Every stage but the last sends each micro-batch's activation, every one but the first
      // its input gradient; each with the routing statistics where there is a load-balancing loss.
      EXPECT_EQ(w.sends, c.N * ((stage + 1 < c.P) + (stage > 0)) * (c.aux > 0.0 ? 2 : 1)) << what;
      if (c.aux > 0.0) {
        // Every second send is the statistics of the whole model's MoE layers (all 6 here), the
        // same on every stage: 2·E floats a layer, then the gradient's E and the loss.
        const std::size_t want = 4 * static_cast<std::size_t>(MoeAuxLayout{6, m.moe.experts}.size());
        for (std::size_t i = 1; i < w.sent_bytes.size(); i += 2) EXPECT_EQ(w.sent_bytes[i], want) << what << ", send " << i;
      }
      // Only the first stage has items that start without a receive after a send: the forwards
      // after its first, up to the first backward (min(P, N) forwards in a row), and under
      // selective each backward too (it recomputes before its gradient arrives), so every send
      // is waited for. Every other item starts with a receive that takes the sends along (the
      // last stage's backwards, which start with the head, follow a forward's receive); the other
      // stages' last gradient send is waited for at the step's end.
      const bool recomputes_first = std::string(c.policy) == "selective";
      EXPECT_EQ(w.waits, stage > 0 ? 1 : recomputes_first ? c.N : std::min(c.P, c.N) - 1) << what;
    }
  }
}

}  // namespace
}  // namespace remat
