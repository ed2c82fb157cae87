#include "program.hpp"

#include <cmath>
#include <iostream>

#include "gpt2_onnx/errors.hpp"

namespace gpt2_onnx::programs {

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
  throw UsageError(option + " takes an integer" + range + ", not '" + text + "'");
}

double parse_double(const std::string& text, const std::string& option) {
  size_t used = 0;
  double value = NAN;
  try {
    value = std::stod(text, &used);
  } catch (const std::logic_error&) {
    used = 0;
  }
  if (used == text.size() && !text.empty() && std::isfinite(value)) return value;
  throw UsageError(option + " takes a number, not '" + text + "'");
}

uint64_t parse_uint64(const std::string& text, const std::string& option) {
  size_t used = 0;
  unsigned long long value = 0;
  try {
    if (!text.empty() && text[0] != '-' && text[0] != '+') value = std::stoull(text, &used, 10);
  } catch (const std::logic_error&) {
    used = 0;
  }
  if (used == text.size() && !text.empty()) return static_cast<uint64_t>(value);
  throw UsageError(option + " takes an integer in [0, 2^64), not '" + text + "'");
}

WeightLoading parse_weights(const std::string& text, const std::string& option) {
  const auto way = weight_loading_named(text);
  if (!way) throw UsageError(option + " takes shared, shared-unpacked or per-session, not '" + text + "'");
  return *way;
}

int run_program(const std::string& program, const std::function<int()>& body) {
  const auto fail = [&](const std::string& message, int status) {
    std::cerr << program << ": " << message << "\n";
    return status;
  };
  try {
    return body();
  } catch (const UsageError& e) {
    return fail(std::string(e.what()) + " (" + program + " --help)", 2);
  } catch (const NotAnExportError& e) {
    return fail(e.what(), 2);
  } catch (const ManifestError& e) {
    return fail(e.what(), 2);
  } catch (const MissingFileError& e) {
    return fail(e.what(), 2);
  } catch (const ChangedFileError& e) {
    return fail(e.what(), 2);
  } catch (const OptionsError& e) {
    return fail(e.what(), 2);
  } catch (const PromptTooLongError& e) {
    return fail(e.what(), 2);
  } catch (const std::exception& e) {  // ProviderError, RuntimeError, TokenizerError, TextUnavailableError, others
    return fail(e.what(), 3);
  }
}

}  // namespace gpt2_onnx::programs
