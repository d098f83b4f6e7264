// RoPE frequencies with Hugging Face's rope scaling types (`rope_scaling` in a config.json):
// the object read verbatim, checked field by field, and the inverse frequencies and attention
// scaling computed as transformers' modeling_rope_utils computes them.
//
// What is matched: Hugging Face computes inv_freq as a float32 tensor on the CPU (torch's
// `torch.arange(0, dim, 2).float() / dim`, then float32 pow, reciprocal, products and sums)
// while the scalar parameters (wavelength bands, YaRN's correction range, attention factors,
// the longrope factor) are Python floats, i.e. float64. rope_frequencies() repeats each step in
// that precision and order: every float32 tensor operation as one correctly rounded float32
// operation (torch's CPU kernels for + - * / and reciprocal are), every Python step in double,
// a Python scalar meeting a float32 tensor first rounded to float32. The one inexact step is
// torch's float32 pow: its vectorised kernel (SLEEF, accurate to 1 ulp) is not correctly
// rounded, ours is. So the results are bit-identical to torch's steps with a correctly rounded
// pow, and within a few ulps of torch itself: one ulp in the pow, up to two after the reciprocal
// that follows (at a binade edge), three after Llama 3's blend near its band edges; about 1% of
// the values differ at all (tests/unit/rope_scaling_test.cpp, against torch 1.13 on the CPU).
// On a GPU torch divides by a scalar as a product with its reciprocal, which moves results by
// another ulp; we match the CPU.
//
// Per type (theta = rope_theta, d = rotary_dim, i = 0 .. d/2-1, e_i = float32(2i)/float32(d)):
//   default   inv_i = 1 / theta^e_i
//   linear    default / factor
//   dynamic   default while seq_len <= max_position_embeddings; beyond, theta is replaced by
//             theta * (factor*seq_len/max_position_embeddings - (factor-1))^(d/(d-2)), computed
//             as Hugging Face's forward pass does (seq_len a 0-d int64 tensor: float32 steps,
//             the power in double). Like Hugging Face, the object's
//             original_max_position_embeddings is not used; validate refuses one that differs.
//   llama3    default frequencies with wavelength 2*pi/inv above original/low_freq_factor
//             divided by factor, below original/high_freq_factor kept, between blended with
//             smooth = (original/wavelength - low) / (high - low).
//   yarn      blend of default / factor (interpolation) and default (extrapolation) with the
//             linear ramp between YaRN's correction dims for beta_fast and beta_slow rotations
//             over original_max_position_embeddings (default max_position_embeddings), floored /
//             ceiled unless truncate is false; attention_scaling = attention_factor, else
//             (0.1*mscale*ln(factor)+1) / (0.1*mscale_all_dim*ln(factor)+1) when both mscales
//             are given and non-zero, else 0.1*ln(factor)+1 (1 when factor <= 1).
//   longrope  inv_i = 1 / (ext_i * theta^e_i), ext = long_factor when seq_len >
//             original_max_position_embeddings (default max_position_embeddings), else
//             short_factor; factor defaults to max_position_embeddings / original;
//             attention_scaling = attention_factor, else sqrt(1 + ln(factor)/ln(original))
//             (1 when factor <= 1).
// Where Hugging Face releases disagree (older 4.x replaced an explicit yarn/longrope `factor` by
// max_position_embeddings / original_max_position_embeddings), the current behaviour is
// matched: an explicit factor is used as given.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace remat {

enum class RopeType { Default, Linear, Dynamic, Llama3, Yarn, LongRope };

// Hugging Face's names: default, linear, dynamic, llama3, yarn, longrope.
const char* to_string(RopeType t);
// Those names, and "su" (longrope's name in Phi-3's first configs); nullopt for any other.
std::optional<RopeType> parse_rope_type(const std::string& name);
// "default | linear | dynamic | llama3 | yarn | longrope", for messages.
std::string known_rope_types();

// One (field, message) per problem, fields named like `rope_scaling.factor`.
using RopeProblems = std::vector<std::pair<std::string, std::string>>;

// Every parameter of the types, Hugging Face's defaults where it has one. Which keys a type
// takes (required / optional), see docs/model-config.md.
struct RopeScaling {
  RopeType type = RopeType::Default;
  // linear, dynamic, llama3, yarn: required. longrope: optional (max positions / original).
  std::optional<double> factor;
  // llama3: required. yarn, longrope: optional (max_position_embeddings). dynamic: accepted
  // only equal to max_position_embeddings (Hugging Face ignores it there).
  std::optional<int> original_max_position_embeddings;
  double low_freq_factor = 1.0;   // llama3, required
  double high_freq_factor = 4.0;  // llama3, required
  double beta_fast = 32.0;        // yarn
  double beta_slow = 1.0;         // yarn
  std::optional<double> attention_factor;  // yarn, longrope: derived when absent
  std::optional<double> mscale;            // yarn: used only with mscale_all_dim, both non-zero
  std::optional<double> mscale_all_dim;    // yarn
  bool truncate = true;                    // yarn: floor/ceil the correction range
  std::vector<double> short_factor;        // longrope, required, rotary_dim/2 entries
  std::vector<double> long_factor;         // longrope, required, rotary_dim/2 entries

  bool operator==(const RopeScaling&) const = default;
};

// Reads Hugging Face's `rope_scaling` object verbatim (null: Default). The type is `rope_type`
// or the legacy `type`. Adds every problem to `problems` (unknown type with the known ones,
// bad values with what is allowed, missing required keys, keys the type does not take); the
// result is meaningful only when none was added.
RopeScaling rope_scaling_from_json(const nlohmann::json& obj, RopeProblems& problems);
// Our model JSON's `rope_scaling`: null for Default, else an object rope_scaling_from_json
// reads back to an equal RopeScaling (`rope_type` spelled as to_string gives).
nlohmann::json rope_scaling_to_json(const RopeScaling& s);

// The checks that need the model: short/long_factor lengths against rotary_dim/2, dynamic's
// d/(d-2) exponent, original_max_position_embeddings against max_position_embeddings.
void validate_rope_scaling(const RopeScaling& s, int rotary_dim, int max_position_embeddings,
                           RopeProblems& problems);

struct RopeFrequencies {
  std::vector<float> inv_freq;    // rotary_dim / 2 inverse frequencies
  float attention_scaling = 1.0f;  // multiplies cos and sin (float32, as Hugging Face's forward)
};

// The inverse frequencies and attention scaling for a sequence of seq_len positions.
// rotary_dim: the rotated dims (head_dim * partial_rotary_factor), even and > 0. Throws
// ConfigError naming the field when the arguments or validate_rope_scaling find a problem.
RopeFrequencies rope_frequencies(const RopeScaling& s, double theta, int rotary_dim,
                                 int max_position_embeddings, int seq_len);

}  // namespace remat
