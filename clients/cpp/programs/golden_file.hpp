// golden.json: prompts with the source model's greedy continuation and last-position top-5 logits (written by
// `gpt2-onnx export`; the rule is in the file and in docs/verification.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace gpt2_onnx::programs {

struct GoldenCase {
  std::string prompt;
  std::vector<int64_t> input_ids;     // the prompt's token ids
  std::vector<int64_t> greedy_ids;    // greedy continuation, end-of-text not treated specially
  std::vector<int64_t> top5_ids;      // of the prompt's last-position logits, most likely first
  std::vector<double> top5_logits;    // fp32 exports: the float64 source model's values
  std::vector<float> greedy_margins;  // per step: chosen logit minus the runner-up's (empty in older files)
  // This case's limit on |logits - expected|: fp32 exports set it by their rule (a small factor of the float32 source
  // model's own error from float64 over the case's positions, plus a floor scaled by the logits' magnitude), since a
  // trained checkpoint's logits and their rounding run to a hundred times a random one's. Absent: the file's.
  std::optional<double> logits_atol;
};

struct Golden {
  std::vector<GoldenCase> cases;
  double logits_atol = 0.0;  // the limit of cases without their own
  double atol_for(const GoldenCase& c) const { return c.logits_atol.value_or(logits_atol); }
};

// Throws MissingFileError (no such file) or ManifestError (not a golden file this program reads).
Golden read_golden(const std::filesystem::path& file);

}  // namespace gpt2_onnx::programs
