#include "core/analysis/recorded_plan.h"

#include "core/analysis/recorded_peak.h"

#include <fnmatch.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <limits>
#include <set>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/trace/csv.h"
#include "core/trace/schema.h"
#include "core/trace/trace.h"
#include "core/util/error.h"
#include "core/util/json_io.h"
#include "core/util/limits.h"
#include "core/util/text_check.h"

namespace remat {

namespace {

std::uint64_t parse_u64(std::string_view s, const csv::Reader& r, std::size_t c) {
  std::uint64_t v = 0;
  auto res = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || res.ec != std::errc() || res.ptr != s.data() + s.size())
    r.fail(c, "'" + std::string(s) + "' is not a non-negative integer");
  return v;
}

// A name field (module path, op name): text that messages and JSON output can carry.
std::string name_field(const csv::Reader& r, std::size_t c) {
  const std::string_view s = r.str(c);
  if (std::string p = text_problem(s); !p.empty()) r.fail(c, quote_field(s) + " " + p);
  return std::string(s);
}

// "S:B S:B": the storages and bytes of a call's tensor arguments.
std::vector<std::pair<std::uint64_t, std::uint64_t>> parse_inputs(std::string_view s, const csv::Reader& r,
                                                                  std::size_t c) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> v;
  while (!s.empty()) {
    auto sp = s.find(' ');
    std::string_view item = s.substr(0, sp);
    auto colon = item.find(':');
    if (colon == std::string_view::npos) r.fail(c, "'" + std::string(item) + "' is not STORAGE:BYTES");
    v.emplace_back(parse_u64(item.substr(0, colon), r, c), parse_u64(item.substr(colon + 1), r, c));
    s = sp == std::string_view::npos ? std::string_view() : s.substr(sp + 1);
  }
  return v;
}

std::string block_path(const RecordedRun& run, int b) {
  return run.blocks_module.empty() ? std::to_string(b) : run.blocks_module + "." + std::to_string(b);
}

int positive(std::string_view s, const std::string& kind, const std::string& text) {
  int k = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), k);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || k < 1)
    throw Error("checkpoint plan '" + text + "': " + kind + ":K needs a whole number of blocks K >= 1, e.g. " + kind +
                ":2");
  return k;
}

// summary.json recorded.op_classes: {"matmul": ["aten::mm", ...], ...}.
std::vector<std::pair<std::string, std::vector<std::string>>> op_classes_of(const nlohmann::json& v,
                                                                             const std::string& sfile) {
  if (!v.is_object()) throw Error(sfile + ": field 'recorded.op_classes' must be an object of op name lists");
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const auto& [name, ops] : v.items()) {
    if (!ops.is_array()) throw Error(sfile + ": field 'recorded.op_classes." + name + "' must be a list of op names");
    std::vector<std::string> names;
    for (const auto& op : ops) {
      if (!op.is_string()) throw Error(sfile + ": field 'recorded.op_classes." + name + "' holds a non-string");
      names.push_back(op.get<std::string>());
    }
    out.emplace_back(name, std::move(names));
  }
  return out;
}

void read_op_tables(const std::string& dir, RecordedRun& run) {
  namespace fs = std::filesystem;
  {
    csv::Reader r((fs::path(dir) / "op_outputs.csv").string());
    const std::size_t co = r.col("op"), cm = r.col("module"), cb = r.col("block"), cs = r.col("storage"),
                      csb = r.col("storage_bytes");
    while (r.next()) {
      RecordedOutput o;
      o.op = name_field(r, co);
      o.module = name_field(r, cm);
      o.block = r.i32(cb);
      if (o.block < -1 || o.block >= std::max(run.blocks, 1)) r.fail(cb, "not a block of the run");
      o.storage = r.u64(cs);
      o.storage_bytes = r.u64(csb);
      run.outputs.push_back(std::move(o));
    }
  }
  csv::Reader r((fs::path(dir) / "ops.csv").string());
  const std::size_t cn = r.col("name"), cm = r.col("op"), cp = r.col("phase"), cf = r.col("flops");
  while (r.next()) {
    if (r.str(cp) != "forward") continue;
    RecordedOp o;
    o.name = name_field(r, cn);
    o.module = name_field(r, cm);
    o.flops = r.u64(cf);
    run.forward_ops.push_back(std::move(o));
  }
}

