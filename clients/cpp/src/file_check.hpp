// The folder's files against the manifest (size, then sha256) before anything reads them. Internal.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "gpt2_onnx/manifest.hpp"
#include "gpt2_onnx/options.hpp"

namespace gpt2_onnx::detail {

// Each named file must be listed in the manifest and present with the stated size (and sha256, with
// FileCheck::sha256). Throws MissingFileError or ChangedFileError naming the folder and the file.
void check_files(const std::filesystem::path& folder, const Manifest& manifest, const std::vector<std::string>& names,
                 FileCheck check);

}  // namespace gpt2_onnx::detail
