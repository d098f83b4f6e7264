#include "core/analysis/op_diff.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/analysis/block_names.h"
#include "core/analysis/op_stats.h"
#include "core/analysis/run_layout.h"
#include "core/trace/csv.h"
#include "core/util/error.h"

namespace remat {

const char* to_string(DiffStatus s) {
  switch (s) {
    case DiffStatus::Matched: return "matched";
    case DiffStatus::Added: return "added";
    case DiffStatus::Removed: return "removed";
  }
  return "?";
}

namespace {

std::string short_json(const nlohmann::json& v) {
  std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

struct Key {
  Stream stream;
  Phase phase;
  std::int32_t block;
  std::string name;
  std::uint32_t occurrence;
  bool operator==(const Key& o) const {
    return stream == o.stream && phase == o.phase && block == o.block && occurrence == o.occurrence && name == o.name;
  }
};
struct KeyHash {
  std::size_t operator()(const Key& k) const {
    std::size_t h = std::hash<std::string>()(k.name);
    h ^= (static_cast<std::size_t>(k.stream) << 1) ^ (static_cast<std::size_t>(k.phase) << 5) ^
         (static_cast<std::size_t>(static_cast<std::uint32_t>(k.block)) << 9) ^
         (static_cast<std::size_t>(k.occurrence) * 0x9e3779b97f4a7c15ULL);
    return h;
  }
};

// A run's ops in time order with their keys (names and blocks as the whole model numbers them).
struct Keyed {
  std::vector<std::uint32_t> order;
  std::vector<Key> keys;  // by position in order
};

Keyed keyed(const Trace& t) {
  Keyed k;
  k.order.resize(t.ops.size());
  for (std::uint32_t i = 0; i < t.ops.size(); ++i) k.order[i] = i;
  std::stable_sort(k.order.begin(), k.order.end(), [&t](std::uint32_t a, std::uint32_t b) {
    return t.ops[a].start_ns < t.ops[b].start_ns;
  });
  const int first = first_block(t);
  std::unordered_map<std::string, std::uint32_t> seen;
  k.keys.reserve(t.ops.size());
  for (std::uint32_t i : k.order) {
    const OpRecord& o = t.ops[i];
    Key key{o.stream, o.phase, o.block >= 0 ? o.block + first : -1, global_op_name(first, o.name), 0};
    std::string tag = key.name;
    tag += '\x1f';
    tag += static_cast<char>('0' + static_cast<int>(o.stream));
    tag += static_cast<char>('0' + static_cast<int>(o.phase));
    tag += std::to_string(key.block);
    key.occurrence = seen[tag]++;
    k.keys.push_back(std::move(key));
  }
  return k;
}

}  // namespace

std::vector<std::string> diff_refusal(const Trace& a, const Trace& b) {
  std::vector<std::string> out;
  if (a.source != b.source) return {"source: " + a.source + " against " + b.source};
  // An imported trace's model is a placeholder (no model came with it): not compared.
  if (a.imported()) return out;
  nlohmann::json ma = model_to_json(a.model), mb = model_to_json(b.model);
  ma.erase("name");
  mb.erase("name");
  if (ma != mb) {
    std::string fields;
    int n = 0;
    for (auto it = ma.begin(); it != ma.end(); ++it) {
      const auto jt = mb.find(it.key());
      if (jt != mb.end() && *jt == *it) continue;
      if (++n <= 6)
        fields += (fields.empty() ? "" : ", ") + it.key() + " " + short_json(*it) + " against " +
                  (jt == mb.end() ? std::string("none") : short_json(*jt));
    }
    for (auto jt = mb.begin(); jt != mb.end(); ++jt)
      if (!ma.contains(jt.key()) && ++n <= 6) fields += (fields.empty() ? "" : ", ") + jt.key() + " none against " + short_json(*jt);
    if (n > 6) fields += " and " + std::to_string(n - 6) + " more";
    out.push_back("model: " + a.model.name + " and " + b.model.name + " differ in " + fields);
  }
  const RunLayout la = run_layout(a), lb = run_layout(b);
  const std::string pa = la.distributed() ? rank_label(la) : layout_label(la);
  const std::string pb = lb.distributed() ? rank_label(lb) : layout_label(lb);
  if (pa != pb) out.push_back("layout: " + pa + " against " + pb);
  return out;
}

OpDiff op_diff(const Trace& a, const Trace& b) {
  const std::vector<std::string> why = diff_refusal(a, b);
  if (!why.empty()) {
    std::string msg = "the runs are not alike, so their ops are not diffed:";
    for (const auto& w : why) msg += "\n  " + w;
    throw Error(msg);
  }
  OpDiff d;
  if (a.device != b.device) d.notes.push_back("device: " + a.device + " against " + b.device);
  d.a_step_ns = step_length_ns(a);
  d.b_step_ns = step_length_ns(b);
  const Keyed ka = keyed(a), kb = keyed(b);
  std::unordered_map<Key, std::size_t, KeyHash> in_a;
  in_a.reserve(ka.keys.size());
  for (std::size_t i = 0; i < ka.keys.size(); ++i) in_a.emplace(ka.keys[i], i);
  std::vector<std::int64_t> b_of_a(ka.keys.size(), -1);
  std::vector<std::int64_t> a_of_b(kb.keys.size(), -1);
  for (std::size_t j = 0; j < kb.keys.size(); ++j)
    if (auto it = in_a.find(kb.keys[j]); it != in_a.end()) {
      b_of_a[it->second] = static_cast<std::int64_t>(j);
      a_of_b[j] = static_cast<std::int64_t>(it->second);
    }
  auto fill = [](DiffRow& r, const Trace& t, std::uint32_t i, bool first_run) {
    const OpRecord& o = t.ops[i];
    const std::int64_t s = o.start_ns - t.step_start_ns, n = std::max<std::int64_t>(0, o.end_ns - o.start_ns);
    if (first_run) {
      r.a = i;
      r.a_start = s;
      r.a_ns = n;
    } else {
      r.b = i;
      r.b_start = s;
      r.b_ns = n;
    }
  };
  auto row_of = [](const Key& k, const OpRecord& o, DiffStatus st) {
    DiffRow r;
    r.status = st;
    r.stream = k.stream;
    r.phase = k.phase;
    r.block = k.block;
    r.occurrence = k.occurrence;
    r.name = k.name;
    r.op = o.op;
    return r;
  };
  // The added ops of B that follow each position of A (after A's op i; -1: before any).
  std::vector<std::vector<std::size_t>> after(ka.keys.size() + 1);
  std::int64_t last_a = -1;
  for (std::size_t j = 0; j < kb.keys.size(); ++j) {
    if (a_of_b[j] >= 0) {
      last_a = a_of_b[j];
      continue;
    }
    after[static_cast<std::size_t>(last_a + 1)].push_back(j);
  }
  d.rows.reserve(ka.keys.size() + kb.keys.size());
  auto add_b = [&](std::size_t pos) {
    for (std::size_t j : after[pos]) {
      const std::uint32_t op = kb.order[j];
      DiffRow r = row_of(kb.keys[j], b.ops[op], DiffStatus::Added);
      fill(r, b, op, false);
      d.rows.push_back(std::move(r));
    }
  };
  add_b(0);
  for (std::size_t i = 0; i < ka.keys.size(); ++i) {
    const std::uint32_t op = ka.order[i];
    DiffRow r = row_of(ka.keys[i], a.ops[op], b_of_a[i] >= 0 ? DiffStatus::Matched : DiffStatus::Removed);
    fill(r, a, op, true);
    if (b_of_a[i] >= 0) fill(r, b, kb.order[static_cast<std::size_t>(b_of_a[i])], false);
    d.rows.push_back(std::move(r));
    add_b(i + 1);
  }
  for (const DiffRow& r : d.rows) {
    PhaseDiff& p = d.phases[static_cast<std::size_t>(r.phase)];
    switch (r.status) {
      case DiffStatus::Matched:
        ++d.matched;
        p.a_ns += r.a_ns;
        p.b_ns += r.b_ns;
        ++p.a_ops;
        ++p.b_ops;
        p.matched_delta_ns += r.b_ns - r.a_ns;
        break;
      case DiffStatus::Added:
        ++d.added;
        p.b_ns += r.b_ns;
        ++p.b_ops;
        ++p.added;
        p.added_ns += r.b_ns;
        break;
      case DiffStatus::Removed:
        ++d.removed;
        p.a_ns += r.a_ns;
        ++p.a_ops;
        ++p.removed;
        p.removed_ns += r.a_ns;
        break;
    }
  }
  return d;
}

void write_op_diff_csv(const std::string& path, const OpDiff& d) {
  csv::Writer w(path, {"status", "stream", "phase", "block", "name", "op", "occurrence", "a_start_us", "a_us",
                       "b_start_us", "b_us", "delta_us"});
  auto us = [&w](bool has, std::int64_t ns) {
    if (has) w.f64(static_cast<double>(ns) / 1e3);
    else w.str("");
  };
  for (const DiffRow& r : d.rows) {
    w.str(to_string(r.status)).str(to_string(r.stream)).str(to_string(r.phase)).i64(r.block).str(r.name).str(r.op);
    w.u64(r.occurrence);
    us(r.a >= 0, r.a_start);
    us(r.a >= 0, r.a_ns);
    us(r.b >= 0, r.b_start);
    us(r.b >= 0, r.b_ns);
    w.f64(static_cast<double>(r.delta_ns()) / 1e3);
    w.end_row();
  }
  w.commit();
}

}  // namespace remat
