#include "gpt2_onnx/manifest.hpp"

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "gpt2_onnx/errors.hpp"

namespace gpt2_onnx {
namespace {

using nlohmann::json;

constexpr int kManifestSchema = 1;  // the manifest.json schema this library reads
constexpr const char* kFormat = "gpt2-onnx";

// A manifest names files inside its folder only; refuse "../x", "/x" and "a/b".
std::string plain_file_name(const std::string& name, const std::string& where) {
  if (name.empty() || name == "." || name == ".." || name.find_first_of("/\\") != std::string::npos ||
      name.find('\0') != std::string::npos) {
    throw ManifestError(where + ": '" + name + "' is not a plain file name inside the export folder");
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

GraphSpec graph_spec(const json& graphs, const std::string& kind, const std::string& where) {
  const json& entry = graphs.at(kind);
  return {plain_file_name(entry.at("file").get<std::string>(), where + " graphs." + kind + ".file"),
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

std::map<std::string, FileRecord> file_records(const json& files, const std::string& where) {
  std::map<std::string, FileRecord> records;
  for (const auto& [name, record] : files.items()) {
    plain_file_name(name, where + " files");
    const std::string sha = record.at("sha256").get<std::string>();
    if (sha.size() != 64 || sha.find_first_not_of("0123456789abcdef") != std::string::npos) {
      throw ManifestError(where + ": the sha256 of " + name + " is not 64 lower-case hex digits");
    }
    records[name] = {record.at("size").get<uint64_t>(), sha};
  }
  return records;
}

std::optional<int64_t> optional_id(const json& tokens, const char* key) {
  if (!tokens.contains(key) || tokens.at(key).is_null()) return std::nullopt;
  return tokens.at(key).get<int64_t>();
}

int64_t positive(const json& model, const char* key, const std::string& where) {
  const auto value = model.at(key).get<int64_t>();
  if (value <= 0) throw ManifestError(where + ": model." + key + " is not a positive integer");
  return value;
}

Manifest manifest_from(const json& data, const std::string& where) {
  const json& model = data.at("model");
  Manifest m;
  m.n_layer = positive(model, "n_layer", where);
  m.n_head = positive(model, "n_head", where);
  m.n_embd = positive(model, "n_embd", where);
  m.head_dim = positive(model, "head_dim", where);
  m.vocab_size = positive(model, "vocab_size", where);
  m.n_positions = positive(model, "n_positions", where);
  m.opset = data.at("opset").get<int64_t>();
  m.min_onnxruntime = data.value("min_onnxruntime", "");
  m.precision = data.value("precision", "float32");
  m.weights_file = plain_file_name(data.at("weights_file").get<std::string>(), where + " weights_file");
  m.files = file_records(data.value("files", json::object()), where);
  if (data.contains("weights_index")) {
    m.weights_index = weights_index(data.at("weights_index"));
    const auto weights = m.files.find(m.weights_file);
    if (weights != m.files.end()) {
      try {
        check_weights_index(m.weights_index, weights->second.size);
      } catch (const ManifestError& e) {
        throw ManifestError(where + ": " + e.what());
      }
    }
  }
  const json tokens = data.value("tokens", json::object());
  m.eos_token_id = optional_id(tokens, "eos_token_id");
  m.pad_token_id = optional_id(tokens, "pad_token_id");
  m.prefill = graph_spec(data.at("graphs"), "prefill", where);
  m.decode = graph_spec(data.at("graphs"), "decode", where);
  return m;
}

}  // namespace

Manifest parse_manifest(const std::string& text, const std::string& where) {
  json data;
  try {
    data = json::parse(text);
  } catch (const json::parse_error& e) {
    throw NotAnExportError(where + ": manifest.json is not JSON (" + e.what() + ")");
  }
  if (!data.is_object() || data.value("format", "") != kFormat) {
    throw NotAnExportError(where + ": manifest.json is not a gpt2-onnx manifest (format is not \"gpt2-onnx\")");
  }
  try {
    const int schema = data.at("schema_version").get<int>();
    if (schema != kManifestSchema) {
      throw ManifestError(where + ": manifest schema_version " + std::to_string(schema) + "; this library reads " +
                          std::to_string(kManifestSchema));
    }
    return manifest_from(data, where);
  } catch (const json::exception& e) {
    throw ManifestError(where + ": manifest.json is malformed: " + e.what());
  }
}

Manifest read_manifest(const std::filesystem::path& folder) {
  const auto path = folder / "manifest.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw NotAnExportError("'" + folder.string() + "' has no manifest.json; this is not a gpt2-onnx export folder");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse_manifest(text.str(), folder.string());
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
    if (element == 0) throw ManifestError(tensor + " has dtype '" + entry.dtype + "', which cannot be mapped");
    uint64_t elements = 1;
    for (const int64_t dim : entry.shape) {
      if (dim < 0) throw ManifestError(tensor + " has a negative dimension");
      if (dim > 0 && elements > UINT64_MAX / static_cast<uint64_t>(dim)) {
        throw ManifestError(tensor + " has more elements than can be counted");
      }
      elements *= static_cast<uint64_t>(dim);
    }
    if (elements > UINT64_MAX / element || elements * element != entry.length) {
      throw ManifestError(tensor + " does not fill its " + std::to_string(entry.length) + " bytes");
    }
    if (entry.offset > file_size || entry.length > file_size - entry.offset) {
      throw ManifestError(tensor + " lies beyond the end of the weights file");
    }
    if (entry.offset < end_of_previous) {
      throw ManifestError(tensor + " overlaps the tensor before it (or the index is not in file order)");
    }
    if (!names.insert(entry.name).second) throw ManifestError(tensor + " is listed twice");
    end_of_previous = entry.offset + entry.length;
  }
}

}  // namespace gpt2_onnx
