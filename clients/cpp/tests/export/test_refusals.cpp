// What Model::open and generation refuse, each with its own error type: a folder that is not an export (missing,
// foreign), a file missing, changed or truncated, options out of range, a prompt beyond the context, an absent
// CUDA provider (never a CPU run instead).
#include <gtest/gtest.h>

#include <fstream>

#include "fixture_data.hpp"
#include "gpt2_onnx/gpt2_onnx.hpp"

namespace gpt2_onnx {
namespace {

const std::string kFixture = "pydocs-micro-fp32";

ModelOptions ids_only() {
  ModelOptions options;
  options.tokenizer = false;
  return options;
}

// `call` throws E with a message containing `part`.
template <typename E, typename Call>
void expect_error(Call&& call, const std::string& part) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one saying '" << part << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(Refusals, AFolderThatIsNoExport) {
  expect_error<NotAnExportError>([] { Model::open(testing::kFixtures / "no-such-export"); }, "no manifest.json");
  const auto foreign = std::filesystem::temp_directory_path() / "gpt2_onnx_test_foreign";
  std::filesystem::create_directories(foreign);
  std::ofstream(foreign / "manifest.json") << R"({"format": "some-other-tool", "schema_version": 1})";
  expect_error<NotAnExportError>([&] { Model::open(foreign); }, "not a gpt2-onnx manifest");
}

TEST(Refusals, AMissingFile) {
  const auto copy = testing::copy_of(kFixture, "missing");
  std::filesystem::remove(copy / "decode.onnx");
  expect_error<MissingFileError>([&] { Model::open(copy, ids_only()); }, "decode.onnx is missing");
}

TEST(Refusals, AChangedFile) {
  const auto copy = testing::copy_of(kFixture, "changed");
  testing::flip_byte(copy / "model.onnx.data", 1000);
  expect_error<ChangedFileError>([&] { Model::open(copy, ids_only()); }, "model.onnx.data has sha256");
  ModelOptions sizes = ids_only();  // the size alone cannot see it
  sizes.file_check = FileCheck::size;
  EXPECT_NO_THROW(Model::open(copy, sizes));
}

TEST(Refusals, ATruncatedFile) {
  const auto copy = testing::copy_of(kFixture, "truncated");
  std::filesystem::resize_file(copy / "prefill.onnx", 100);
  expect_error<ChangedFileError>([&] { Model::open(copy, ids_only()); }, "prefill.onnx has 100 bytes");
}

TEST(Refusals, ModelOptionsOutOfRange) {
  ModelOptions options = ids_only();
  options.provider = "tpu";
  expect_error<OptionsError>([&] { Model::open(testing::kFixtures / kFixture, options); }, "unknown provider");
  options = ids_only();
  options.intra_op_threads = -1;
  EXPECT_THROW(Model::open(testing::kFixtures / kFixture, options), OptionsError);
}

TEST(Refusals, GenerationOptionsOutOfRange) {
  Model model = Model::open(testing::kFixtures / kFixture, ids_only());
  const std::vector<int64_t> prompt{464, 1441};
  const auto refused = [&](GenerateOptions options, const std::string& part) {
    expect_error<OptionsError>([&] { model.generate(prompt, options); }, part);
  };
  GenerateOptions o;
  o.max_new_tokens = 0;
  refused(o, "max_new_tokens must be an integer >= 1");
  o = {};
  o.temperature = -0.5;
  refused(o, "temperature must be >= 0");
  o = {};
  o.top_p = 0;
  refused(o, "top_p must be in (0, 1]");
  o = {};
  o.top_k = -2;
  refused(o, "top_k must be an integer >= 0");
  expect_error<OptionsError>([&] { model.generate(std::vector<int64_t>{}, {}); }, "the prompt is empty");
  expect_error<OptionsError>([&] { model.generate(std::vector<int64_t>{50257}, {}); }, "outside the vocabulary");
}

TEST(Refusals, APromptBeyondTheContext) {
  Model model = Model::open(testing::kFixtures / kFixture, ids_only());
  const std::vector<int64_t> long_prompt(120, 220);  // + 16 new tokens > 128 positions
  expect_error<PromptTooLongError>([&] { model.generate(long_prompt, {}); }, "more than the model's context of 128");
  GenerateOptions fits;
  fits.max_new_tokens = 8;
  EXPECT_EQ(model.generate(long_prompt, fits).ids.size(), 8u);
}

TEST(Refusals, CudaWhereTheProviderIsAbsent) {
  ModelOptions options = ids_only();
  options.provider = "cuda";
  try {
    Model::open(testing::kFixtures / kFixture, options);
    GTEST_SKIP() << "this ONNX Runtime has a CUDA provider that runs here";
  } catch (const ProviderError& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA provider"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpt2_onnx
