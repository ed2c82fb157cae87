#include "gpt2_onnx/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>

#include "gpt2_onnx/errors.hpp"

namespace gpt2_onnx {
namespace {

std::string number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// Token ids by logit, highest first, lower id first on ties; only as far as `kept` (top-k and its ties) needs.
// The order of what is returned is exactly that of a full sort, so the sums below add in the same order.
std::vector<int64_t> ranked(const float* logits, size_t count, int top_k) {
  std::vector<int64_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  const auto before = [logits](int64_t a, int64_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (top_k <= 0 || static_cast<size_t>(top_k) >= count) {
    std::sort(order.begin(), order.end(), before);
    return order;
  }
  const auto k = static_cast<std::ptrdiff_t>(top_k);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
  const float kth = logits[order[k - 1]];
  // Ties with the k-th outside the first k all have higher ids than the tied ones inside: they follow in id order.
  std::vector<int64_t> ties;
  for (auto it = order.begin() + k; it != order.end(); ++it) {
    if (logits[*it] == kth) ties.push_back(*it);
  }
  std::sort(ties.begin(), ties.end());
  order.resize(static_cast<size_t>(k));
  order.insert(order.end(), ties.begin(), ties.end());
  return order;
}

}  // namespace

uint64_t SplitMix64::next_uint64() {
  state_ += 0x9E3779B97F4A7C15ULL;  // unsigned arithmetic wraps mod 2^64
  uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double SplitMix64::next_uniform() {
  return static_cast<double>(next_uint64() >> 11) / 9007199254740992.0;  // 2^53: exact in a double
}

int64_t argmax(const float* values, size_t count) {
  return static_cast<int64_t>(std::max_element(values, values + count) - values);  // first of equal maxima
}

std::vector<int64_t> top_k(const float* values, size_t count, size_t k) {
  std::vector<int64_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  k = std::min(k, count);
  const auto before = [values](int64_t a, int64_t b) {
    return values[a] > values[b] || (values[a] == values[b] && a < b);
  };
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), before);
  order.resize(k);
  return order;
}

int64_t sample(const float* logits, size_t count, const SamplingSettings& settings, double u) {
  if (std::any_of(logits, logits + count, [](float x) { return std::isnan(x); })) {
    throw RuntimeError("the logits contain NaN; cannot sample");
  }
  const std::vector<int64_t> order = ranked(logits, count, settings.top_k);  // (kept,)
  const size_t kept = order.size();
  const double t = settings.temperature;
  const double top = static_cast<double>(logits[order[0]]) / t;
  std::vector<double> weights(kept);  // unnormalized softmax, same order
  double total = 0;
  for (size_t i = 0; i < kept; ++i) total += weights[i] = std::exp(static_cast<double>(logits[order[i]]) / t - top);
  size_t nucleus = 0;
  double mass = 0;
  while (nucleus < kept && (nucleus == 0 || mass / total < settings.top_p)) mass += weights[nucleus++];
  double running = 0;
  for (size_t i = 0; i < nucleus; ++i) {
    running += weights[i] / mass;
    if (u < running) return order[i];
  }
  return order[nucleus - 1];
}

uint64_t seed_of(const GenerateOptions& options) {
  if (options.seed) return *options.seed;
  std::random_device entropy;  // 32 bits per call
  return (static_cast<uint64_t>(entropy()) << 32) | static_cast<uint64_t>(entropy());
}

TokenSelector::TokenSelector(const GenerateOptions& options) : TokenSelector(options, seed_of(options)) {}

TokenSelector::TokenSelector(const GenerateOptions& options, uint64_t seed) : rng_(seed) {
  settings_.temperature = options.temperature.value_or(1.0);
  settings_.top_k = options.top_k.value_or(0);
  settings_.top_p = options.top_p.value_or(1.0);
  if (!(std::isfinite(settings_.temperature) && settings_.temperature >= 0)) {
    throw OptionsError("temperature must be >= 0, not " + number(settings_.temperature));
  }
  if (settings_.top_k < 0) {
    throw OptionsError("top_k must be an integer >= 0 (0 = off), not " + std::to_string(settings_.top_k));
  }
  if (!(settings_.top_p > 0 && settings_.top_p <= 1)) {
    throw OptionsError("top_p must be in (0, 1], not " + number(settings_.top_p));
  }
  const bool asked = options.temperature || options.top_k || options.top_p || options.seed;
  sampled_ = options.do_sample.value_or(asked) && settings_.temperature != 0;
}

int64_t TokenSelector::operator()(const float* logits, size_t count) {
  if (!sampled_) return argmax(logits, count);
  return sample(logits, count, settings_, rng_.next_uniform());
}

}  // namespace gpt2_onnx