std::string class_names(const RecordedRun& run) {
  std::string s;
  for (const auto& [name, ops] : run.op_classes) s += (s.empty() ? "" : ", ") + name;
  return s;
}

}  // namespace

RecordedRun read_recorded_run(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string sfile = (fs::path(dir) / "summary.json").string();
  const nlohmann::json j = read_json_file(sfile);
  if (!j.is_object() || !json_string_is(j, "source", "pytorch"))
    throw Error(sfile + ": not a recorded PyTorch run (summary.json has no \"source\": \"pytorch\"; "
                "rematlab.record in python/ writes one)");
  schema::check_format_version(j.contains("format_version") ? j["format_version"] : nlohmann::json(),
                               kTraceFormatVersion, sfile);
  RecordedRun run;
  try {
    const auto& rec = j.at("recorded");
    run.saved_bytes = rec.at("saved_bytes_at_backward").get<std::uint64_t>();
    run.blocks_module = rec.at("blocks_module").get<std::string>();
    run.flops_known = rec.at("flops_from").get<std::string>() != "unknown";
    const auto blocks = rec.at("blocks").get<long long>();
    if (blocks < 0 || blocks > limits::kLayers)
      throw Error(sfile + ": field 'recorded.blocks' is " + std::to_string(blocks) + ", outside 0.." +
                  std::to_string(limits::kLayers));
    run.blocks = static_cast<int>(blocks);
    if (rec.contains("op_classes")) {
      run.op_classes = op_classes_of(rec["op_classes"], sfile);
      run.has_op_outputs = true;
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(sfile + ": field 'recorded': " + e.what());
  }
  if (!j.contains("peak_bytes") || !j.at("peak_bytes").is_number_unsigned())
    throw Error(sfile + ": field 'peak_bytes' must be a non-negative integer");
  run.peak_bytes = j.at("peak_bytes").get<std::uint64_t>();
  {
    csv::Reader r((fs::path(dir) / "saved_tensors.csv").string());
    const std::size_t cm = r.col("module"), cb = r.col("block"), cs = r.col("storage"), csb = r.col("storage_bytes"),
                      ca = r.col("alias"), ch = r.col("held_at_backward"), cpk = r.col("packed_ns"),
                      cun = r.col("unpacked_ns"), crl = r.col("released_ns");
    while (r.next()) {
      RecordedTensor t;
      t.module = name_field(r, cm);
      t.block = r.i32(cb);
      if (t.block < -1 || t.block >= std::max(run.blocks, 1)) r.fail(cb, "not a block of the run");
      t.storage = r.u64(cs);
      t.storage_bytes = r.u64(csb);
      // Parameters and buffers (BatchNorm's running statistics) are the model's, not activations.
      t.parameter = r.str(ca).rfind("parameter:", 0) == 0 || r.str(ca).rfind("buffer:", 0) == 0;
      t.held_at_backward = r.u64(ch) != 0;
      t.packed_ns = r.i64(cpk);
      t.unpacked_ns = r.i64(cun);
      t.released_ns = r.i64(crl);
      if (t.packed_ns < 0 || t.packed_ns > limits::kClockNs) r.fail(cpk, "not a time of the step");
      if (t.unpacked_ns < -1 || t.unpacked_ns > limits::kClockNs) r.fail(cun, "not a time of the step (or -1)");
      if (t.released_ns < -1 || t.released_ns > limits::kClockNs) r.fail(crl, "not a time of the step (or -1)");
      if (t.storage_bytes > static_cast<std::uint64_t>(limits::kMemoryBytes)) r.fail(csb, "is past 2^56 bytes");
      run.tensors.push_back(std::move(t));
    }
  }
  {
    csv::Reader r((fs::path(dir) / "memory_events.csv").string());
    const std::size_t ct = r.col("t_ns"), cd = r.col("delta_bytes"), cc = r.col("category");
    while (r.next()) {
      RecordedEvent e;
      e.t_ns = r.i64(ct);
      e.delta = r.i64(cd);
      if (e.t_ns < 0 || e.t_ns > limits::kClockNs) r.fail(ct, "not a time of the step");
      if (e.delta < -limits::kMemoryBytes || e.delta > limits::kMemoryBytes) r.fail(cd, "is past 2^56 bytes");
      e.activation = r.str(cc) == "saved_activations" || r.str(cc) == "checkpoints";
      run.events.push_back(e);
    }
  }
  csv::Reader r((fs::path(dir) / "module_calls.csv").string());
  const std::size_t cm = r.col("module"), cb = r.col("block"), cp = r.col("phase"), cf = r.col("flops"),
                    ci = r.col("inputs"), cs = r.col("start_ns"), ce = r.col("end_ns");
  while (r.next()) {
    RecordedCall c;
    c.module = name_field(r, cm);
    c.block = r.i32(cb);
    c.forward = r.str(cp) == "forward";
    if (!r.str(cf).empty()) c.flops = r.u64(cf);
    c.inputs = parse_inputs(r.str(ci), r, ci);
    c.start_ns = r.i64(cs);
    c.end_ns = r.i64(ce);
    if (c.start_ns < 0 || c.start_ns > limits::kClockNs) r.fail(cs, "not a time of the step");
    if (c.end_ns < c.start_ns || c.end_ns > limits::kClockNs) r.fail(ce, "not a time of the step after its start");
    run.calls.push_back(std::move(c));
  }
  if (run.has_op_outputs) read_op_tables(dir, run);
  return run;
}

namespace {

// A plan of regions (not selective) `text`, part of the plan `whole` (for messages).
CheckpointPlanSpec parse_regions(const std::string& text, const std::string& whole) {
  CheckpointPlanSpec p;
  p.text = whole;
  const auto colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  const std::string_view arg = colon == std::string::npos ? std::string_view() : std::string_view(text).substr(colon + 1);
  using K = CheckpointPlanSpec::Kind;
  if ((kind == "per-block" || kind == "sqrt" || kind == "none") && colon == std::string::npos) {
    p.kind = kind == "sqrt" ? K::Sqrt : kind == "none" ? K::None : K::PerBlock;
  } else if (kind == "every" || kind == "segments") {
    p.kind = kind == "every" ? K::Every : K::Segments;
    p.k = positive(arg, kind, whole);
  } else if (kind == "modules") {
    p.kind = K::Modules;
    std::string_view rest = arg;
    while (!rest.empty()) {
      auto comma = rest.find(',');
      if (comma != 0) p.globs.emplace_back(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    if (p.globs.empty()) throw Error("checkpoint plan '" + whole + "': modules needs a module path glob, e.g. modules:h.*.mlp");
  } else {
    throw Error("checkpoint plan '" + whole +
                "': not one of none, per-block, every:K, segments:K, sqrt, modules:GLOB[,GLOB], selective:keep=CLASS[@PLAN]");
  }
  return p;
}

bool is_class_name(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

CheckpointPlanSpec parse_checkpoint_plan(const std::string& text) {
  const std::string prefix = "selective:";
  if (text.rfind("selective", 0) != 0 || (text.size() > 9 && text[9] != ':')) return parse_regions(text, text);
  const std::string syntax = "checkpoint plan '" + text + "': selective needs keep=CLASS[,CLASS], e.g. selective:keep=matmul";
  const std::string arg = text.size() > prefix.size() ? text.substr(prefix.size()) : std::string();
  if (arg.rfind("keep=", 0) != 0) throw Error(syntax);
  const auto at = arg.find('@');
  const std::string classes = arg.substr(5, at == std::string::npos ? std::string::npos : at - 5);
  CheckpointPlanSpec p;
  if (at == std::string::npos) {
    p.text = text;
  } else {
    const std::string base = arg.substr(at + 1);
    if (base.empty())
      throw Error("checkpoint plan '" + text + "': nothing after '@' (a plan of the regions, e.g. @modules:h.*)");
    if (base.rfind("selective", 0) == 0)
      throw Error("checkpoint plan '" + text + "': the regions after '@' cannot be selective themselves");
    p = parse_regions(base, text);
    if (p.kind == CheckpointPlanSpec::Kind::None)
      throw Error("checkpoint plan '" + text + "': selective needs regions to checkpoint after '@', not none");
  }
  std::string_view rest = classes;
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view c = rest.substr(0, comma);
    if (c.empty()) throw Error(syntax);
    if (!is_class_name(c))
      throw Error("checkpoint plan '" + text + "': '" + std::string(c) + "' is not an op class name (lower case, e.g. matmul)");
    p.keep.emplace_back(c);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return p;
}

std::vector<std::pair<int, int>> plan_regions(const CheckpointPlanSpec& p, int blocks) {
  using K = CheckpointPlanSpec::Kind;
  std::vector<std::pair<int, int>> v;
  int k = p.k;
  if (p.kind == K::Sqrt) {
    k = 1;
    while (k * k < blocks) ++k;  // ceil(sqrt(blocks))
  }
  switch (p.kind) {
    case K::None: break;
    case K::PerBlock: k = 1; [[fallthrough]];
    case K::Sqrt:
      for (int s = 0; s < blocks; s += k) v.emplace_back(s, std::min(s + k, blocks) - 1);
      break;
    case K::Segments: {
      // K segments whose lengths differ by at most one, the longer first (uniform:segments=K).
      if (k > blocks)
        throw Error("checkpoint plan '" + p.text + "': " + std::to_string(blocks) +
                    " blocks make at most " + std::to_string(blocks) + " segments");
      const int q = blocks / k, r = blocks % k;
      for (int i = 0, b = 0; i < k; ++i) {
        const int len = q + (i < r ? 1 : 0);
        v.emplace_back(b, b + len - 1);
        b += len;
      }
      break;
    }
    case K::Every:
      for (int b = 0; b < blocks; b += k) v.emplace_back(b, b);
      break;
    case K::Modules: break;
  }
  return v;
}

namespace {

// The aten op names of the selective plan's classes, by the recording's own op classes.
std::unordered_set<std::string> kept_ops(const RecordedRun& run, const CheckpointPlanSpec& plan) {
  std::unordered_set<std::string> ops;
  if (plan.keep.empty()) return ops;
  if (!run.has_op_outputs)
    throw Error("checkpoint plan '" + plan.text + "': the recording has no op outputs (summary.json has no "
                "recorded.op_classes: it predates selective plans); record the step again with python/rematlab");
  for (const auto& c : plan.keep) {
    auto it = std::find_if(run.op_classes.begin(), run.op_classes.end(), [&c](const auto& x) { return x.first == c; });
    if (it == run.op_classes.end())
      throw Error("checkpoint plan '" + plan.text + "': unknown op class '" + c + "' (op classes: " + class_names(run) +
                  ")");
    ops.insert(it->second.begin(), it->second.end());
  }
  return ops;
}

}  // namespace

RecordedPrediction predict_recorded_plan(const RecordedRun& run, const CheckpointPlanSpec& plan) {
  const std::unordered_set<std::string> keep = kept_ops(run, plan);
  RecordedPrediction out;
  // The regions: the module paths whose saved tensors the plan drops, and the call whose
  // inputs it keeps for each (its first module's forward).
  std::vector<std::string> prefixes;
  std::vector<const RecordedCall*> heads;
  std::vector<const RecordedCall*> recomputed;
  std::vector<PlanRegion> regions;  // the checkpoints, for the peak
  auto forward_calls_of = [&run](const std::string& path) {
    std::vector<const RecordedCall*> v;
    for (const auto& c : run.calls)
      if (c.forward && c.module == path) v.push_back(&c);
    return v;
  };
  if (plan.kind == CheckpointPlanSpec::Kind::Modules) {
    for (const auto& c : run.calls) {
      if (!c.forward || c.module.empty()) continue;
      bool match = false;
      for (const auto& g : plan.globs) match = match || ::fnmatch(g.c_str(), c.module.c_str(), 0) == 0;
      bool nested = false;
      for (const auto& p : prefixes) nested = nested || (c.module != p && module_inside(c.module, p));
      if (!match || nested) continue;
      if (std::find(prefixes.begin(), prefixes.end(), c.module) == prefixes.end()) prefixes.push_back(c.module);
      heads.push_back(&c);
      regions.push_back({{c.module}, {&c}, c.start_ns, c.end_ns});  // each call its own checkpoint
      recomputed.push_back(&c);
    }
    if (prefixes.empty()) throw Error("checkpoint plan '" + plan.text + "': no module path of the recorded run matches");
  } else if (plan.kind != CheckpointPlanSpec::Kind::None) {
    if (run.blocks == 0)
      throw Error("checkpoint plan '" + plan.text + "': the recorded model has no blocks (no nn.ModuleList, no "
                  "nn.Sequential of two or more modules of one class); name modules with modules:GLOB");
    for (auto [s, e] : plan_regions(plan, run.blocks)) {
      PlanRegion region;
      for (int b = s; b <= e; ++b) {
        prefixes.push_back(block_path(run, b));
        region.prefixes.push_back(prefixes.back());
        for (const RecordedCall* c : forward_calls_of(prefixes.back())) recomputed.push_back(c);
      }
      out.recomputed_blocks += static_cast<std::uint64_t>(e - s + 1);
      std::int64_t from = std::numeric_limits<std::int64_t>::max(), to = 0;
      for (const RecordedCall* c : forward_calls_of(block_path(run, s))) {
        heads.push_back(c);
        region.heads.push_back(c);
        from = std::min(from, c->start_ns);
      }
      for (const RecordedCall* c : forward_calls_of(block_path(run, e))) to = std::max(to, c->end_ns);
      if (from <= to) {  // the segment's forward; without its calls, by module path alone
        region.from = from;
        region.to = to;
      }
      regions.push_back(std::move(region));
    }
  }
  out.checkpointed = prefixes;
  // Storages held for backward: recorded, and kept under the plan (a holder outside every region).
  std::unordered_set<std::uint64_t> params, all, kept;
  out.saved_bytes_per_block.assign(static_cast<std::size_t>(std::max(run.blocks, 1)), 0);
  for (const auto& t : run.tensors)
    if (t.parameter) params.insert(t.storage);
  auto charge = [&out](int block, std::uint64_t bytes) {
    out.saved_bytes += bytes;
    if (block >= 0 && static_cast<std::size_t>(block) < out.saved_bytes_per_block.size())
      out.saved_bytes_per_block[static_cast<std::size_t>(block)] += bytes;
  };
  auto in_regions = [&prefixes](const std::string& module) {
    for (const auto& p : prefixes)
      if (module_inside(module, p)) return true;
    return false;
  };
  for (const auto& t : run.tensors) {
    if (t.parameter || !t.held_at_backward) continue;
    if (all.insert(t.storage).second) out.recorded_saved_bytes += t.storage_bytes;
    if (!in_regions(t.module) && kept.insert(t.storage).second) charge(t.block, t.storage_bytes);
  }
  // A step that held nothing for backward ran without autograd: no checkpoint keeps anything.
  const bool autograd = out.recorded_saved_bytes != 0;
  if (!autograd) heads.clear();
  out.recorded_peak_bytes = run.peak_bytes;
  if (plan.keep.empty()) {
    const RecordedPeak peak = replay_peak(run, regions, autograd);
    out.held_peak_bytes = peak.held;
    out.peak_bytes = peak.with_recompute;
  }
  for (const RecordedCall* c : heads)
    for (auto [storage, bytes] : c->inputs)
      if (!params.count(storage) && kept.insert(storage).second) charge(c->block, bytes);
  if (!plan.keep.empty()) {
    // Selective: inside the regions the kept ops' outputs are saved; every other op is recomputed.
    for (const auto& o : run.outputs)
      if (autograd && keep.count(o.op) && in_regions(o.module) && !params.count(o.storage) &&
          kept.insert(o.storage).second) {
        charge(o.block, o.storage_bytes);
        out.kept_output_bytes += o.storage_bytes;
      }
    std::uint64_t f = 0;
    for (const auto& o : run.forward_ops) {
      if (keep.count(o.name) || !in_regions(o.module)) continue;
      f += o.flops;
      ++out.recomputed_ops;
      if (o.flops == 0) ++out.recomputed_ops_without_flops;
    }
    if (run.flops_known) out.recompute_flops = f;
    return out;
  }
  if (run.flops_known) {
    std::uint64_t f = 0;
    bool known = true;
    for (const RecordedCall* c : recomputed) {
      known = known && c->flops.has_value();
      f += c->flops.value_or(0);
    }
    if (known) out.recompute_flops = f;
  }
  return out;
}

}  // namespace remat
