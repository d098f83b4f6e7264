// Hugging Face's rope_scaling: reading and checking the object, and the frequencies of each
// type in the precision Hugging Face computes them (see rope_scaling.h). This file is built
// with -ffp-contract=off (core/CMakeLists.txt): a fused multiply-add would round once where
// torch rounds twice.
#include "core/model/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>
#include <set>

#include "core/util/error.h"
#include "core/util/json_io.h"

namespace remat {

namespace {

struct TypeName {
  RopeType type;
  const char* name;
};
constexpr TypeName kTypeNames[] = {{RopeType::Default, "default"}, {RopeType::Linear, "linear"},
                                   {RopeType::Dynamic, "dynamic"}, {RopeType::Llama3, "llama3"},
                                   {RopeType::Yarn, "yarn"},       {RopeType::LongRope, "longrope"}};

// The keys each type takes besides rope_type / type, required ones first.
struct TypeKeys {
  std::vector<std::string> required, optional;
};
TypeKeys keys_of(RopeType t) {
  switch (t) {
    case RopeType::Default: return {{}, {}};
    case RopeType::Linear: return {{"factor"}, {}};
    case RopeType::Dynamic: return {{"factor"}, {"original_max_position_embeddings"}};
    case RopeType::Llama3:
      return {{"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"}, {}};
    case RopeType::Yarn:
      return {{"factor"},
              {"original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow",
               "mscale", "mscale_all_dim", "truncate"}};
    case RopeType::LongRope:
      return {{"short_factor", "long_factor"}, {"factor", "attention_factor", "original_max_position_embeddings"}};
  }
  return {};
}

std::set<std::string> all_keys() {
  std::set<std::string> all;
  for (const auto& tn : kTypeNames) {
    TypeKeys k = keys_of(tn.type);
    all.insert(k.required.begin(), k.required.end());
    all.insert(k.optional.begin(), k.optional.end());
  }
  return all;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "nothing else" : s;
}

std::string fmt(double v) { return nlohmann::json(v).dump(); }

// Reads the keys of one rope_scaling object, adding a problem per bad value.
class Reader {
 public:
  Reader(const nlohmann::json& obj, RopeProblems& p) : obj_(obj), p_(p) {}

  static std::string field(const std::string& key) { return "rope_scaling." + key; }
  void add(const std::string& key, const std::string& msg) { p_.emplace_back(field(key), msg); }
  // Present and not null (Hugging Face reads a null key as absent).
  bool has(const std::string& key) const { return obj_.contains(key) && !obj_.at(key).is_null(); }
  const nlohmann::json& at(const std::string& key) const { return obj_.at(key); }

  // A finite number; `positive`: > 0.
  std::optional<double> number(const std::string& key, bool positive) {
    if (!has(key)) return std::nullopt;
    const auto& v = at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>())) {
      add(key, "must be a number, got " + json_snippet(v));
      return std::nullopt;
    }
    double d = v.get<double>();
    if (positive && !(d > 0)) {
      add(key, "must be a number > 0, got " + json_snippet(v));
      return std::nullopt;
    }
    return d;
  }
  std::optional<int> positive_int(const std::string& key) {
    if (!has(key)) return std::nullopt;
    try {
      int n = json_int(at(key), field(key));
      if (n > 0) return n;
      add(key, "must be a positive integer, got " + json_snippet(at(key)));
    } catch (const ConfigError& e) {
      std::string what = e.what();
      add(key, what.substr(std::min(what.size(), e.field().size() + 2)));
    }
    return std::nullopt;
  }
  std::optional<bool> boolean(const std::string& key) {
    if (!has(key)) return std::nullopt;
    if (!at(key).is_boolean()) {
      add(key, "must be true or false, got " + json_snippet(at(key)));
      return std::nullopt;
    }
    return at(key).get<bool>();
  }
  // A non-empty array of numbers > 0; the first bad entry is named.
  std::vector<double> factors(const std::string& key) {
    if (!has(key)) return {};
    const auto& v = at(key);
    if (!v.is_array() || v.empty()) {
      add(key, "must be a non-empty array of numbers > 0, got " + json_snippet(v));
      return {};
    }
    std::vector<double> out;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const auto& x = v[i];
      if (!x.is_number() || !std::isfinite(x.get<double>()) || !(x.get<double>() > 0)) {
        add(key, "entry " + std::to_string(i) + " must be a number > 0, got " + json_snippet(x) +
                     " (" + std::to_string(v.size()) + " entries)");
        return {};
      }
      out.push_back(x.get<double>());
    }
    return out;
  }

 private:
  const nlohmann::json& obj_;
  RopeProblems& p_;
};

