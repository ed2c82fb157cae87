// Generation on token ids against fixtures/expectations.json, on both committed fixtures (fp32 and int4): greedy ids,
// first-step top-5 logits, the left-padded batch, end-of-text, seeded sampling and the seed rule. No tokenizer needed.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "batching.hpp"
#include "fixture_data.hpp"
#include "gpt2_onnx/gpt2_onnx.hpp"

namespace gpt2_onnx {
namespace {

using testing::fixture;
using testing::ids;

class Generation : public ::testing::TestWithParam<testing::FixtureName> {
 protected:
  static Model open(const std::filesystem::path& folder) {
    ModelOptions options;
    options.tokenizer = false;
    return Model::open(folder, options);
  }
  const nlohmann::json& expected() const { return fixture(GetParam().folder); }
  std::filesystem::path folder() const { return testing::kFixtures / GetParam().folder; }
};

TEST_P(Generation, GreedyIdsAreTheExpectationsForEveryPrompt) {
  Model model = open(folder());
  for (const auto& prompt : expected().at("prompts")) {
    GenerateOptions options;
    options.max_new_tokens = prompt.at("greedy").at("max_new_tokens").get<int>();
    const auto result = model.generate(ids(prompt.at("ids")), options);
    EXPECT_EQ(result.ids, ids(prompt.at("greedy").at("ids"))) << prompt.at("text");
    EXPECT_EQ(to_string(result.finish_reason), prompt.at("greedy").at("finish_reason").get<std::string>());
    EXPECT_EQ(result.prompt_ids, ids(prompt.at("ids")));
  }
}

TEST_P(Generation, FirstStepTopFiveLogitsAreWithinTheFixturesTolerance) {
  Model model = open(folder());
  const double atol = expected().at("logits_atol").get<double>();
  for (const auto& prompt : expected().at("prompts")) {
    const std::vector<float> logits = model.next_token_logits(ids(prompt.at("ids")));
    const auto& top5 = prompt.at("first_step_top5");
    EXPECT_EQ(top_k(logits.data(), logits.size(), 5), ids(top5.at("ids"))) << prompt.at("text");
    for (size_t i = 0; i < 5; ++i) {
      const double want = top5.at("logits")[i].get<double>();
      EXPECT_NEAR(logits[static_cast<size_t>(top5.at("ids")[i].get<int64_t>())], want, atol) << prompt.at("text");
    }
  }
}

TEST_P(Generation, ALeftPaddedBatchGivesEachRowItsOwnIds) {
  const auto& batch = expected().at("padded_batch");
  std::vector<std::vector<int64_t>> prompts;  // each row's ids without its padding
  for (size_t row = 0; row < batch.at("input_ids").size(); ++row) {
    std::vector<int64_t> prompt;
    for (size_t col = 0; col < batch.at("input_ids")[row].size(); ++col) {
      if (batch.at("attention_mask")[row][col].get<int>() == 1) prompt.push_back(batch.at("input_ids")[row][col]);
    }
    prompts.push_back(prompt);
  }
  const auto padded = detail::left_pad(prompts, batch.at("pad_token_id").get<int64_t>());
  const auto rows = [](const nlohmann::json& matrix) {  // (B, T) row-major
    std::vector<int64_t> flat;
    for (const auto& row : matrix) flat.insert(flat.end(), row.begin(), row.end());
    return flat;
  };
  EXPECT_EQ(padded.input_ids.data, rows(batch.at("input_ids")));
  EXPECT_EQ(padded.attention_mask.data, rows(batch.at("attention_mask")));
  Model model = open(folder());
  GenerateOptions options;
  options.max_new_tokens = batch.at("max_new_tokens").get<int>();
  const auto results = model.generate(prompts, options);
  ASSERT_EQ(results.size(), prompts.size());
  for (size_t row = 0; row < results.size(); ++row) EXPECT_EQ(results[row].ids, ids(batch.at("ids")[row]));
}

TEST_P(Generation, EndOfTextEndsARowUnlessIgnored) {
  // A copy whose end-of-text is the newline (198), the first prompt's second greedy token.
  const auto copy = testing::copy_of(GetParam().folder, "eos");
  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(copy / "manifest.json"));
  manifest["tokens"]["eos_token_id"] = 198;
  std::ofstream(copy / "manifest.json") << manifest.dump();
  Model model = open(copy);
  const auto prompt = ids(expected().at("prompts")[0].at("ids"));
  const auto stopped = model.generate(prompt, {});
  EXPECT_EQ(stopped.ids, (std::vector<int64_t>{262, 198}));
  EXPECT_EQ(stopped.finish_reason, FinishReason::eos);
  GenerateOptions ignore;
  ignore.stop_at_eos = false;
  const auto full = model.generate(prompt, ignore);
  EXPECT_EQ(full.ids.size(), 16u);
  EXPECT_EQ(full.finish_reason, FinishReason::length);
}

TEST_P(Generation, ASeedGivesTheSameIdsAndAnotherSeedOthers) {
  Model model = open(folder());
  const auto prompt = ids(expected().at("prompts")[0].at("ids"));
  GenerateOptions options;
  options.max_new_tokens = 24;
  options.temperature = 1.5;
  options.seed = 99;
  const auto first = model.generate(prompt, options);
  EXPECT_EQ(model.generate(prompt, options).ids, first.ids);
  options.seed = 100;
  EXPECT_NE(model.generate(prompt, options).ids, first.ids);
}

TEST_P(Generation, ASeededPromptSamplesTheSameIdsAloneAndInABatch) {
  // The seed rule: every row draws from its own SplitMix64 started at the seed, never from another row's draws. The
  // candidates are bounded (top-k 40, top-p 0.95) so that the padded rows' last-bit logit differences stay far
  // from any draw's boundary.
  Model model = open(folder());
  const auto first = ids(expected().at("prompts")[0].at("ids"));
  const auto second = ids(expected().at("prompts")[1].at("ids"));  // of another length: the rows are padded
  ASSERT_NE(first.size(), second.size());
  GenerateOptions options;
  options.max_new_tokens = 24;
  options.temperature = 0.8;
  options.top_k = 40;
  options.top_p = 0.95;
  options.seed = 7;
  const auto alone_first = model.generate(first, options).ids;
  const auto alone_second = model.generate(second, options).ids;
  const auto batch = model.generate(std::vector<std::vector<int64_t>>{first, second, first}, options);
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_EQ(batch[0].ids, alone_first);
  EXPECT_EQ(batch[1].ids, alone_second);
  EXPECT_EQ(batch[2].ids, alone_first);  // a prompt twice in one batch: the same seed, the same ids
  const auto swapped = model.generate(std::vector<std::vector<int64_t>>{second, first}, options);
  EXPECT_EQ(swapped[0].ids, alone_second);
  EXPECT_EQ(swapped[1].ids, alone_first);
}

TEST_P(Generation, WithoutASeedEachGenerationDrawsOneFreshSeed) {
  // Temperature 1.5 over the whole vocabulary for 24 tokens: two unseeded generations could be equal only if two
  // fresh 64-bit seeds drew the same 24 tokens (docs/cpp.md gives the odds measured on the fixtures).
  Model model = open(folder());
  const auto prompt = ids(expected().at("prompts")[0].at("ids"));
  GenerateOptions unseeded;
  unseeded.max_new_tokens = 24;
  unseeded.temperature = 1.5;
  EXPECT_NE(model.generate(prompt, unseeded).ids, model.generate(prompt, unseeded).ids);
  // One seed for the whole generation: every row of a batch starts from it, and it samples the same ids again.
  Generator generator(model, {prompt, prompt}, unseeded);
  while (!generator.done()) generator.next();
  const auto rows = generator.results();
  EXPECT_EQ(rows[0].ids, rows[1].ids);
  GenerateOptions again = unseeded;
  again.seed = generator.seed();
  EXPECT_EQ(model.generate(prompt, again).ids, rows[0].ids);
}

TEST_P(Generation, TheGeneratorStepsWhatGenerateReturns) {
  Model model = open(folder());
  const auto prompt = ids(expected().at("prompts")[1].at("ids"));
  Generator generator(model, {prompt}, {});
  std::vector<int64_t> stepped;
  while (!generator.done()) {
    const int64_t chosen = argmax(generator.logits(0), static_cast<size_t>(model.manifest().vocab_size));
    EXPECT_EQ(generator.next()[0], chosen);
    stepped.push_back(chosen);
  }
  EXPECT_EQ(stepped, model.generate(prompt, {}).ids);
  EXPECT_THROW(generator.next(), std::logic_error);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Generation, ::testing::ValuesIn(testing::fixture_names()));

}  // namespace
}  // namespace gpt2_onnx
