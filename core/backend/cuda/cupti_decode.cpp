#include "core/backend/cuda/cupti_decode.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "core/util/error.h"

namespace remat::cupti {

std::size_t record_size(std::uint32_t kind) {
  switch (static_cast<CUpti_ActivityKind>(kind)) {
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_DRIVER:
    case CUPTI_ACTIVITY_KIND_RUNTIME:
      return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      return sizeof(CUpti_ActivityExternalCorrelation);
    case CUPTI_ACTIVITY_KIND_MEMORY2:
      return sizeof(CUpti_ActivityMemory4);
    default:
      return 0;
  }
}

bool walk_buffer(const std::uint8_t* buf, std::size_t valid,
                 const std::function<void(const CUpti_Activity*, std::size_t)>& fn,
                 std::string* error) {
  std::size_t off = 0;
  while (off + sizeof(CUpti_Activity) <= valid) {
    const auto* rec = reinterpret_cast<const CUpti_Activity*>(buf + off);
    const std::size_t sz = record_size(static_cast<std::uint32_t>(rec->kind));
    if (sz == 0) {
      if (error)
        *error = "unknown activity kind " + std::to_string(static_cast<int>(rec->kind)) +
                 " at offset " + std::to_string(off);
      return false;
    }
    if (off + sz > valid) {
      if (error) *error = "truncated record at offset " + std::to_string(off);
      return false;
    }
    fn(rec, off);
    off += (sz + 7) / 8 * 8;
  }
  return true;
}

std::string kernel_display_name(const char* name) {
  if (!name || !*name) return "?";
  std::string s;
  int status = -1;
  char* dm = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status == 0 && dm) {
    s = dm;
    std::free(dm);
  } else {
    if (dm) std::free(dm);
    return name;
  }
  // Drop the parameter list: the last top-level parenthesized group.
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (std::size_t i = s.size(); i-- > 0;) {
      if (s[i] == ')') ++depth;
      else if (s[i] == '(' && --depth == 0) {
        s.erase(i);
        break;
      }
    }
  }
  if (s.rfind("void ", 0) == 0) s.erase(0, 5);
  const std::string anon = "(anonymous namespace)::";
  for (std::size_t p; (p = s.find(anon)) != std::string::npos;) s.erase(p, anon.size());
  return s;
}

namespace {

Stream memcpy_stream(std::uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return Stream::CopyToDevice;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return Stream::CopyToHost;
    default:
      return Stream::Compute;
  }
}

const char* memcpy_name(std::uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "memcpy PtoP";
    default: return "memcpy";
  }
}

}  // namespace

void ActivityDecoder::add(const CUpti_Activity* rec, std::int64_t offset_ns, const char* name) {
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      Item it{ItemKind::Kernel};
      it.start = static_cast<std::int64_t>(k->start) + offset_ns;
      it.end = static_cast<std::int64_t>(k->end) + offset_ns;
      it.corr = k->correlationId;
      it.stream = Stream::Compute;
      it.name = kernel_display_name(name ? name : k->name);
      items_.push_back(std::move(it));
      ++stats_.kernels;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
      Item it{ItemKind::Memcpy};
      it.start = static_cast<std::int64_t>(m->start) + offset_ns;
      it.end = static_cast<std::int64_t>(m->end) + offset_ns;
      it.corr = m->correlationId;
      it.corr2 = m->runtimeCorrelationId;
      it.bytes = m->bytes;
      it.stream = memcpy_stream(m->copyKind);
      it.name = memcpy_name(m->copyKind);
      items_.push_back(std::move(it));
      ++stats_.memcpys;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
      Item it{ItemKind::Memset};
      it.start = static_cast<std::int64_t>(m->start) + offset_ns;
      it.end = static_cast<std::int64_t>(m->end) + offset_ns;
      it.corr = m->correlationId;
      it.bytes = m->bytes;
      it.stream = Stream::Compute;
      it.name = "memset";
      items_.push_back(std::move(it));
      ++stats_.memsets;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemory4*>(rec);
      Item it{ItemKind::Memory};
      it.start = it.end = static_cast<std::int64_t>(m->timestamp) + offset_ns;
      it.corr = m->correlationId;
      it.bytes = m->bytes;
      it.stream = Stream::Host;
      // "memory allocation (device)", "memory release (pinned)", ...: the kind tells the
      // caching device pool's cudaMalloc calls from the pinned host pool's.
      const char* kind = m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE   ? " (device)"
                         : m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED ? " (pinned)"
                                                                              : " (other)";
      it.name = std::string(m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE
                                ? "memory release"
                                : "memory allocation") +
                kind;
      items_.push_back(std::move(it));
      ++stats_.memory;
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(rec);
      if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
        ext_[e->correlationId] = e->externalId;
      ++stats_.external;
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      ++stats_.api;
      break;
    default:
      ++stats_.other;
      break;
  }
}