// The type named by rope_type or the legacy type; nullopt (with the problem added) otherwise.
std::optional<RopeType> read_type(Reader& r) {
  std::optional<RopeType> found;
  std::string found_name;
  for (const char* key : {"rope_type", "type"}) {
    if (!r.has(key)) continue;
    const auto& v = r.at(key);
    std::optional<RopeType> t = v.is_string() ? parse_rope_type(v.get<std::string>()) : std::nullopt;
    if (!t) {
      r.add(key, "unknown rope type " + json_snippet(v) + " (known: " + known_rope_types() + ")");
      return std::nullopt;
    }
    if (found && *found != *t) {
      r.add(key, json_snippet(v) + " contradicts rope_type \"" + found_name + "\"; give one of them");
      return std::nullopt;
    }
    found = t;
    found_name = v.get<std::string>();
  }
  if (!found) r.add("rope_type", "missing (known types: " + known_rope_types() + ")");
  return found;
}

}  // namespace

const char* to_string(RopeType t) {
  for (const auto& tn : kTypeNames)
    if (tn.type == t) return tn.name;
  return "?";
}

std::optional<RopeType> parse_rope_type(const std::string& name) {
  if (name == "su") return RopeType::LongRope;
  for (const auto& tn : kTypeNames)
    if (name == tn.name) return tn.type;
  return std::nullopt;
}

std::string known_rope_types() {
  std::string s;
  for (const auto& tn : kTypeNames) s += (s.empty() ? "" : " | ") + std::string(tn.name);
  return s + " (\"su\" is read as longrope)";
}

RopeScaling rope_scaling_from_json(const nlohmann::json& obj, RopeProblems& problems) {
  RopeScaling s;
  if (obj.is_null()) return s;
  if (!obj.is_object()) {
    problems.emplace_back("rope_scaling", "must be an object or null, got " + json_snippet(obj));
    return s;
  }
  Reader r(obj, problems);
  std::optional<RopeType> type = read_type(r);
  if (type) s.type = *type;

  // Keys: unknown ones and ones this type does not take are refused by name; what a type
  // requires must be there. With no known type, every known key is still checked.
  const std::set<std::string> known = all_keys();
  std::set<std::string> takes = known;
  if (type) {
    TypeKeys k = keys_of(*type);
    takes = std::set<std::string>(k.required.begin(), k.required.end());
    takes.insert(k.optional.begin(), k.optional.end());
    std::vector<std::string> all = k.required;
    all.insert(all.end(), k.optional.begin(), k.optional.end());
    for (const auto& key : k.required)
      if (!r.has(key))
        r.add(key, std::string("missing: rope_type \"") + to_string(*type) + "\" requires it (it takes " +
                       join(all) + ")");
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      if (it.key() == "rope_type" || it.key() == "type" || takes.count(it.key())) continue;
      if (known.count(it.key()))
        r.add(it.key(), std::string("not used by rope_type \"") + to_string(*type) + "\" (it takes " +
                            join(all) + "); value " + json_snippet(*it));
    }
  }
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (it.key() != "rope_type" && it.key() != "type" && !known.count(it.key()))
      r.add(it.key(), "unknown field (value " + json_snippet(*it) + "); rope_scaling takes rope_type and " +
                          join(std::vector<std::string>(known.begin(), known.end())));

  auto want = [&](const char* key) { return takes.count(key) > 0; };
  if (want("factor")) s.factor = r.number("factor", true);
  if (want("original_max_position_embeddings"))
    s.original_max_position_embeddings = r.positive_int("original_max_position_embeddings");
  if (want("low_freq_factor")) {
    auto low = r.number("low_freq_factor", true);
    auto high = r.number("high_freq_factor", true);
    if (low) s.low_freq_factor = *low;
    if (high) s.high_freq_factor = *high;
    if (low && high && !(*high > *low))
      r.add("high_freq_factor", "must be greater than low_freq_factor (" + fmt(*low) + "), got " + fmt(*high));
  }
  if (want("beta_fast")) {
    auto fast = r.number("beta_fast", true);
    auto slow = r.number("beta_slow", true);
    if (fast) s.beta_fast = *fast;
    if (slow) s.beta_slow = *slow;
    if ((fast || slow) && s.beta_fast < s.beta_slow)
      r.add(fast ? "beta_fast" : "beta_slow",
            "beta_fast (" + fmt(s.beta_fast) + ") must be at least beta_slow (" + fmt(s.beta_slow) +
                "); the defaults are 32 and 1");
  }
  if (want("attention_factor")) s.attention_factor = r.number("attention_factor", true);
  if (want("mscale")) s.mscale = r.number("mscale", false);
  if (want("mscale_all_dim")) s.mscale_all_dim = r.number("mscale_all_dim", false);
  if (want("truncate")) s.truncate = r.boolean("truncate").value_or(true);
  if (want("short_factor")) s.short_factor = r.factors("short_factor");
  if (want("long_factor")) s.long_factor = r.factors("long_factor");
  return s;
}

