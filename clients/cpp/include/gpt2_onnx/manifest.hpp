// manifest.json: an export folder's I/O contract and inventory (docs/deploying.md), read into plain structs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpt2_onnx {

struct TensorSpec {
  std::string name;
  std::string dtype;  // "int64", "float32" or "float16"
};

struct GraphSpec {
  std::string file;                 // a plain file name inside the export folder
  std::vector<TensorSpec> inputs;   // in graph order: input_ids, attention_mask, position_ids[, past...]
  std::vector<TensorSpec> outputs;  // in graph order: logits, present...
};

// Where one tensor lies in the weights file (manifest.json's weights_index).
struct WeightEntry {
  std::string name;
  std::string dtype;  // "float32", "float16", "uint8", "int8", "int32" or "int64"
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // bytes from the start of the weights file
  uint64_t length = 0;  // bytes: the product of shape x the dtype's size
};

// What the manifest states of one file of the folder.
struct FileRecord {
  uint64_t size = 0;
  std::string sha256;  // 64 lower-case hex digits
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
  std::map<std::string, FileRecord> files;  // every file of the folder but manifest.json
  std::optional<int64_t> eos_token_id;
  std::optional<int64_t> pad_token_id;
  GraphSpec prefill;  // prompt -> logits of the last position (B, 1, V) and the KV cache
  GraphSpec decode;   // new tokens + past KV (may be empty) -> logits (B, N, V) and the grown KV cache
};

// Reads FOLDER/manifest.json. Throws NotAnExportError (no manifest, another format) or ManifestError.
Manifest read_manifest(const std::filesystem::path& folder);

// Parses a manifest's JSON text; `where` names the folder in messages.
Manifest parse_manifest(const std::string& text, const std::string& where);

// Bytes per element of a weights_index dtype; 0 for a dtype this library does not know.
size_t dtype_size(const std::string& dtype);

// Refuses (ManifestError) an index with an unknown dtype, a length that does not fit the shape, a name given twice,
// two tensors that overlap, or a tensor beyond file_size. Expects file order (ascending offsets).
void check_weights_index(const std::vector<WeightEntry>& index, uint64_t file_size);

}  // namespace gpt2_onnx
