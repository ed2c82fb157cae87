// gpt2_onnx_run: generate from a gpt2-onnx export folder, text in and text out, with the JavaScript client's
// command-line shape (clients/js/bin/gpt2-onnx-js.js), so that one seed gives the same ids in every client.
//
//   gpt2_onnx_run run EXPORT_FOLDER --prompt TEXT [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P]
//                 [--seed S] [--sample] [--ignore-eos] [--json] [--provider cpu|cuda] [--device-id N] [--threads N]
//
// Greedy unless --sample or any of --temperature, --top-k, --top-p, --seed is given (temperature 0 is greedy).
// Sampling without --seed draws from a fresh random seed each run; --seed S gives the same ids every time.
// Without --json the text streams to stdout as it is generated; with --json one line:
// {"prompt_ids": [...], "ids": [...], "text": "...", "finish_reason": "eos" | "length", "load_s": .., "tokens_per_s": ..}
//
// Exit status: 0 generated, 2 bad input (one line on stderr), 3 ONNX Runtime, a provider absent, no text layer.
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpt2_onnx/gpt2_onnx.hpp"
#include "program.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using gpt2_onnx::programs::UsageError;

constexpr const char* kUsage =
    "usage: gpt2_onnx_run run EXPORT_FOLDER --prompt TEXT [--max-new-tokens N] [--json]\n"
    "                     [--sample] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--ignore-eos]\n"
    "                     [--provider cpu|cuda] [--device-id N] [--threads N]\n"
    "  Generates from a gpt2-onnx export folder with the gpt2_onnx C++ library. Greedy unless a sampling flag is\n"
    "  given; without --seed, sampling draws from a fresh random seed each run. --json prints {\"prompt_ids\",\n"
    "  \"ids\", \"text\", \"finish_reason\", \"load_s\", \"tokens_per_s\"}; otherwise the text streams.\n";

struct Args {
  std::filesystem::path folder;
  std::optional<std::string> prompt;
  gpt2_onnx::GenerateOptions generate;
  gpt2_onnx::ModelOptions model;
  bool sample = false;
  bool json = false;
  bool help = false;
};

// One option with its value; returns false where `arg` is none of them.
bool parse_valued(Args& args, const std::string& arg, const std::string& value) {
  using namespace gpt2_onnx::programs;
  if (arg == "--prompt") {
    args.prompt = value;
  } else if (arg == "--max-new-tokens") {
    args.generate.max_new_tokens = parse_int(value, arg);
  } else if (arg == "--temperature") {
    args.generate.temperature = parse_double(value, arg);
  } else if (arg == "--top-k") {
    args.generate.top_k = parse_int(value, arg);
  } else if (arg == "--top-p") {
    args.generate.top_p = parse_double(value, arg);
  } else if (arg == "--seed") {
    args.generate.seed = parse_uint64(value, arg);
  } else if (arg == "--provider") {
    args.model.provider = value;
  } else if (arg == "--device-id") {
    args.model.device_id = parse_int(value, arg, 0);
  } else if (arg == "--threads") {
    args.model.intra_op_threads = parse_int(value, arg, 0);
  } else {
    return false;
  }
  return true;
}

Args parse_args(int argc, char** argv) {
  Args args;
  std::vector<std::string> positionals;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      args.help = true;
    } else if (arg == "--json") {
      args.json = true;
    } else if (arg == "--sample") {
      args.sample = true;
    } else if (arg == "--ignore-eos") {
      args.generate.stop_at_eos = false;
    } else if (arg.rfind("--", 0) == 0) {
      if (i + 1 >= argc) throw UsageError(arg + " needs a value");
      if (!parse_valued(args, arg, argv[++i])) throw UsageError("unknown option " + arg);
    } else {
      positionals.push_back(arg);
    }
  }
  if (args.help) return args;
  if (positionals.size() != 2 || positionals[0] != "run") throw UsageError("expected: run EXPORT_FOLDER");
  if (!args.prompt) throw UsageError("--prompt TEXT is required");
  args.folder = positionals[1];
  if (args.sample) args.generate.do_sample = true;
  return args;
}

void print_json(const gpt2_onnx::Generation& result, double load_s, double generate_s) {
  nlohmann::json out;
  out["prompt_ids"] = result.prompt_ids;
  out["ids"] = result.ids;
  out["text"] = result.text;
  out["finish_reason"] = gpt2_onnx::to_string(result.finish_reason);
  out["load_s"] = load_s;
  out["tokens_per_s"] = generate_s > 0 ? static_cast<double>(result.ids.size()) / generate_s : 0.0;
  // Invalid UTF-8 cannot come from the tokenizer (it decodes to U+FFFD); replace rather than fail if it ever did.
  std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

int run(const Args& args) {
  if (args.help) {
    std::cout << kUsage;
    return 0;
  }
  gpt2_onnx::TokenSelector check_options(args.generate);  // bad options are refused before anything loads
  const auto started = Clock::now();
  gpt2_onnx::Model model = gpt2_onnx::Model::open(args.folder, args.model);
  const auto loaded = Clock::now();
  gpt2_onnx::TokenCallback stream;
  if (!args.json) {
    stream = [](int64_t, std::string_view piece) { std::cout << piece << std::flush; };
  }
  const gpt2_onnx::Generation result = model.generate(std::string_view(*args.prompt), args.generate, stream);
  const auto finished = Clock::now();
  if (args.json) {
    print_json(result, std::chrono::duration<double>(loaded - started).count(),
               std::chrono::duration<double>(finished - loaded).count());
  } else {
    std::cout << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return gpt2_onnx::programs::run_program("gpt2_onnx_run", [&] { return run(parse_args(argc, argv)); });
}
