// What the programs share: command-line values, and main()'s turning of errors into one line and an exit status.
#pragma once

#include <climits>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "gpt2_onnx/options.hpp"

namespace gpt2_onnx::programs {

// A bad command line: one line on stderr, exit status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `text` as an integer of at least `minimum` for `option`; UsageError otherwise.
int parse_int(const std::string& text, const std::string& option, int minimum = INT_MIN);
// `text` as a finite number for `option`; UsageError otherwise.
double parse_double(const std::string& text, const std::string& option);
// `text` as an integer in [0, 2^64) for `option`; UsageError otherwise.
uint64_t parse_uint64(const std::string& text, const std::string& option);
// `text` as a way of loading the weights (shared, shared-unpacked, per-session) for `option`; UsageError otherwise.
WeightLoading parse_weights(const std::string& text, const std::string& option);

// main()'s body: run `body` and turn what it throws into one line "PROGRAM: message" on stderr and an exit status:
// 2 bad arguments or input (usage, options, a folder that is not a sound export, a prompt beyond the context),
// 3 the environment or ONNX Runtime (a provider absent, a runtime failure, no text layer) and anything else.
int run_program(const std::string& program, const std::function<int()>& body);

}  // namespace gpt2_onnx::programs
