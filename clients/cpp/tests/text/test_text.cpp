// Text in, text out against fixtures/expectations.json on both fixtures: prompt text -> prompt ids, greedy text,
// the non-ASCII prompt, the padded batch from text; streamed pieces never split a UTF-8 character and add up to
// the text; the tokenizer files are checked like the graphs. Built only with the text layer.
#include <gtest/gtest.h>

#include <fstream>

#include "../export/fixture_data.hpp"
#include "gpt2_onnx/gpt2_onnx.hpp"
#include "utf8.hpp"

namespace gpt2_onnx {
namespace {

using testing::fixture;
using testing::ids;

// Every piece ends on a character boundary and is valid UTF-8 as far as the cut can tell.
void expect_whole_characters(const std::string& piece) {
  EXPECT_EQ(detail::complete_utf8_prefix(piece), piece.size()) << "a piece ends inside a character";
  if (!piece.empty()) EXPECT_NE(static_cast<unsigned char>(piece[0]) & 0xC0, 0x80) << "a piece starts inside one";
}

class Text : public ::testing::TestWithParam<testing::FixtureName> {
 protected:
  const nlohmann::json& expected() const { return fixture(GetParam().folder); }
  std::filesystem::path folder() const { return testing::kFixtures / GetParam().folder; }
};

TEST_P(Text, EncodingGivesThePromptIdsAndDecodingTheTextBack) {
  const Model model = Model::open(folder());
  ASSERT_TRUE(model.has_tokenizer());
  for (const auto& prompt : expected().at("prompts")) {
    const std::string text = prompt.at("text");
    EXPECT_EQ(model.tokenizer().encode(text), ids(prompt.at("ids"))) << text;
    EXPECT_EQ(model.tokenizer().decode(ids(prompt.at("ids"))), text);  // the non-ASCII prompt included
  }
}

TEST_P(Text, GreedyTextIsTheExpectationsAndThePiecesAddUpToIt) {
  Model model = Model::open(folder());
  for (const auto& prompt : expected().at("prompts")) {
    const auto& greedy = prompt.at("greedy");
    GenerateOptions options;
    options.max_new_tokens = greedy.at("max_new_tokens").get<int>();
    std::string streamed;
    const auto result = model.generate(prompt.at("text").get<std::string>(), options,
                                       [&](int64_t, std::string_view piece) {
                                         expect_whole_characters(std::string(piece));
                                         streamed += piece;
                                       });
    EXPECT_EQ(result.prompt_ids, ids(prompt.at("ids")));
    EXPECT_EQ(result.ids, ids(greedy.at("ids")));
    EXPECT_EQ(result.text, greedy.at("text").get<std::string>());
    EXPECT_EQ(streamed, result.text);
  }
}

TEST_P(Text, StreamingNeverSplitsACharacterOfTheNonAsciiPrompt) {
  const Model model = Model::open(folder());
  for (const auto& prompt : expected().at("prompts")) {
    TextStream stream = model.tokenizer().stream();
    std::string pieces;
    for (const int64_t id : ids(prompt.at("ids"))) {
      const std::string piece = stream.push(id);
      expect_whole_characters(piece);
      pieces += piece;
    }
    pieces += stream.finish();
    EXPECT_EQ(pieces, prompt.at("text").get<std::string>());
  }
}

TEST_P(Text, AStreamEndingInsideACharacterFinishesWithWhatDecodeGives) {
  const Model model = Model::open(folder());
  const std::vector<int64_t> half_of_tokyo{30266};  // the first of the three bytes of U+6771
  TextStream stream = model.tokenizer().stream();
  EXPECT_EQ(stream.push(half_of_tokyo[0]), "");
  EXPECT_EQ(stream.finish(), model.tokenizer().decode(half_of_tokyo));
  EXPECT_EQ(model.tokenizer().decode(half_of_tokyo), "\xEF\xBF\xBD");  // U+FFFD
}

TEST_P(Text, APaddedBatchFromTextGivesEachRowItsIdsAndText) {
  Model model = Model::open(folder());
  const auto& batch = expected().at("padded_batch");
  GenerateOptions options;
  options.max_new_tokens = batch.at("max_new_tokens").get<int>();
  const auto results = model.generate(batch.at("prompts").get<std::vector<std::string>>(), options);
  ASSERT_EQ(results.size(), 2u);
  for (size_t row = 0; row < results.size(); ++row) {
    EXPECT_EQ(results[row].ids, ids(batch.at("ids")[row]));
    EXPECT_EQ(results[row].text, model.tokenizer().decode(results[row].ids));
  }
}

TEST_P(Text, TheTokenizerFilesAreCheckedLikeTheGraphs) {
  const auto missing = testing::copy_of(GetParam().folder, "tokenizer_missing");
  std::filesystem::remove(missing / "tokenizer.json");
  EXPECT_THROW(Model::open(missing), MissingFileError);
  ModelOptions ids_only;
  ids_only.tokenizer = false;  // without text, the tokenizer's files are not needed
  EXPECT_NO_THROW(Model::open(missing, ids_only));
  const auto changed = testing::copy_of(GetParam().folder, "tokenizer_changed");
  testing::flip_byte(changed / "tokenizer_config.json", 10);
  EXPECT_THROW(Model::open(changed), ChangedFileError);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Text, ::testing::ValuesIn(testing::fixture_names()));

}  // namespace
}  // namespace gpt2_onnx
