#include "file_check.hpp"

#include <system_error>

#include "gpt2_onnx/errors.hpp"
#include "sha256.hpp"

namespace gpt2_onnx::detail {

void check_files(const std::filesystem::path& folder, const Manifest& manifest, const std::vector<std::string>& names,
                 FileCheck check) {
  const std::string where = folder.string();
  for (const auto& name : names) {
    const auto record = manifest.files.find(name);
    if (record == manifest.files.end()) throw MissingFileError(where + ": the manifest lists no " + name);
    const auto path = folder / name;
    std::error_code error;
    const auto size = std::filesystem::file_size(path, error);
    if (error) {
      throw MissingFileError(where + ": " + name +
                             " is missing (the manifest lists it; copy the whole export folder)");
    }
    if (size != record->second.size) {
      throw ChangedFileError(where + ": " + name + " has " + std::to_string(size) + " bytes, the manifest states " +
                             std::to_string(record->second.size) + ": the file was changed or truncated");
    }
    if (check != FileCheck::sha256) continue;
    const std::string digest = sha256_of_file(path);
    if (digest != record->second.sha256) {
      throw ChangedFileError(where + ": " + name + " has sha256 " + digest + ", the manifest states " +
                             record->second.sha256 + ": the file was changed");
    }
  }
}

}  // namespace gpt2_onnx::detail
