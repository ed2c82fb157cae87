// parse_manifest (gpt2_onnx/manifest.hpp): what it reads from the committed fixture, and what it refuses.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "gpt2_onnx/errors.hpp"
#include "gpt2_onnx/manifest.hpp"

namespace gpt2_onnx {
namespace {

const std::filesystem::path kFixture = std::filesystem::path(GPT2_ONNX_FIXTURES_DIR) / "pydocs-micro-fp32";

nlohmann::json fixture_manifest() {
  std::ifstream in(kFixture / "manifest.json");
  return nlohmann::json::parse(in);
}

// The fixture's manifest with one change, parsed.
template <typename Change>
Manifest parse_changed(Change&& change) {
  nlohmann::json data = fixture_manifest();
  change(data);
  return parse_manifest(data.dump(), "changed");
}

TEST(Manifest, ReadsTheFixturesContract) {
  const Manifest m = read_manifest(kFixture);
  EXPECT_EQ(m.n_layer, 2);
  EXPECT_EQ(m.vocab_size, 50257);
  EXPECT_EQ(m.n_positions, 128);
  EXPECT_EQ(m.precision, "float32");
  EXPECT_EQ(m.eos_token_id, 50256);
  EXPECT_FALSE(m.pad_token_id.has_value());
  EXPECT_EQ(m.prefill.file, "prefill.onnx");
  EXPECT_EQ(m.decode.inputs.size(), 3u + 2u * 2u);  // token inputs and a key and a value per layer
  EXPECT_EQ(m.files.at("tokenizer.json").size, 1555365u);
  EXPECT_EQ(m.files.at("tokenizer.json").sha256.size(), 64u);
  EXPECT_FALSE(m.weights_index.empty());
}

TEST(Manifest, RefusesWhatIsNotAGpt2OnnxManifest) {
  EXPECT_THROW(parse_manifest("not json", "x"), NotAnExportError);
  EXPECT_THROW(parse_manifest("[1, 2]", "x"), NotAnExportError);
  EXPECT_THROW(parse_changed([](auto& d) { d["format"] = "something-else"; }), NotAnExportError);
  EXPECT_THROW(read_manifest(kFixture / "no-such-folder"), NotAnExportError);
}

TEST(Manifest, RefusesAManifestItCannotRun) {
  EXPECT_THROW(parse_changed([](auto& d) { d["schema_version"] = 2; }), ManifestError);
  EXPECT_THROW(parse_changed([](auto& d) { d["weights_file"] = "../model.onnx.data"; }), ManifestError);
  EXPECT_THROW(parse_changed([](auto& d) { d["graphs"]["decode"]["file"] = "/tmp/decode.onnx"; }), ManifestError);
  EXPECT_THROW(parse_changed([](auto& d) { d["model"]["n_layer"] = 0; }), ManifestError);
  EXPECT_THROW(parse_changed([](auto& d) { d["files"]["tokenizer.json"]["sha256"] = "abc"; }), ManifestError);
  EXPECT_THROW(parse_changed([](auto& d) { d["model"].erase("vocab_size"); }), ManifestError);
  EXPECT_THROW(parse_changed([](auto& d) { d["weights_index"][1]["offset"] = 0; }), ManifestError);  // overlap
}

}  // namespace
}  // namespace gpt2_onnx
