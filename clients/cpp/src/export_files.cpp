#include "export_files.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <cstdint>
#include <set>

namespace gpt2 {
namespace {

using nlohmann::json;

constexpr int kManifestSchema = 1;  // the newest manifest.json schema this sample reads
constexpr int kGoldenSchema = 1;

json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw ExportFolderError("cannot open " + path.string());
  try {
    return json::parse(in);
  } catch (const json::parse_error& e) {
    throw ExportFolderError(path.string() + " is not valid JSON: " + e.what());
  }
}

// A manifest names files inside its folder only; refuse "../x", "/x" and "a/b".
std::string plain_file_name(const std::string& name, const std::string& where) {
  if (name.empty() || name == "." || name == ".." || name.find_first_of("/\\") != std::string::npos ||
      name.find('\0') != std::string::npos) {
    throw ExportFolderError(where + ": '" + name + "' is not a plain file name inside the export folder");
  }
  return name;
}

std::vector<TensorSpec> tensor_specs(const json& entries) {
  std::vector<TensorSpec> specs;
  for (const auto& entry : entries) {
    specs.push_back({entry.at("name").get<std::string>(), entry.at("dtype").get<std::string>()});
  }
  return specs;
}

GraphSpec graph_spec(const json& graphs, const std::string& kind, const std::filesystem::path& path) {
  const json& entry = graphs.at(kind);
  return {plain_file_name(entry.at("file").get<std::string>(), path.string() + " graphs." + kind + ".file"),
          tensor_specs(entry.at("inputs")), tensor_specs(entry.at("outputs"))};
}

std::vector<WeightEntry> weights_index(const json& entries) {
  std::vector<WeightEntry> index;
  for (const auto& entry : entries) {
    index.push_back({entry.at("name").get<std::string>(), entry.at("dtype").get<std::string>(),
                     entry.at("shape").get<std::vector<int64_t>>(), entry.at("offset").get<uint64_t>(),
                     entry.at("length").get<uint64_t>()});
  }
  return index;
}

std::optional<int64_t> optional_id(const json& tokens, const char* key) {
  if (!tokens.contains(key) || tokens.at(key).is_null()) return std::nullopt;
  return tokens.at(key).get<int64_t>();
}

}  // namespace

Manifest read_manifest(const std::filesystem::path& folder) {
  const auto path = folder / "manifest.json";
  if (!std::filesystem::is_regular_file(path)) {
    throw ExportFolderError("'" + folder.string() + "' has no manifest.json; is it a gpt2-onnx export folder?");
  }
  const json data = read_json(path);
  if (data.value("format", "") != "gpt2-onnx") {
    throw ExportFolderError(path.string() + " is not a gpt2-onnx manifest");
  }
  if (data.at("schema_version").get<int>() > kManifestSchema) {
    throw ExportFolderError(path.string() + " has a newer schema than this sample reads; update the sample");
  }
  try {
    const json& model = data.at("model");
    Manifest m;
    m.n_layer = model.at("n_layer").get<int64_t>();
    m.n_head = model.at("n_head").get<int64_t>();
    m.n_embd = model.at("n_embd").get<int64_t>();
    m.head_dim = model.at("head_dim").get<int64_t>();
    m.vocab_size = model.at("vocab_size").get<int64_t>();
    m.n_positions = model.at("n_positions").get<int64_t>();
    m.opset = data.at("opset").get<int64_t>();
    m.min_onnxruntime = data.value("min_onnxruntime", "");
    m.precision = data.value("precision", "float32");
    m.weights_file = plain_file_name(data.at("weights_file").get<std::string>(), path.string() + " weights_file");
    if (data.contains("weights_index")) {
      m.weights_index = weights_index(data.at("weights_index"));
      const json& files = data.at("files");
      if (files.contains(m.weights_file)) {
        try {
          check_weights_index(m.weights_index, files.at(m.weights_file).at("size").get<uint64_t>());
        } catch (const ExportFolderError& e) {
          throw ExportFolderError(path.string() + " " + e.what());
        }
      }
    }
    const json tokens = data.value("tokens", json::object());
    m.eos_token_id = optional_id(tokens, "eos_token_id");
    m.pad_token_id = optional_id(tokens, "pad_token_id");
    m.prefill = graph_spec(data.at("graphs"), "prefill", path);
    m.decode = graph_spec(data.at("graphs"), "decode", path);
    return m;
  } catch (const json::exception& e) {
    throw ExportFolderError(path.string() + " is malformed: " + e.what());
  }
}

size_t dtype_size(const std::string& dtype) {
  if (dtype == "float32" || dtype == "int32") return 4;
  if (dtype == "float16") return 2;
  if (dtype == "uint8" || dtype == "int8") return 1;
  if (dtype == "int64") return 8;
  return 0;
}

void check_weights_index(const std::vector<WeightEntry>& index, uint64_t file_size) {
  std::set<std::string> names;
  uint64_t end_of_previous = 0;
  for (const auto& entry : index) {
    const std::string tensor = "weights_index: tensor '" + entry.name + "'";
    const size_t element = dtype_size(entry.dtype);
    if (element == 0) {
      throw ExportFolderError(tensor + " has dtype '" + entry.dtype + "', which this sample cannot map");
    }
    uint64_t elements = 1;
    for (const int64_t dim : entry.shape) {
      if (dim < 0) throw ExportFolderError(tensor + " has a negative dimension");
      if (dim > 0 && elements > UINT64_MAX / static_cast<uint64_t>(dim)) {
        throw ExportFolderError(tensor + " has more elements than can be counted");
      }
      elements *= static_cast<uint64_t>(dim);
    }
    if (elements * element != entry.length) {
      throw ExportFolderError(tensor + " does not fill its " + std::to_string(entry.length) + " bytes");
    }
    if (entry.offset > file_size || entry.length > file_size - entry.offset) {
      throw ExportFolderError(tensor + " lies beyond the end of the weights file");
    }
    if (entry.offset < end_of_previous) {
      throw ExportFolderError(tensor + " overlaps the tensor before it (or the index is not in file order)");
    }
    if (!names.insert(entry.name).second) throw ExportFolderError(tensor + " is listed twice");
    end_of_previous = entry.offset + entry.length;
  }
}

Golden read_golden(const std::filesystem::path& file) {
  if (!std::filesystem::is_regular_file(file)) throw ExportFolderError("no golden file " + file.string());
  const json data = read_json(file);
  if (data.value("format", "") != "gpt2-onnx-golden" || data.at("schema_version").get<int>() > kGoldenSchema) {
    throw ExportFolderError(file.string() + " is not a golden file this sample reads");
  }
  try {
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
  } catch (const json::exception& e) {
    throw ExportFolderError(file.string() + " is malformed: " + e.what());
  }
}

}  // namespace gpt2