nlohmann::json rope_scaling_to_json(const RopeScaling& s) {
  if (s.type == RopeType::Default) return nullptr;
  nlohmann::json j;
  j["rope_type"] = to_string(s.type);
  TypeKeys k = keys_of(s.type);
  std::set<std::string> takes(k.required.begin(), k.required.end());
  takes.insert(k.optional.begin(), k.optional.end());
  auto put = [&](const char* key, const auto& v) {
    if (takes.count(key)) j[key] = v;
  };
  auto put_opt = [&](const char* key, const auto& v) {
    if (v) put(key, *v);
  };
  put_opt("factor", s.factor);
  put_opt("original_max_position_embeddings", s.original_max_position_embeddings);
  put("low_freq_factor", s.low_freq_factor);
  put("high_freq_factor", s.high_freq_factor);
  put("beta_fast", s.beta_fast);
  put("beta_slow", s.beta_slow);
  put_opt("attention_factor", s.attention_factor);
  put_opt("mscale", s.mscale);
  put_opt("mscale_all_dim", s.mscale_all_dim);
  put("truncate", s.truncate);
  put("short_factor", s.short_factor);
  put("long_factor", s.long_factor);
  return j;
}

void validate_rope_scaling(const RopeScaling& s, int rotary_dim, int max_position_embeddings,
                           RopeProblems& problems) {
  auto add = [&](const std::string& key, const std::string& msg) {
    problems.emplace_back(Reader::field(key), msg);
  };
  const bool needs_max = s.type == RopeType::Dynamic ||
                         ((s.type == RopeType::Yarn || s.type == RopeType::LongRope) &&
                          !s.original_max_position_embeddings);
  if (needs_max && max_position_embeddings <= 0)
    problems.emplace_back("max_position_embeddings",
                          std::string("must be positive for rope_type \"") + to_string(s.type) + "\", got " +
                              std::to_string(max_position_embeddings));
  if (s.type == RopeType::Dynamic) {
    if (rotary_dim <= 2)
      add("rope_type", "\"dynamic\" raises the base to d/(d-2) and needs a rotary dimension above 2, got " +
                           std::to_string(rotary_dim));
    if (s.original_max_position_embeddings && *s.original_max_position_embeddings != max_position_embeddings)
      add("original_max_position_embeddings",
          std::to_string(*s.original_max_position_embeddings) + " differs from max_position_embeddings (" +
              std::to_string(max_position_embeddings) +
              "): Hugging Face's dynamic scaling ignores this field and scales from max_position_embeddings; "
              "make them equal or remove it");
  }
  if (s.type == RopeType::LongRope) {
    const std::size_t half = rotary_dim > 0 ? static_cast<std::size_t>(rotary_dim) / 2 : 0;
    for (const auto& [key, v] : {std::pair<const char*, const std::vector<double>*>{"short_factor", &s.short_factor},
                                 {"long_factor", &s.long_factor}})
      if (v->size() != half)
        add(key, "has " + std::to_string(v->size()) + " entries; the rotary dimension " +
                     std::to_string(rotary_dim) + " needs rotary_dim/2 = " + std::to_string(half));
  }
}

