// What the sample's programs share: usage errors, integer options, and main()'s library check and exit status.
#pragma once

#include <climits>
#include <functional>
#include <stdexcept>
#include <string>

namespace gpt2 {

// A bad command line: reported with the program's usage line, exit status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `text` as an integer of at least `minimum` for `option`; UsageError otherwise.
int parse_int(const std::string& text, const std::string& option, int minimum = INT_MIN);

// main()'s body: refuse an ONNX Runtime library older than the headers (a message, not a crash), initialise the C++
// API, run `body`, and turn what it throws into a message and an exit status: 2 bad arguments (with `usage`) or
// export folder, 3 ONNX Runtime or provider failures and anything else.
int run_program(const std::string& usage, const std::function<int()>& body);

}  // namespace gpt2