std::vector<OpRecord> ActivityDecoder::take(const OpTable& ops, std::int32_t default_step) {
  auto lookup = [&](std::uint32_t corr, std::uint64_t& ext) {
    if (corr == 0) return false;
    auto it = ext_.find(corr);
    if (it != ext_.end()) {
      ext = it->second;
      return true;
    }
    auto jt = prev_ext_.find(corr);
    if (jt != prev_ext_.end()) {
      ext = jt->second;
      return true;
    }
    return false;
  };
  std::vector<OpRecord> out;
  out.reserve(items_.size());
  for (const Item& it : items_) {
    OpRecord r;
    r.start_ns = it.start;
    r.end_ns = std::max(it.end, it.start);
    r.stream = it.stream;
    r.name = it.name;
    r.step = default_step;
    std::uint64_t ext = 0;
    const bool found = lookup(it.corr, ext) || lookup(it.corr2, ext);
    auto op = found ? ops.find(ext) : ops.end();
    if (op != ops.end()) {
      r.op = op->second.op;
      r.block = op->second.block;
      r.phase = op->second.phase;
      r.step = op->second.step;
      r.op_id = ext;
    } else {
      r.op_id = found ? ext : 0;
      ++stats_.unattributed;
    }
    if (it.kind != ItemKind::Kernel) r.bytes = it.bytes;
    out.push_back(std::move(r));
  }
  std::stable_sort(out.begin(), out.end(), [](const OpRecord& a, const OpRecord& b) {
    return std::tie(a.start_ns, a.end_ns, a.stream, a.op_id, a.name) <
           std::tie(b.start_ns, b.end_ns, b.stream, b.op_id, b.name);
  });
  // Each op's flops and bytes on its first kernel (or first record when it ran no kernel).
  std::unordered_map<std::uint64_t, bool> given;
  for (OpRecord& r : out) {
    if (r.op_id == 0) continue;
    auto op = ops.find(r.op_id);
    if (op == ops.end()) continue;
    if (r.stream != Stream::Compute || r.name.rfind("memset", 0) == 0) continue;
    if (given[r.op_id]) continue;
    given[r.op_id] = true;
    r.flops = op->second.flops;
    r.bytes = op->second.bytes;
  }
  items_.clear();
  prev_ext_ = std::move(ext_);
  ext_.clear();
  return out;
}

// --- record mode files ---

namespace {

std::string idx_path_for(const std::string& bin) {
  std::string p = bin;
  if (p.size() > 4 && p.compare(p.size() - 4, 4, ".bin") == 0) p.erase(p.size() - 4);
  return p + ".idx";
}

}  // namespace

void write_recorded_buffer(const std::string& dir, unsigned seq, const std::uint8_t* data,
                           std::size_t valid, const std::vector<RecordedEntry>& entries,
                           std::int64_t offset_ns, std::int32_t step) {
  char num[32];
  std::snprintf(num, sizeof num, "%03u", seq);
  const std::string base = dir + "/buffer_" + num;
  {
    std::ofstream f(base + ".bin", std::ios::binary);
    if (!f) throw Error("CUPTI record mode: cannot write " + base + ".bin");
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(valid));
    if (!f) throw Error("CUPTI record mode: write failed for " + base + ".bin");
  }
  std::ofstream f(base + ".idx");
  if (!f) throw Error("CUPTI record mode: cannot write " + base + ".idx");
  f << "# rematlab cupti buffer v1 valid=" << valid << " offset_ns=" << offset_ns
    << " step=" << step << " records=" << entries.size() << "\n";
  for (const RecordedEntry& e : entries)
    f << e.offset << '\t' << e.kind << '\t' << (e.name.empty() ? "-" : e.name) << '\n';
  if (!f) throw Error("CUPTI record mode: write failed for " + base + ".idx");
}