// ---- Frequencies ---------------------------------------------------------------------------

namespace {

// float32 steps as torch's CPU kernels take them (each one correctly rounded float32
// operation; -ffp-contract=off keeps the compiler from fusing them).
float f32(double v) { return static_cast<float>(v); }
// `torch.arange(0, d, 2).float() / d`, entry i.
float exponent(int i, int d) { return static_cast<float>(2 * i) / static_cast<float>(d); }
// A float32 tensor pow, correctly rounded (torch's is within one ulp of this).
float pow32(float base, float e) { return f32(std::pow(static_cast<double>(base), static_cast<double>(e))); }

// 1 / base^e_i: Hugging Face's `1.0 / (base ** (arange / dim))`, base a float32 scalar.
std::vector<float> default_inv_freq(float base, int d) {
  std::vector<float> inv(static_cast<std::size_t>(d / 2));
  for (int i = 0; i < d / 2; ++i) inv[i] = 1.0f / pow32(base, exponent(i, d));
  return inv;
}

std::vector<float> divided(std::vector<float> inv, double factor) {
  for (float& x : inv) x /= f32(factor);
  return inv;
}

// Dynamic NTK beyond max positions, as Hugging Face's forward computes it: seq_len is a 0-d
// int64 tensor, so the scaled base is float32 arithmetic; torch's CPU pow of a float32 tensor
// by a Python float computes in double.
float dynamic_base(double theta, double factor, int d, int max_pos, int seq_len) {
  float t = f32(factor) * static_cast<float>(seq_len);
  t = t / static_cast<float>(max_pos);
  t = t - f32(factor - 1.0);
  t = f32(std::pow(static_cast<double>(t), static_cast<double>(d) / (d - 2)));
  return f32(theta) * t;
}

std::vector<float> llama3_inv_freq(const RopeScaling& s, double theta, int d) {
  std::vector<float> inv = default_inv_freq(f32(theta), d);
  const double factor = *s.factor, low = s.low_freq_factor, high = s.high_freq_factor;
  const int old_len = *s.original_max_position_embeddings;
  // Python floats compared with a float32 tensor are rounded to float32 first.
  const float low_wavelen = f32(old_len / low), high_wavelen = f32(old_len / high);
  const float two_pi = f32(2 * std::numbers::pi);
  for (float& x : inv) {
    const float wavelen = (1.0f / x) * two_pi;  // 2 * math.pi / inv_freq (reciprocal, then product)
    const float llama = wavelen > low_wavelen ? x / f32(factor) : x;
    const float smooth = ((1.0f / wavelen) * static_cast<float>(old_len) - f32(low)) / f32(high - low);
    const float smoothed = (1.0f - smooth) * llama / f32(factor) + smooth * llama;
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    x = medium ? smoothed : llama;
  }
  return inv;
}

double yarn_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

RopeFrequencies yarn(const RopeScaling& s, double theta, int d, int max_pos) {
  const double factor = *s.factor;
  const int original = s.original_max_position_embeddings.value_or(max_pos);
  RopeFrequencies f;
  double attention;
  if (s.attention_factor)
    attention = *s.attention_factor;
  else if (s.mscale.value_or(0) != 0 && s.mscale_all_dim.value_or(0) != 0)
    attention = yarn_mscale(factor, *s.mscale) / yarn_mscale(factor, *s.mscale_all_dim);
  else
    attention = yarn_mscale(factor, 1.0);
  f.attention_scaling = f32(attention);

  // YaRN's correction range, Python floats throughout.
  auto correction_dim = [&](double rotations) {
    return (d * std::log(original / (rotations * 2 * std::numbers::pi))) / (2 * std::log(theta));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(d - 1));
  if (low == high) high += 0.001;  // Hugging Face's guard against a zero-width ramp
  const float ramp_min = f32(low), ramp_width = f32(high - low);

  f.inv_freq.resize(static_cast<std::size_t>(d / 2));
  for (int i = 0; i < d / 2; ++i) {
    const float pos = pow32(f32(theta), exponent(i, d));
    const float extrapolation = 1.0f / pos;
    const float interpolation = 1.0f / (f32(factor) * pos);
    const float ramp = std::clamp((static_cast<float>(i) - ramp_min) / ramp_width, 0.0f, 1.0f);
    const float extra_share = 1.0f - ramp;
    f.inv_freq[i] = interpolation * (1.0f - extra_share) + extrapolation * extra_share;
  }
  return f;
}

RopeFrequencies longrope(const RopeScaling& s, double theta, int d, int max_pos, int seq_len) {
  const int original = s.original_max_position_embeddings.value_or(max_pos);
  const double factor = s.factor ? *s.factor : static_cast<double>(max_pos) / original;
  RopeFrequencies f;
  double attention = 1.0;
  if (s.attention_factor)
    attention = *s.attention_factor;
  else if (factor > 1.0)
    attention = std::sqrt(1 + std::log(factor) / std::log(static_cast<double>(original)));
  f.attention_scaling = f32(attention);
  const std::vector<double>& ext = seq_len > original ? s.long_factor : s.short_factor;
  f.inv_freq.resize(static_cast<std::size_t>(d / 2));
  for (int i = 0; i < d / 2; ++i) f.inv_freq[i] = 1.0f / (f32(ext[i]) * pow32(f32(theta), exponent(i, d)));
  return f;
}

void throw_problems(const RopeProblems& p) {
  std::string msg = p[0].second;
  for (std::size_t i = 1; i < p.size(); ++i) msg += "; also " + p[i].first + ": " + p[i].second;
  throw ConfigError(p[0].first, msg);
}

}  // namespace

