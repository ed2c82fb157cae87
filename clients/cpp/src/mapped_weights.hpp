// Weights in memory once: the export's weights file mapped read-only, and each of its tensors (as manifest.json's
// weights_index states them) handed to both sessions as an initializer that points into the map.
//
// Left to itself, ONNX Runtime maps the file once per session and prepacks every MatMul weight into a private copy
// per session: GPT-2-small fp32 then takes about 2.7 × its weights' bytes with both sessions loaded. With one map,
// the weights' pages are resident once; ExportSessions (sessions.hpp) then either turns prepacking off, or prepacks once into a
// container both sessions share and releases the map's pages (see WeightLoading in gpt2_onnx/options.hpp).
#pragma once

#include <onnxruntime_cxx_api.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gpt2_onnx/manifest.hpp"

namespace gpt2_onnx::detail {

// False where this library has no mapping code (Windows): ONNX Runtime then loads the weights per session.
bool weight_map_supported();

class MappedWeights {
 public:
  // Maps `file` and wraps each tensor of `index` (checked against the file's real size) without copying it.
  MappedWeights(const std::filesystem::path& file, const std::vector<WeightEntry>& index);
  ~MappedWeights();
  MappedWeights(const MappedWeights&) = delete;
  MappedWeights& operator=(const MappedWeights&) = delete;

  // Every tensor as an initializer of the sessions created with `options` (the map must outlive them); with
  // prepacking false, prepacking is also turned off for them.
  void add_to(Ort::SessionOptions& options, bool prepacking) const;

  // Drops the map's pages from this process's resident memory (they stay in the page cache; any tensor read again
  // pages back in). For once the sessions have prepacked their copies and no longer read most of the map.
  void release_pages() const;

  size_t tensor_count() const { return values_.size(); }
  uint64_t mapped_bytes() const { return size_; }

 private:
  void* data_ = nullptr;
  uint64_t size_ = 0;
  std::vector<std::string> names_;
  std::vector<Ort::Value> values_;  // views into the map, same order as names_
};

}  // namespace gpt2_onnx::detail
