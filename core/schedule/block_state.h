// The rules of a schedule, written once: what each block holds as the actions run, which
// action is legal next, and what each action does. `validate_schedule` walks a schedule
// through a ScheduleState; the executor takes its decisions from one as it runs (the steps to
// run, what a block keeps, whether the output goes on to the next block, when the head runs) and
// keeps only what is its own: memory, ops, copies and the ledger.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/graph/block_graph.h"
#include "core/schedule/schedule.h"

namespace remat {

// A set of a block's tensors, by index into the block table; as many as the table has. Sets
// combined with each other are over the same table. Sixty-four tensors to a word: the sets are
// copied with every action and state, which then copies a word, not each tensor's flag.
class TensorSet {
 public:
  TensorSet() = default;
  explicit TensorSet(std::size_t tensors) : size_(tensors), words_((tensors + 63) / 64, 0) {}
  static TensorSet of(std::size_t tensors, int t) {
    TensorSet s(tensors);
    s.insert(t);
    return s;
  }

  bool has(int t) const { return (words_[word(t)] >> bit(t)) & 1u; }
  void insert(int t) { words_[word(t)] |= std::uint64_t{1} << bit(t); }
  void clear() { words_.assign(words_.size(), 0); }
  bool empty() const;
  int first() const;  // lowest index in the set, -1 when empty

  TensorSet& operator|=(const TensorSet& o);
  TensorSet& operator&=(const TensorSet& o);
  TensorSet& operator-=(const TensorSet& o);  // set difference
  friend TensorSet operator|(TensorSet a, const TensorSet& b) { return a |= b; }
  friend TensorSet operator&(TensorSet a, const TensorSet& b) { return a &= b; }
  friend TensorSet operator-(TensorSet a, const TensorSet& b) { return a -= b; }
  bool operator==(const TensorSet& o) const = default;

  // One flag per tensor, as BlockGraph::recompute_flops takes them.
  std::vector<bool> bits() const;

 private:
  static std::size_t word(int t) { return static_cast<std::size_t>(t) / 64; }
  static unsigned bit(int t) { return static_cast<unsigned>(t) % 64; }
  std::size_t size_ = 0;
  std::vector<std::uint64_t> words_;
};

// What a block holds between actions.
struct BlockStatus {
  TensorSet device;          // on the device
  TensorSet host;            // offloaded
  bool checkpoint = false;   // its input is a checkpoint: kept until its backward or a drop
  bool forwarded = false;    // has run forward (or been recomputed)
  bool reversed = false;     // its backward has run
};

// Tensors a backward rebuilds inside itself (schedule version 2), just before one of its steps.
struct InnerRecompute {
  int before_step = 0;       // the step whose backward reads them first
  TensorSet targets;         // the named tensors these steps make: held until their last reader
  std::vector<int> steps;    // the forward steps that make them, in table order
  std::uint64_t flops = 0;   // their forward FLOPs
};

// What one action does, decided before it runs.
struct ActionEffect {
  ActionKind kind = ActionKind::Forward;
  int block = 0;
  // Forward and recompute.
  bool recompute = false;    // counts as a recompute: a recompute, or a block forwarded before
  TensorSet live;            // what the block holds on the device before
  TensorSet targets;         // what the action makes (the keep-set, the output when produced);
                             // for an offload or prefetch, what it moves
  TensorSet after;           // what the block holds on the device afterwards
  std::vector<int> steps;    // the steps that make the targets from `live`, in table order
  bool produces = false;     // makes the next block's input (the final norm's after the last)
  bool checkpoint = false;   // keep=input on a block whose input is a checkpoint
  std::uint64_t flops = 0;   // forward FLOPs of `steps`; for a backward, the block's backward
  // Backward.
  bool head_first = false;   // the head and loss run just before it (the first backward)
  std::vector<InnerRecompute> inner;  // its rebuilds, in the backward's order (version 2)
};

class ScheduleState {
 public:
  // Throws ScheduleError(0, ...) when the schedule is for another number of blocks.
  ScheduleState(const BlockGraph& g, const Schedule& s);

  // Checks action `index` against the state and applies it. Throws ScheduleError(index, reason)
  // for an illegal one (the state is of no further use then).
  ActionEffect apply(std::size_t index, const Action& a);
  // Throws ScheduleError(actions, ...) unless every block has been reversed.
  void finish(std::size_t actions) const;

  const BlockStatus& block(int b) const { return blocks_[static_cast<std::size_t>(b)]; }
  bool final_live() const { return final_live_; }  // the last block's output awaits the head
  bool head_done() const { return head_done_; }
  int next_backward() const { return next_back_; }  // -1 once every block is reversed
  int checkpoints() const { return ckpts_; }        // block inputs held as checkpoints now

 private:
  // A block's table (a model's layer kinds may differ in their steps) and its sets.
  struct Sets {
    TensorSet saved, input, output;
  };
  const BlockGraph& g(int b) const { return g_.of(b); }
  const Sets& sets(int b) const { return sets_[static_cast<std::size_t>(g_.table_index(b))]; }
  TensorSet keep_set(std::size_t index, int b, const Keep& k) const;
  std::string first_name(int b, const TensorSet& s) const;
  std::string module_of(int b, const TensorSet& s) const;  // " (module core_attn)" for its first tensor, or 
  ActionEffect forward(std::size_t index, const Action& a);
  ActionEffect recompute(std::size_t index, const Action& a);
  ActionEffect backward(std::size_t index, const Action& a);
  ActionEffect move(std::size_t index, const Action& a);  // offload or prefetch
  std::vector<InnerRecompute> plan_inside(std::size_t index, int b, const TensorSet& inside) const;

  const BlockGraph& g_;
  int layers_ = 0;
  int slots_ = 0;
  std::vector<Sets> sets_;  // per table of g_
  std::vector<BlockStatus> blocks_;
  bool final_live_ = false, head_done_ = false;
  int next_back_ = 0, ckpts_ = 0;
};

}  // namespace remat
