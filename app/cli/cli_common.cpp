#include "cli_common.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <unistd.h>

#include "core/graph/block_graph.h"
#include "core/model/model_source.h"
#include "core/schedule/validator.h"
#include "core/util/error.h"
#include "step_costs.h"

namespace remat::cli {

void ModelOptions::add(CLI::App& app) {
  app.add_option("--model,-m", model, "preset name (see `list models`) or a model JSON / Hugging Face config.json")
      ->capture_default_str();
  app.add_option("--seq", seq, "override the sequence length");
  app.add_option("--batch", batch, "override the micro-batch size");
  app.add_option("--layers", layers, "override the number of blocks");
  app.add_option("--dropout", dropout, "override the dropout probability");
  app.add_option("--attention", attention, "override the attention: naive | flash");
  app.add_option("--dtype", dtype, "override the activation dtype: bf16 | fp32");
}

ModelConfig ModelOptions::resolve() const { return apply(resolve_model(model)); }

ModelConfig ModelOptions::apply(ModelConfig m) const {
  if (seq) {
    m.seq = *seq;
    if (m.position == PositionKind::Learned && m.positions < m.seq) m.positions = m.seq;
  }
  if (batch) m.batch = *batch;
  if (layers) m.layers = *layers;
  if (dropout) m.dropout = *dropout;
  if (!attention.empty()) {
    if (attention == "naive") m.attention = AttentionImpl::Naive;
    else if (attention == "flash") m.attention = AttentionImpl::Flash;
    else throw ConfigError("attention", "unknown attention '" + attention + "' (naive | flash)");
  }
  if (!dtype.empty()) {
    if (dtype == "bf16") m.dtype = DType::BF16;
    else if (dtype == "fp32") m.dtype = DType::F32;
    else throw ConfigError("dtype", "unknown dtype '" + dtype + "' (bf16 | fp32)");
  }
  m.validate();
  return m;
}

void PolicyOptions::add(CLI::App& app, bool allow_schedule_file) {
  app.add_option("--policy,-p", policy, "NAME[:param=value,...] (see `list policies`)")->capture_default_str();
  CLI::Option* file = nullptr;
  if (allow_schedule_file)
    file = app.add_option("--schedule", schedule_file, "run a schedule JSON file (from `plan --json`, edited or hand-written)");
  app.add_option("--memory-budget", memory_budget, "activation bytes for the budget policy, e.g. 2GiB");
  CLI::Option* costs = add_costs_from_option(app, costs_from);
  if (file) costs->excludes(file);
}

Schedule PolicyOptions::plan(const PolicyRegistry& reg, const ModelConfig& m,
                             const std::optional<StepCosts>& costs) const {
  return plan(reg, BlockGraph(m), costs);
}

Schedule PolicyOptions::plan(const PolicyRegistry& reg, const BlockGraph& g,
                             const std::optional<StepCosts>& costs) const {
  if (!schedule_file.empty()) {
    Schedule s = load_schedule_file(schedule_file);
    validate_schedule(s, g);
    return s;
  }
  std::optional<std::uint64_t> budget;
  if (!memory_budget.empty()) budget = parse_bytes("memory-budget", memory_budget);
  return reg.plan(parse_policy_choice(policy), g, budget, costs ? &*costs : nullptr);
}

void load_plugins(PolicyRegistry& reg, bool report) {
  reg.load_dirs(PolicyRegistry::default_dirs());
  if (report)
    for (const auto& r : reg.rejected())
      std::cerr << "rematlab-batch: warning: plugin " << r.file << " skipped: " << r.reason << "\n";
}

const CLI::Validator& non_empty_path() {
  static const CLI::Validator v(
      [](std::string& s) { return s.empty() ? std::string("the path is empty") : std::string(); }, "PATH");
  return v;
}

const CLI::Validator& unsigned_64() {
  static const CLI::Validator v(
      [](std::string& s) {
        std::uint64_t x = 0;
        const auto r = std::from_chars(s.data(), s.data() + s.size(), x);
        if (r.ec == std::errc::result_out_of_range)
          return "'" + s + "' is past the largest value, 18446744073709551615 (2^64 - 1)";
        if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size())
          return "'" + s + "' is not a whole number from 0 to 18446744073709551615 (2^64 - 1)";
        return std::string();
      },
      "UINT64");
  return v;
}

std::string ignored_list(const ModelConfig& m) {
  std::string s;
  for (const auto& f : m.ignored_fields) s += (s.empty() ? "" : ", ") + f;
  return s;
}

std::string layer_kind_counts(const ModelConfig& m) {
  std::string s;
  for (std::size_t k = 0; k < m.layer_kinds.size(); ++k) {
    int n = 0;
    for (int b = 0; b < m.layers; ++b) n += &m.kind_of(b) == &m.layer_kinds[k] ? 1 : 0;
    if (n == 0) continue;
    const LayerKind& kind = m.layer_kinds[k];
    std::string what;
    if (kind.window > 0) what += "window " + std::to_string(kind.window);
    if (kind.chunk > 0) what += "chunks of " + std::to_string(kind.chunk);
    if (!kind.rope) what += std::string(what.empty() ? "" : ", ") + "no RoPE";
    if (!kind.rope && m.attn_temperature_floor > 0 && m.position == PositionKind::Rope)
      what += ", temperature-tuned from position " + std::to_string(m.attn_temperature_floor - 1);
    if (kind.mlp == LayerMlp::Moe && m.moe.on()) what += std::string(what.empty() ? "" : ", ") + "experts";
    s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + kind.name + (what.empty() ? "" : " (" + what + ")");
  }
  return s;
}

int fail(const std::string& message) {
  std::cerr << "rematlab-batch: error: " << message << "\n";
  return 1;
}

int fail(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e))
    return fail("out of memory: the command needed more memory than this machine has (" +
                std::string(e.what()) + ")");
  return fail(std::string(e.what()));
}

Progress::Progress(bool enabled) : on_(enabled && isatty(STDERR_FILENO)) {}

void Progress::update(double fraction, const std::string& what) {
  if (!on_) return;
  int pct = static_cast<int>(std::lround(fraction * 100));
  if (pct == last_) return;
  last_ = pct;
  int filled = pct * 30 / 100;
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(30, '.');
  std::fprintf(stderr, "\r[%s] %3d%% %-40s", bar.c_str(), pct, what.c_str());
  std::fflush(stderr);
}

void Progress::done() {
  if (on_ && last_ >= 0) std::fprintf(stderr, "\r%80s\r", "");
}

std::string human_bytes(std::uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

}  // namespace remat::cli
