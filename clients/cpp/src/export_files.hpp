// The two JSON files of an export folder that a consumer reads: manifest.json (the I/O contract) and golden.json
// (prompts with the source model's greedy continuation and last-position top-5 logits).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpt2 {

// An export folder or one of its files is missing, malformed or not one this sample reads.
class ExportFolderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TensorSpec {
  std::string name;
  std::string dtype;  // "int64", "float32" or "float16"
};

// Where one tensor lies in the weights file (manifest.json's weights_index).
struct WeightEntry {
  std::string name;
  std::string dtype;            // "float32", "float16", "uint8", "int8", "int32" or "int64"
  std::vector<int64_t> shape;
  uint64_t offset = 0;          // bytes from the start of the weights file
  uint64_t length = 0;          // bytes: the product of shape × the dtype's size
};

struct GraphSpec {
  std::string file;                 // a plain file name inside the export folder
  std::vector<TensorSpec> inputs;   // in graph order: input_ids, attention_mask, position_ids[, past…]
  std::vector<TensorSpec> outputs;  // in graph order: logits, present…
};

struct Manifest {
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_embd = 0;
  int64_t head_dim = 0;  // n_embd / n_head
  int64_t vocab_size = 0;
  int64_t n_positions = 0;  // longest sequence (prompt + generated) the model covers
  int64_t opset = 0;
  std::string min_onnxruntime;  // oldest ONNX Runtime known to load the graphs, "1.16.0"
  std::string precision;        // "float32", "float16", "int8" or "int4"
  std::string weights_file;     // the one external-data file both graphs read, inside the folder
  std::vector<WeightEntry> weights_index;  // its tensors in file order; empty in exports made before it existed
  std::optional<int64_t> eos_token_id;
  std::optional<int64_t> pad_token_id;
  GraphSpec prefill;  // prompt → logits of the last position (B, 1, V) and the KV cache
  GraphSpec decode;   // new tokens + past KV (may be empty) → logits (B, N, V) and the grown KV cache
};

struct GoldenCase {
  std::string prompt;
  std::vector<int64_t> input_ids;   // the prompt's token ids
  std::vector<int64_t> greedy_ids;  // greedy continuation, end-of-text not treated specially
  std::vector<int64_t> top5_ids;    // of the prompt's last-position logits, most likely first
  std::vector<double> top5_logits;   // fp32 exports: the float64 source model's values
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

Manifest read_manifest(const std::filesystem::path& folder);

// Bytes per element of a weights_index dtype; 0 for a dtype this sample does not know.
size_t dtype_size(const std::string& dtype);

// Refuses (ExportFolderError) an index with an unknown dtype, a length that does not fit the shape, a name given
// twice, two tensors that overlap, or a tensor beyond file_size. Expects file order (ascending offsets).
void check_weights_index(const std::vector<WeightEntry>& index, uint64_t file_size);
Golden read_golden(const std::filesystem::path& file);

}  // namespace gpt2