RopeFrequencies rope_frequencies(const RopeScaling& s, double theta, int rotary_dim,
                                 int max_position_embeddings, int seq_len) {
  if (!(theta > 0 && std::isfinite(theta)))
    throw ConfigError("rope_theta", "must be a positive number, got " + fmt(theta));
  if (rotary_dim <= 0 || rotary_dim % 2 != 0)
    throw ConfigError("rotary_dim", "RoPE rotates pairs of dims: needs an even number > 0, got " +
                                        std::to_string(rotary_dim));
  if (seq_len <= 0) throw ConfigError("seq", "must be positive, got " + std::to_string(seq_len));
  // The parser's value checks, for a RopeScaling built in code, then the model checks.
  RopeProblems problems;
  rope_scaling_from_json(rope_scaling_to_json(s), problems);
  validate_rope_scaling(s, rotary_dim, max_position_embeddings, problems);
  if (!problems.empty()) throw_problems(problems);

  const int d = rotary_dim;
  switch (s.type) {
    case RopeType::Default: return {default_inv_freq(f32(theta), d), 1.0f};
    case RopeType::Linear: return {divided(default_inv_freq(f32(theta), d), *s.factor), 1.0f};
    case RopeType::Dynamic:
      if (seq_len <= max_position_embeddings) return {default_inv_freq(f32(theta), d), 1.0f};
      return {default_inv_freq(dynamic_base(theta, *s.factor, d, max_position_embeddings, seq_len), d), 1.0f};
    case RopeType::Llama3: return {llama3_inv_freq(s, theta, d), 1.0f};
    case RopeType::Yarn: return yarn(s, theta, d, max_position_embeddings);
    case RopeType::LongRope: return longrope(s, theta, d, max_position_embeddings, seq_len);
  }
  throw Error("rope_frequencies: unknown rope type");
}

}  // namespace remat
