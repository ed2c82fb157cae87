#include "golden_file.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

#include "gpt2_onnx/errors.hpp"

namespace gpt2_onnx::programs {

namespace {
constexpr int kGoldenSchema = 1;
}

Golden read_golden(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw MissingFileError("no golden file " + file.string());
  nlohmann::json data;
  try {
    data = nlohmann::json::parse(in);
    if (data.value("format", "") != "gpt2-onnx-golden" || data.at("schema_version").get<int>() > kGoldenSchema) {
      throw ManifestError(file.string() + " is not a golden file this program reads");
    }
    Golden golden;
    golden.logits_atol = data.at("logits_atol").get<double>();
    for (const auto& c : data.at("cases")) {
      std::optional<double> atol;
      if (c.contains("logits_atol")) atol = c.at("logits_atol").get<double>();
      golden.cases.push_back({c.at("prompt").get<std::string>(), c.at("input_ids").get<std::vector<int64_t>>(),
                              c.at("greedy_ids").get<std::vector<int64_t>>(),
                              c.at("top5_ids").get<std::vector<int64_t>>(),
                              c.at("top5_logits").get<std::vector<double>>(),
                              c.value("greedy_margins", std::vector<float>{}), atol});
    }
    return golden;
  } catch (const nlohmann::json::exception& e) {
    throw ManifestError(file.string() + " is malformed: " + e.what());
  }
}

}  // namespace gpt2_onnx::programs
