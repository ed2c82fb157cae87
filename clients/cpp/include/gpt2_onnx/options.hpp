// What a caller chooses: how a model is opened (ModelOptions) and how one generation runs (GenerateOptions).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gpt2_onnx {

// How the two sessions get their weights on the CPU (a CUDA session copies them to the GPU either way, so there
// ONNX Runtime always loads them itself). GPT-2-small fp32 figures: docs/deploying.md.
enum class WeightLoading {
  // One read-only map of the weights file for both sessions; each matrix prepacked once into a container both
  // sessions use; then the map's pages are released from the process. Prepacked speed, weights in memory ~once.
  shared_prepacked,
  // One map for both sessions, prepacking off: no packed copies at all; slower. float32 only (MatMulNBits needs its
  // packed layout), so quantized exports get shared_prepacked instead.
  shared_unpacked,
  // ONNX Runtime loads and prepacks the weights for each session: its default, about 2.7x the weights' bytes.
  per_session,
};

// "shared", "shared-unpacked", "per-session".
const char* to_string(WeightLoading loading);
// The inverse of to_string; nullopt for any other name.
std::optional<WeightLoading> weight_loading_named(const std::string& name);

// How the folder's files are checked against the manifest before anything reads them.
enum class FileCheck {
  sha256,  // size and sha256 (the default; reads each file once more, ~1-2 s per GB)
  size,    // size only
};

struct ModelOptions {
  std::string provider = "cpu";  // "cpu" or "cuda"; never silently replaced by another
  int device_id = 0;             // CUDA device
  int intra_op_threads = 0;      // 0: ONNX Runtime's default
  int inter_op_threads = 0;      // 0: ONNX Runtime's default
  WeightLoading weights = WeightLoading::shared_prepacked;
  FileCheck file_check = FileCheck::sha256;
  // Open the folder's tokenizer (genai_config.json, tokenizer.json, tokenizer_config.json) where this build has the
  // text layer (text_available()); false: ids only, and those files are not read.
  bool tokenizer = true;
};

// One generation. Greedy unless do_sample is set, or (do_sample unset) any of temperature, top_k, top_p or seed is
// given; temperature 0 is greedy too. The sampling procedure is the JavaScript client's (sampling.hpp).
struct GenerateOptions {
  int max_new_tokens = 16;   // >= 1
  bool stop_at_eos = true;   // end-of-text (manifest tokens.eos_token_id) ends a row; false: always max_new_tokens
  std::optional<bool> do_sample;
  std::optional<double> temperature;  // >= 0, default 1
  std::optional<int> top_k;           // >= 0, 0 = off (the default)
  std::optional<double> top_p;        // in (0, 1], default 1
  std::optional<uint64_t> seed;       // every row's SplitMix64 initial state; unset: one fresh random seed
};

}  // namespace gpt2_onnx
