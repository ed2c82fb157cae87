// Token choice: greedy argmax, or seeded sampling with temperature, top-k and top-p, exactly as the JavaScript
// client does it (clients/js/src/sampling.js; docs/javascript.md, "Sampling and its random numbers"), so that one
// seed gives the same tokens in C++, C# and JavaScript.
//
// The random numbers come from SplitMix64 (Steele, Lea and Flood, 2014): state += 0x9E3779B97F4A7C15;
// z = state; z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9; z = (z ^ z >> 27) * 0x94D049BB133111EB; z ^= z >> 31
// (all mod 2^64); uniform = (z >> 11) / 2^53, in [0, 1). The seed is the initial state; one uniform per sampled token.
// Seeding, as the Python runtime's (runtimes/gpt2_onnx_runtimes/decoding.py) and the other clients': every row of a
// batch draws from its own SplitMix64 whose initial state is the seed, so that a prompt samples the same tokens alone
// or in a batch; no seed given means one fresh random seed for the whole generation (seed_of).
//
// A sampled step, in double precision: scores = logits / temperature; keep the top_k highest (ties with the k-th
// kept too); softmax over what is kept; order by probability, highest first (lower id first on ties); keep the
// shortest prefix whose probabilities sum to >= top_p (at least one token); draw u and take the first token at which
// the kept probabilities' running sum, renormalized, exceeds u.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpt2_onnx/options.hpp"

namespace gpt2_onnx {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next_uint64();
  double next_uniform();  // 53 random bits: (next_uint64() >> 11) / 2^53

 private:
  uint64_t state_;
};

struct SamplingSettings {
  double temperature = 1.0;  // > 0 here: temperature 0 is greedy and never reaches sample()
  int top_k = 0;             // 0 = off
  double top_p = 1.0;
};

// Index of the largest value; the lowest index on ties (numpy's argmax).
int64_t argmax(const float* values, size_t count);

// The k largest values' indices, largest first (lower index first on ties).
std::vector<int64_t> top_k(const float* values, size_t count, size_t k);

// One sampled token from logits (count,) with the uniform u in [0, 1) (the procedure above).
int64_t sample(const float* logits, size_t count, const SamplingSettings& settings, double u);

// The seed a generation draws with: options.seed where given, else a fresh random one (std::random_device).
uint64_t seed_of(const GenerateOptions& options);

// The token choice of one row: validates the options (OptionsError) and keeps the row's generator state.
class TokenSelector {
 public:
  // Draws from SplitMix64(seed); a Generator gives each row its own, all from one seed_of(options).
  TokenSelector(const GenerateOptions& options, uint64_t seed);
  // TokenSelector(options, seed_of(options)).
  explicit TokenSelector(const GenerateOptions& options);
  bool sampled() const { return sampled_; }
  // The next token from logits (count,): argmax, or sample() with the next uniform.
  int64_t operator()(const float* logits, size_t count);

 private:
  bool sampled_ = false;
  SamplingSettings settings_;
  SplitMix64 rng_;  // this row's own stream
};

}  // namespace gpt2_onnx
