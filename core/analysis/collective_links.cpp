#include "core/analysis/collective_links.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace remat {

namespace {

// A point-to-point op's peer rank, or -1 when the group does not say.
int peer_of(const OpRecord& o, int rank, bool send) {
  const auto& g = o.ranks;
  if (g.size() == 2) return g[0] == rank ? g[1] : g[1] == rank ? g[0] : -1;
  const auto it = std::find(g.begin(), g.end(), rank);
  if (it == g.end()) return -1;
  const std::ptrdiff_t i = it - g.begin();
  // Activations go down the pipeline (to the next stage), gradients up (to the previous).
  const bool down = o.name.find("activation") != std::string::npos;
  const bool grad = o.name.find("grad") != std::string::npos;
  if (down == grad) return -1;
  const std::ptrdiff_t step = (down == send) ? 1 : -1;
  const std::ptrdiff_t j = i + step;
  return j >= 0 && j < static_cast<std::ptrdiff_t>(g.size()) ? g[static_cast<std::size_t>(j)] : -1;
}

}  // namespace

std::int64_t CollectiveLinks::link_of(int rank, std::uint32_t op) const {
  if (rank < 0 || static_cast<std::size_t>(rank) >= by_rank.size()) return -1;
  const auto& r = by_rank[static_cast<std::size_t>(rank)];
  return op < r.size() ? r[op] : -1;
}

std::vector<const Flow*> CollectiveLinks::flows_in(std::int64_t t0, std::int64_t t1) const {
  std::vector<const Flow*> out;
  // flows are sorted by their earlier end; none that starts more than `longest` before t0 can reach it.
  auto lo = std::lower_bound(flows.begin(), flows.end(), t0 - longest, [](const Flow& f, std::int64_t t) {
    return std::min(f.from_ns, f.to_ns) < t;
  });
  for (auto it = lo; it != flows.end(); ++it) {
    const std::int64_t a = std::min(it->from_ns, it->to_ns), b = std::max(it->from_ns, it->to_ns);
    if (a > t1) break;
    if (b >= t0) out.push_back(&*it);
  }
  return out;
}

CollectiveLinks collective_links(const std::vector<const Trace*>& ranks) {
  CollectiveLinks out;
  out.by_rank.resize(ranks.size());
  // Key of an exchange as each member sees it: (kind, name, group, sender) and its occurrence.
  using Key = std::tuple<std::string, std::vector<std::int32_t>, int>;
  std::map<std::pair<Key, std::uint32_t>, std::vector<FlowEnd>> groups;
  std::vector<std::int64_t> zero(ranks.size(), 0);
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const Trace* t = ranks[r];
    if (!t) continue;
    zero[r] = t->step_start_ns;
    out.by_rank[r].assign(t->ops.size(), -1);
    std::vector<std::uint32_t> order;
    for (std::uint32_t i = 0; i < t->ops.size(); ++i)
      if (t->ops[i].stream == Stream::Comm) order.push_back(i);
    std::stable_sort(order.begin(), order.end(),
                     [t](std::uint32_t a, std::uint32_t b) { return t->ops[a].start_ns < t->ops[b].start_ns; });
    std::map<Key, std::uint32_t> seen;
    for (std::uint32_t i : order) {
      const OpRecord& o = t->ops[i];
      const int rank = static_cast<int>(r);
      const bool send = o.op == "send" || o.name.ends_with(".send");
      const bool recv = o.op == "recv" || o.name.ends_with(".recv");
      Key key;
      if (send || recv) {
        const int peer = peer_of(o, rank, send);
        if (peer < 0 || o.name.size() < 5) {
          ++out.unmatched;
          continue;
        }
        const std::string stem = o.name.substr(0, o.name.size() - 5);  // without ".send" / ".recv"
        const int from = send ? rank : peer, to = send ? peer : rank;
        key = Key{"p2p " + stem, {from, to}, from};
      } else {
        if (o.ranks.size() < 2 ||
            std::find(o.ranks.begin(), o.ranks.end(), rank) == o.ranks.end()) {
          ++out.unmatched;
          continue;
        }
        key = Key{o.op + " " + o.name, o.ranks, -1};
      }
      const std::uint32_t k = seen[key]++;
      groups[{key, k}].push_back({rank, i});
    }
  }
  for (auto& [key, members] : groups) {
    const auto& [kind, group, sender] = key.first;
    const bool p2p = sender >= 0;
    const std::size_t want = group.size();
    bool whole = members.size() == want;
    for (const FlowEnd& m : members) whole = whole && std::find(group.begin(), group.end(), m.rank) != group.end();
    if (!whole) {
      out.unmatched += members.size();
      continue;
    }
    std::sort(members.begin(), members.end(), [](const FlowEnd& a, const FlowEnd& b) { return a.rank < b.rank; });
    CollectiveLink l;
    l.members = members;
    l.point_to_point = p2p;
    auto start = [&](const FlowEnd& m) { return ranks[static_cast<std::size_t>(m.rank)]->ops[m.op].start_ns - zero[static_cast<std::size_t>(m.rank)]; };
    auto end = [&](const FlowEnd& m) {
      const OpRecord& o = ranks[static_cast<std::size_t>(m.rank)]->ops[m.op];
      return std::max(o.end_ns, o.start_ns) - zero[static_cast<std::size_t>(m.rank)];
    };
    for (std::size_t i = 0; i < l.members.size(); ++i) {
      const bool pick = p2p ? l.members[i].rank == sender : start(l.members[i]) > start(l.members[l.last]);
      if (pick) l.last = i;
    }
    const auto link = static_cast<std::uint32_t>(out.links.size());
    for (const FlowEnd& m : l.members) out.by_rank[static_cast<std::size_t>(m.rank)][m.op] = static_cast<std::int32_t>(link);
    const FlowEnd& src = l.members[l.last];
    for (std::size_t i = 0; i < l.members.size(); ++i) {
      if (i == l.last) continue;
      Flow f{src, l.members[i], start(src), end(l.members[i]), link};
      out.longest = std::max(out.longest, f.to_ns > f.from_ns ? f.to_ns - f.from_ns : f.from_ns - f.to_ns);
      out.flows.push_back(f);
    }
    out.links.push_back(std::move(l));
  }
  std::sort(out.flows.begin(), out.flows.end(), [](const Flow& a, const Flow& b) {
    return std::min(a.from_ns, a.to_ns) < std::min(b.from_ns, b.to_ns);
  });
  return out;
}

}  // namespace remat
