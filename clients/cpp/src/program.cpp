#include "program.hpp"

#include <onnxruntime_cxx_api.h>

#include <iostream>

#include "export_files.hpp"
#include "kv_runner.hpp"

namespace gpt2 {

int parse_int(const std::string& text, const std::string& option, int minimum) {
  size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::logic_error&) {  // std::invalid_argument, std::out_of_range
    used = 0;
  }
  if (used == text.size() && !text.empty() && value >= minimum) return value;
  const std::string range = minimum == INT_MIN ? "" : " >= " + std::to_string(minimum);
  throw UsageError(option + " needs an integer" + range + ", not '" + text + "'");
}

int run_program(const std::string& usage, const std::function<int()>& body) {
  // GetApi returns null for a library older than the headers.
  const OrtApi* api = OrtGetApiBase()->GetApi(ORT_API_VERSION);
  if (api == nullptr) {
    std::cerr << "error: ONNX Runtime " << OrtGetApiBase()->GetVersionString() << " is older than its headers (C API "
              << ORT_API_VERSION << "); use a library at least as new as the headers\n";
    return 3;
  }
  Ort::InitApi(api);
  try {
    return body();
  } catch (const UsageError& e) {
    std::cerr << "usage: " << usage << "\nerror: " << e.what() << "\n";
    return 2;
  } catch (const ExportFolderError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const ProviderError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 3;
  } catch (const Ort::Exception& e) {
    std::cerr << "error: ONNX Runtime: " << e.what() << "\n";
    return 3;
  } catch (const std::exception& e) {  // out of memory and other failures outside the checks
    std::cerr << "error: " << e.what() << "\n";
    return 3;
  }
}

}  // namespace gpt2
