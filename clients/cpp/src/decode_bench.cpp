// gpt2_decode_bench: what sharing the weights costs in speed, measured in C++ on one export.
//
// Loads the folder three times in one process, once per WeightLoading (kv_runner.hpp): one map prepacked once for
// both sessions (the sample's default), one map with prepacking off, and ONNX Runtime loading and prepacking the
// weights per session. It then alternates them round by round, rotating their order: prefill of a fixed prompt,
// then greedy decode of N tokens through the KV cache. Prints the median prefill time and decode ms/token of each
// and their ratio to per-session within the run. Memory is the golden check's business (gpt2_golden_check prints
// RSS for whichever way it takes; here all three are loaded at once).
//
//   gpt2_decode_bench EXPORT_FOLDER [--prompt N] [--new N] [--rounds N] [--threads N]
//
// Exit status: 0 measured, 2 bad arguments or export folder, 3 ONNX Runtime could not run it.
#include <onnxruntime_cxx_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "batching.hpp"
#include "export_files.hpp"
#include "kv_runner.hpp"
#include "program.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::filesystem::path folder;
  int prompt = 128;
  int new_tokens = 64;
  int rounds = 5;
  int threads = 2;
};

struct Samples {
  std::vector<double> prefill_ms;
  std::vector<double> decode_ms_per_token;
};

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// One round: prefill the prompt, then greedy decode through the KV cache. Appends this round's timings.
void measure(gpt2::ExportSessions& sessions, const std::vector<int64_t>& prompt, int new_tokens, Samples& out) {
  const int64_t vocab = sessions.manifest().vocab_size;
  gpt2::PaddedBatch batch = gpt2::left_pad({prompt}, 0);  // (1, T)
  gpt2::KvRunner runner(sessions);
  auto start = Clock::now();
  std::vector<float> logits = runner.prefill(batch.input_ids, batch.attention_mask);  // (1, V)
  out.prefill_ms.push_back(ms_since(start));
  gpt2::Int64Matrix mask = batch.attention_mask;
  start = Clock::now();
  for (int step = 0; step < new_tokens; ++step) {
    const int64_t next = gpt2::argmax(logits.data(), static_cast<size_t>(vocab));
    mask = gpt2::append_ones_column(mask);  // (1, P + 1)
    logits = runner.decode({next}, mask);   // (1, V)
  }
  out.decode_ms_per_token.push_back(ms_since(start) / new_tokens);
}

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw gpt2::UsageError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--prompt") {
      args.prompt = gpt2::parse_int(value(), arg, 1);
    } else if (arg == "--new") {
      args.new_tokens = gpt2::parse_int(value(), arg, 1);
    } else if (arg == "--rounds") {
      args.rounds = gpt2::parse_int(value(), arg, 1);
    } else if (arg == "--threads") {
      args.threads = gpt2::parse_int(value(), arg, 0);
    } else if (!arg.empty() && arg[0] != '-' && args.folder.empty()) {
      args.folder = arg;
    } else {
      throw gpt2::UsageError("unexpected argument '" + arg + "'");
    }
  }
  if (args.folder.empty()) throw gpt2::UsageError("no export folder given");
  return args;
}

int run(const Args& args) {
  const gpt2::Manifest manifest = gpt2::read_manifest(args.folder);
  if (args.prompt + args.new_tokens > manifest.n_positions) {
    throw gpt2::UsageError("prompt + new tokens exceed the model's " + std::to_string(manifest.n_positions) +
                                " positions");
  }
  Ort::Env env(ORT_LOGGING_LEVEL_WARNING, "gpt2_decode_bench");
  struct Way {
    const char* label;
    gpt2::RuntimeOptions options;
    std::unique_ptr<gpt2::ExportSessions> sessions;
    Samples samples;
  };
  std::vector<Way> ways(3);
  ways[0].label = "shared: one map, prepacked once (default)";
  ways[0].options.weights = gpt2::WeightLoading::shared_prepacked;
  ways[1].label = "shared-unpacked: one map, prepacking off";
  ways[1].options.weights = gpt2::WeightLoading::shared_unpacked;
  ways[2].label = "per-session: ONNX Runtime's own loading";
  ways[2].options.weights = gpt2::WeightLoading::per_session;
  std::vector<int64_t> prompt(static_cast<size_t>(args.prompt));
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int64_t>((i * 7919 + 13) % manifest.vocab_size);
  for (auto& way : ways) {
    way.options.intra_op_threads = args.threads;
    way.sessions = std::make_unique<gpt2::ExportSessions>(env, args.folder, manifest, way.options);
    if (way.sessions->weight_loading() != way.options.weights) {
      std::cout << "note: '" << way.label << "' does not apply to this export; it loads as "
                << gpt2::to_string(way.sessions->weight_loading()) << "\n";
    }
    Samples warm_up;
    measure(*way.sessions, prompt, 2, warm_up);
  }
  for (int round = 0; round < args.rounds; ++round) {  // rotate the order, so that drift hits all alike
    for (size_t k = 0; k < ways.size(); ++k) {
      Way& way = ways[(k + static_cast<size_t>(round)) % ways.size()];
      measure(*way.sessions, prompt, args.new_tokens, way.samples);
    }
  }
  std::printf("%s: prompt %d, %d new tokens, %d rounds, %d threads, medians\n", args.folder.string().c_str(),
              args.prompt, args.new_tokens, args.rounds, args.threads);
  std::printf("%-48s %12s %18s\n", "weights", "prefill ms", "decode ms/token");
  const double base_prefill = median(ways.back().samples.prefill_ms);
  const double base_decode = median(ways.back().samples.decode_ms_per_token);
  for (const auto& way : ways) {
    const double prefill = median(way.samples.prefill_ms), decode = median(way.samples.decode_ms_per_token);
    std::printf("%-48s %7.1f %4.2fx %13.2f %4.2fx\n", way.label, prefill, prefill / base_prefill, decode,
                decode / base_decode);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return gpt2::run_program("gpt2_decode_bench EXPORT_FOLDER [--prompt N] [--new N] [--rounds N] [--threads N]",
                           [&] { return run(parse_args(argc, argv)); });
}
