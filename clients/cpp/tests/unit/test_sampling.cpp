// The sampling procedure and its generator (gpt2_onnx/sampling.hpp), on hand-made logits: the JavaScript client's
// procedure, so that one seed gives the same tokens in C++, C# and JavaScript.
#include <gtest/gtest.h>

#include <vector>

#include "gpt2_onnx/errors.hpp"
#include "gpt2_onnx/sampling.hpp"

namespace gpt2_onnx {
namespace {

const SamplingSettings kFlat{1.0, 0, 1.0};

TEST(SplitMix64, GivesThePublishedFirstOutputs) {
  SplitMix64 zero(0);
  EXPECT_EQ(zero.next_uint64(), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(zero.next_uint64(), 0x6E789E6AA1B965F4ULL);
  EXPECT_EQ(zero.next_uint64(), 0x06C45D188009454FULL);
  SplitMix64 other(1234567);  // the sequence usually quoted with the reference implementation
  EXPECT_EQ(other.next_uint64(), 6457827717110365317ULL);
  EXPECT_EQ(other.next_uint64(), 3203168211198807973ULL);
  EXPECT_EQ(other.next_uint64(), 9817491932198370423ULL);
  EXPECT_EQ(other.next_uint64(), 4593380528125082431ULL);
  EXPECT_EQ(other.next_uint64(), 16408922859458223821ULL);
}

TEST(SplitMix64, UniformsAreTheTop53BitsOverTwoToThe53) {
  SplitMix64 bits(42), uniforms(42);
  for (int i = 0; i < 100; ++i) {
    const double expected = static_cast<double>(bits.next_uint64() >> 11) / 9007199254740992.0;
    const double u = uniforms.next_uniform();
    EXPECT_EQ(u, expected);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}

TEST(Sampling, ArgmaxTakesTheFirstOfTies) {
  const std::vector<float> logits{1, 3, 3, 0};
  EXPECT_EQ(argmax(logits.data(), logits.size()), 1);
  EXPECT_EQ(top_k(logits.data(), logits.size(), 3), (std::vector<int64_t>{1, 2, 0}));
}

TEST(Sampling, FollowsTheRunningSumOfProbabilitiesInRankOrder) {
  // probabilities in rank order [1, 2, 0, 3]: e^3, e^3, e^1, e^0 over their sum (0.4576, 0.4576, 0.0619, 0.0228)
  const std::vector<float> logits{1, 3, 3, 0};
  EXPECT_EQ(sample(logits.data(), 4, kFlat, 0.0), 1);
  EXPECT_EQ(sample(logits.data(), 4, kFlat, 0.45), 1);
  EXPECT_EQ(sample(logits.data(), 4, kFlat, 0.55), 2);
  EXPECT_EQ(sample(logits.data(), 4, kFlat, 0.95), 0);
  EXPECT_EQ(sample(logits.data(), 4, kFlat, 0.999), 3);
}

TEST(Sampling, TopKKeepsTheTiesOfTheKth) {
  const std::vector<float> logits{1, 3, 3, 0};
  EXPECT_EQ(sample(logits.data(), 4, {1.0, 1, 1.0}, 0.3), 1);
  EXPECT_EQ(sample(logits.data(), 4, {1.0, 1, 1.0}, 0.99), 2);  // as transformers does
  EXPECT_EQ(sample(logits.data(), 4, {1.0, 2, 1.0}, 0.99), 2);
  // The k-th's ties beyond the first k, in id order: ranks 1 (e^3), 2, 3, 4 (e^2 each); id 0 is never kept.
  const std::vector<float> tied{1, 3, 2, 2, 2};  // p = 0.4754, 0.1749 x 3
  EXPECT_EQ(sample(tied.data(), 5, {1.0, 2, 1.0}, 0.47), 1);
  EXPECT_EQ(sample(tied.data(), 5, {1.0, 2, 1.0}, 0.48), 2);
  EXPECT_EQ(sample(tied.data(), 5, {1.0, 2, 1.0}, 0.66), 3);
  EXPECT_EQ(sample(tied.data(), 5, {1.0, 2, 1.0}, 0.999), 4);
}

TEST(Sampling, TopPKeepsTheShortestPrefixReachingP) {
  const std::vector<float> sharp{5, 0, 0};
  EXPECT_EQ(sample(sharp.data(), 3, {1.0, 0, 0.5}, 0.99), 0);
  const std::vector<float> logits{2, 1, 0};  // p = 0.665, 0.245, 0.090: 0.9 keeps two, renormalized 0.731, 0.269
  EXPECT_EQ(sample(logits.data(), 3, {1.0, 0, 0.9}, 0.72), 0);
  EXPECT_EQ(sample(logits.data(), 3, {1.0, 0, 0.9}, 0.75), 1);
  EXPECT_EQ(sample(logits.data(), 3, {1.0, 0, 0.9}, 0.999), 1);
  EXPECT_EQ(sample(logits.data(), 3, kFlat, 0.999), 2);
}

TEST(Sampling, TemperatureDividesTheLogits) {
  const std::vector<float> logits{1, 0};  // T = 0.5: p0 = e^2 / (e^2 + 1) = 0.881; T = 1: 0.731
  EXPECT_EQ(sample(logits.data(), 2, {0.5, 0, 1.0}, 0.87), 0);
  EXPECT_EQ(sample(logits.data(), 2, {0.5, 0, 1.0}, 0.89), 1);
  EXPECT_EQ(sample(logits.data(), 2, kFlat, 0.75), 1);
}

TEST(TokenSelector, IsGreedyUnlessSamplingIsAskedFor) {
  const std::vector<float> logits{0, 1, 5, 2};
  EXPECT_FALSE(TokenSelector(GenerateOptions{}).sampled());
  GenerateOptions seeded;
  seeded.seed = 3;
  EXPECT_TRUE(TokenSelector(seeded).sampled());
  seeded.temperature = 0.0;  // temperature 0 is greedy whatever else is given
  EXPECT_FALSE(TokenSelector(seeded).sampled());
  GenerateOptions off;
  off.top_k = 2;
  off.do_sample = false;
  TokenSelector greedy(off);
  EXPECT_FALSE(greedy.sampled());
  EXPECT_EQ(greedy(logits.data(), logits.size()), 2);
}

TEST(TokenSelector, DrawsOneUniformPerSampledTokenFromTheSeed) {
  const std::vector<float> first{0.5f, 0.4f, 0.3f, 0.2f}, second{0.1f, 0.9f, 0.8f, 0.1f};
  GenerateOptions options;
  options.seed = 1234;
  options.temperature = 0.7;
  TokenSelector select(options);
  SplitMix64 rng(1234);
  const SamplingSettings settings{0.7, 0, 1.0};
  for (int step = 0; step < 20; ++step) {
    const std::vector<float>& logits = step % 2 ? second : first;
    EXPECT_EQ(select(logits.data(), 4), sample(logits.data(), 4, settings, rng.next_uniform())) << "step " << step;
  }
}

TEST(TokenSelector, DrawsFromTheSeedItIsGiven) {
  const std::vector<float> logits{0.5f, 0.4f, 0.3f, 0.2f};
  GenerateOptions options;
  options.temperature = 1.0;  // no options.seed: a Generator passes each row the generation's seed
  TokenSelector select(options, 77);
  SplitMix64 rng(77);
  for (int step = 0; step < 20; ++step) {
    EXPECT_EQ(select(logits.data(), 4), sample(logits.data(), 4, kFlat, rng.next_uniform())) << "step " << step;
  }
}

TEST(SeedOf, IsTheOptionsSeedElseAFreshRandomOne) {
  GenerateOptions options;
  options.seed = 0;
  EXPECT_EQ(seed_of(options), 0u);
  options.seed = 18446744073709551615ULL;
  EXPECT_EQ(seed_of(options), 18446744073709551615ULL);
  options.seed.reset();
  EXPECT_NE(seed_of(options), seed_of(options));  // two 64-bit draws: equal with probability 2^-64
}

TEST(TokenSelector, RefusesOptionsOutOfRange) {
  const auto refused = [](GenerateOptions options) { EXPECT_THROW(TokenSelector{options}, OptionsError); };
  GenerateOptions o;
  o.temperature = -1;
  refused(o);
  o = {};
  o.top_k = -1;
  refused(o);
  o = {};
  o.top_p = 0.0;
  refused(o);
  o.top_p = 1.5;
  refused(o);
}

}  // namespace
}  // namespace gpt2_onnx
