// gpt2_onnx_decode_bench: the host's time per token of the library's own generation path on one export, in the
// form benchmarks/clients_decode.py runs beside the .NET client's benchmark (docs/cpp.md, "The decode benchmark").
//
//   gpt2_onnx_decode_bench EXPORT_FOLDER [--prompt N] [--new N] [--rounds N] [--warmup N] [--threads N]
//                          [--weights shared|shared-unpacked|per-session] [--json]
//
// The model is opened once (CPU provider, N intra-op threads, one inter-op thread, ONNX Runtime's spinning left as
// the library sets it for both clients). Prompt ids[i] = (i * 7919 + 13) % vocab_size. A round: a Generator over the
// prompt (the prefill, timed: prefill_ms), then exactly --new greedy tokens through Generator::next with
// end-of-text ignored (timed as a whole: decode_ms_per_token = loop time / N; N tokens take N - 1 decode steps, as
// in Model::generate). Warm-up rounds are not recorded. --json prints one JSON object on one line.
//
// Exit status: 0 measured, 2 bad arguments or export folder, 3 ONNX Runtime could not run it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpt2_onnx/gpt2_onnx.hpp"
#include "program.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using gpt2_onnx::programs::parse_int;
using gpt2_onnx::programs::parse_weights;
using gpt2_onnx::programs::UsageError;

constexpr const char* kUsage =
    "usage: gpt2_onnx_decode_bench EXPORT_FOLDER [--prompt N] [--new N] [--rounds N] [--warmup N] [--threads N]\n"
    "                              [--weights shared|shared-unpacked|per-session] [--json]\n"
    "  Times prefill and greedy decode through the gpt2_onnx library (defaults: 32, 64, 5, 1, 1, shared).\n";

struct Args {
  std::filesystem::path folder;
  int prompt = 32;
  int new_tokens = 64;
  int rounds = 5;
  int warmup = 1;
  int threads = 1;
  gpt2_onnx::WeightLoading weights = gpt2_onnx::WeightLoading::shared_prepacked;
  bool json = false;
  bool help = false;
};

struct Round {
  double prefill_ms = 0;
  double decode_ms_per_token = 0;
};

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// The process's peak resident memory in MiB (VmHWM of /proc/self/status); negative where there is no such file.
double peak_rss_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;  // kB -> MiB
  }
  return -1;
}

// One round through the public generation path: prefill, then exactly `new_tokens` greedy tokens.
Round measure(gpt2_onnx::Model& model, const std::vector<int64_t>& prompt, int new_tokens) {
  gpt2_onnx::GenerateOptions options;
  options.max_new_tokens = new_tokens;
  options.stop_at_eos = false;  // the benchmark runs exactly new_tokens steps
  Round round;
  auto start = Clock::now();
  gpt2_onnx::Generator generator(model, {prompt}, options);
  round.prefill_ms = ms_since(start);
  start = Clock::now();
  while (!generator.done()) generator.next();
  round.decode_ms_per_token = ms_since(start) / new_tokens;
  return round;
}

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      args.help = true;
    } else if (arg == "--prompt") {
      args.prompt = parse_int(value(), arg, 1);
    } else if (arg == "--new") {
      args.new_tokens = parse_int(value(), arg, 1);
    } else if (arg == "--rounds") {
      args.rounds = parse_int(value(), arg, 1);
    } else if (arg == "--warmup") {
      args.warmup = parse_int(value(), arg, 0);
    } else if (arg == "--threads") {
      args.threads = parse_int(value(), arg, 1);
    } else if (arg == "--weights") {
      args.weights = parse_weights(value(), arg);
    } else if (arg == "--json") {
      args.json = true;
    } else if (!arg.empty() && arg[0] != '-' && args.folder.empty()) {
      args.folder = arg;
    } else {
      throw UsageError("unexpected argument '" + arg + "'");
    }
  }
  if (!args.help && args.folder.empty()) throw UsageError("no export folder given");
  return args;
}

void print_json(const Args& args, const gpt2_onnx::Model& model, const std::vector<Round>& rounds) {
  nlohmann::json out;
  out["client"] = "cpp";
  out["folder"] = std::filesystem::absolute(args.folder).lexically_normal().string();
  out["precision"] = model.manifest().precision;
  out["onnxruntime"] = gpt2_onnx::Model::onnxruntime_version();
  out["threads"] = args.threads;
  out["prompt_tokens"] = args.prompt;
  out["new_tokens"] = args.new_tokens;
  out["rounds"] = args.rounds;
  out["prefill_ms"] = nlohmann::json::array();
  out["decode_ms_per_token"] = nlohmann::json::array();
  for (const Round& r : rounds) {
    out["prefill_ms"].push_back(r.prefill_ms);
    out["decode_ms_per_token"].push_back(r.decode_ms_per_token);
  }
  out["allocated_bytes_per_token"] = nullptr;  // a .NET measure; C++ has no managed heap
  out["weights"] = gpt2_onnx::to_string(model.weight_loading());
  const double rss = peak_rss_mib();
  out["peak_rss_mib"] = rss < 0 ? nlohmann::json(nullptr) : nlohmann::json(rss);
  std::cout << out.dump() << "\n";
}

void print_table(const Args& args, const gpt2_onnx::Model& model, const std::vector<Round>& rounds) {
  std::vector<double> prefill, decode;
  for (const Round& r : rounds) {
    prefill.push_back(r.prefill_ms);
    decode.push_back(r.decode_ms_per_token);
  }
  std::printf("%s (%s, ONNX Runtime %s, weights %s): prompt %d, %d new tokens, %d rounds, %d threads\n",
              args.folder.string().c_str(), model.manifest().precision.c_str(),
              gpt2_onnx::Model::onnxruntime_version().c_str(), gpt2_onnx::to_string(model.weight_loading()),
              args.prompt, args.new_tokens, args.rounds, args.threads);
  std::printf("%-22s %10s %10s %10s\n", "", "median", "min", "max");
  std::printf("%-22s %10.3f %10.3f %10.3f\n", "prefill ms", median(prefill),
              *std::min_element(prefill.begin(), prefill.end()), *std::max_element(prefill.begin(), prefill.end()));
  std::printf("%-22s %10.3f %10.3f %10.3f\n", "decode ms/token", median(decode),
              *std::min_element(decode.begin(), decode.end()), *std::max_element(decode.begin(), decode.end()));
  const double rss = peak_rss_mib();
  if (rss >= 0) std::printf("peak RSS %.1f MiB\n", rss);
}

int run(const Args& args) {
  if (args.help) {
    std::cout << kUsage;
    return 0;
  }
  gpt2_onnx::ModelOptions options;
  options.intra_op_threads = args.threads;
  options.inter_op_threads = 1;
  options.weights = args.weights;
  options.tokenizer = false;  // token ids only
  gpt2_onnx::Model model = gpt2_onnx::Model::open(args.folder, options);
  const int64_t vocab = model.manifest().vocab_size;
  std::vector<int64_t> prompt(static_cast<size_t>(args.prompt));  // the contract's fixed prompt
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int64_t>((i * 7919 + 13) % vocab);
  for (int i = 0; i < args.warmup; ++i) measure(model, prompt, args.new_tokens);
  std::vector<Round> rounds;
  for (int i = 0; i < args.rounds; ++i) rounds.push_back(measure(model, prompt, args.new_tokens));
  if (args.json) {
    print_json(args, model, rounds);
  } else {
    print_table(args, model, rounds);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return gpt2_onnx::programs::run_program("gpt2_onnx_decode_bench", [&] { return run(parse_args(argc, argv)); });
}