RecordedBuffer read_recorded_buffer(const std::string& bin_path) {
  RecordedBuffer rb;
  std::ifstream f(bin_path, std::ios::binary);
  if (!f) throw Error("cannot read CUPTI buffer file " + bin_path);
  std::vector<char> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  rb.storage_.assign((raw.size() + 7) / 8, 0);
  if (!raw.empty()) std::memcpy(rb.storage_.data(), raw.data(), raw.size());
  rb.bytes.assign(raw.begin(), raw.end());
  const std::string idx = idx_path_for(bin_path);
  std::ifstream fi(idx);
  if (fi) {
    rb.indexed = true;
    std::string line;
    while (std::getline(fi, line)) {
      if (line.empty()) continue;
      if (line[0] == '#') {
        auto p = line.find("offset_ns=");
        if (p != std::string::npos) rb.offset_ns = std::stoll(line.substr(p + 10));
        auto q = line.find(" step=");
        if (q != std::string::npos) rb.step = std::stoi(line.substr(q + 6));
        continue;
      }
      std::istringstream ls(line);
      RecordedEntry e;
      std::string name;
      if (!(ls >> e.offset >> e.kind)) throw Error("bad line in " + idx + ": " + line);
      std::getline(ls, name);
      if (!name.empty() && name[0] == '\t') name.erase(0, 1);
      e.name = name == "-" ? "" : name;
      if (e.offset + sizeof(CUpti_Activity) > rb.bytes.size())
        throw Error("record offset " + std::to_string(e.offset) + " beyond the end of " + bin_path);
      rb.entries.push_back(std::move(e));
    }
  } else {
    std::string err;
    walk_buffer(rb.data(), rb.bytes.size(),
                [&](const CUpti_Activity* r, std::size_t off) {
                  RecordedEntry e;
                  e.offset = off;
                  e.kind = static_cast<std::uint32_t>(r->kind);
                  rb.entries.push_back(std::move(e));
                },
                &err);
    if (!err.empty()) throw Error("CUPTI buffer " + bin_path + ": " + err);
  }
  return rb;
}

void append_ops_tsv(const std::string& path, const OpTable& ops) {
  const bool fresh = !std::filesystem::exists(path);
  std::ofstream f(path, std::ios::app);
  if (!f) throw Error("CUPTI record mode: cannot write " + path);
  if (fresh) f << "#op_id\tname\top\tblock\tphase\tstep\tflops\tbytes\tstream\n";
  std::vector<std::uint64_t> ids;
  ids.reserve(ops.size());
  for (const auto& [id, info] : ops) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (std::uint64_t id : ids) {
    const OpInfo& o = ops.at(id);
    f << id << '\t' << o.name << '\t' << o.op << '\t' << o.block << '\t'
      << static_cast<int>(o.phase) << '\t' << o.step << '\t' << o.flops << '\t' << o.bytes << '\t'
      << static_cast<int>(o.stream) << '\n';
  }
}

OpTable read_ops_tsv(const std::string& path) {
  OpTable ops;
  std::ifstream f(path);
  if (!f) return ops;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> c;
    std::string cell;
    std::istringstream ls(line);
    while (std::getline(ls, cell, '\t')) c.push_back(cell);
    if (c.size() < 9) throw Error("bad line in " + path + ": " + line);
    OpInfo o;
    o.op_id = std::stoull(c[0]);
    o.name = c[1];
    o.op = c[2];
    o.block = std::stoi(c[3]);
    o.phase = static_cast<Phase>(std::stoi(c[4]));
    o.step = std::stoi(c[5]);
    o.flops = std::stoull(c[6]);
    o.bytes = std::stoull(c[7]);
    o.stream = static_cast<Stream>(std::stoi(c[8]));
    ops[o.op_id] = o;
  }
  return ops;
}

std::vector<OpRecord> decode_recorded_dir(const std::string& dir, DecodeStats* stats) {
  namespace fs = std::filesystem;
  std::vector<std::string> bins;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("buffer_", 0) == 0 && n.size() > 4 && n.compare(n.size() - 4, 4, ".bin") == 0)
      bins.push_back(e.path().string());
  }
  std::sort(bins.begin(), bins.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  const OpTable ops = read_ops_tsv(dir + "/ops.tsv");
  ActivityDecoder dec;
  std::int32_t step = 0;
  for (const std::string& b : bins) {
    RecordedBuffer rb = read_recorded_buffer(b);
    step = rb.step;
    for (const RecordedEntry& e : rb.entries) {
      const auto* rec = reinterpret_cast<const CUpti_Activity*>(rb.data() + e.offset);
      const std::size_t need = record_size(e.kind);
      if (need && e.offset + need > rb.bytes.size())
        throw Error("truncated record at offset " + std::to_string(e.offset) + " in " + b);
      dec.add(rec, rb.offset_ns, e.name.empty() ? "" : e.name.c_str());
    }
  }
  std::vector<OpRecord> out = dec.take(ops, step);
  if (stats) *stats = dec.stats();
  return out;
}

}  // namespace remat::cupti
