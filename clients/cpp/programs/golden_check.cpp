// gpt2_golden_check: check a gpt2-onnx export folder against its golden.json with ONNX Runtime alone.
//
// For each golden case: prefill the prompt, decode greedily for as many steps as the golden continuation has (end
// of text is not special), and require the same token ids; the prompt's last-position top-5 logits must match
// within the case's tolerance (golden.json's per-case logits_atol, else the file's), and the last step's logits
// through the KV cache must equal those recomputed without it, within the same tolerance. Then all cases again as one left-padded batch, which must not change any row.
// The Python twin is runtimes/golden_check.py.
//
//   gpt2_golden_check EXPORT_FOLDER [--golden FILE] [--provider cpu|cuda] [--device-id N] [--threads N]
//                     [--no-batch] [--weights shared|shared-unpacked|per-session]
//
// It prints how the sessions got their weights (--weights, see WeightLoading in gpt2_onnx/options.hpp; default
// shared) and the process's resident memory with both sessions loaded and after the check (Linux). It runs on the
// library's public API: Model::open, Generator (the greedy steps) and Model::next_token_logits (the recompute).
//
// Exit status: 0 all match, 1 a mismatch, 2 bad arguments or export folder, 3 ONNX Runtime could not run it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "golden_file.hpp"
#include "gpt2_onnx/gpt2_onnx.hpp"
#include "program.hpp"

namespace {

using gpt2_onnx::programs::GoldenCase;
using gpt2_onnx::programs::UsageError;

constexpr const char* kUsage =
    "usage: gpt2_golden_check EXPORT_FOLDER [--golden FILE] [--provider cpu|cuda] [--device-id N] [--threads N]\n"
    "                         [--no-batch] [--weights shared|shared-unpacked|per-session]\n"
    "  Checks the export against its golden.json: greedy tokens, top-5 logits, the KV cache against a recompute,\n"
    "  and all cases as one left-padded batch. Exit 0 all match, 1 a mismatch, 2 bad input, 3 ONNX Runtime.\n";

struct Args {
  std::filesystem::path folder;
  std::filesystem::path golden;  // default: FOLDER/golden.json
  gpt2_onnx::ModelOptions model;
  bool batch = true;
  bool help = false;
};

Args parse_args(int argc, char** argv) {
  Args args;
  args.model.tokenizer = false;  // token ids only: golden.json has them
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      args.help = true;
    } else if (arg == "--golden") {
      args.golden = value();
    } else if (arg == "--provider") {
      args.model.provider = value();
    } else if (arg == "--device-id") {
      args.model.device_id = gpt2_onnx::programs::parse_int(value(), arg, 0);
    } else if (arg == "--threads") {
      args.model.intra_op_threads = gpt2_onnx::programs::parse_int(value(), arg, 0);
    } else if (arg == "--no-batch") {
      args.batch = false;
    } else if (arg == "--weights") {
      args.model.weights = gpt2_onnx::programs::parse_weights(value(), arg);
    } else if (!arg.empty() && arg[0] == '-') {
      throw UsageError("unknown option " + arg);
    } else if (args.folder.empty()) {
      args.folder = arg;
    } else {
      throw UsageError("more than one export folder given");
    }
  }
  if (args.help) return args;
  if (args.folder.empty()) throw UsageError("no export folder given");
  if (args.golden.empty()) args.golden = args.folder / "golden.json";
  return args;
}

// Every comparison is made and printed; failures are counted, never cut short.
struct Report {
  int passed = 0;
  int failed = 0;
  void add(bool ok, const std::string& line) {
    (ok ? passed : failed) += 1;
    std::cout << (ok ? "  ok    " : "  FAIL  ") << line << "\n";
  }
};

struct Greedy {
  std::vector<std::vector<int64_t>> tokens;  // (B, steps)
  std::vector<float> first_logits;           // (B, V): the prompts' last-position logits
  std::vector<float> last_logits;            // (B, V): those the last token was chosen from
};

// Greedy decoding of left-padded prompts for `steps` tokens (end-of-text not special), with the KV cache kept in
// ONNX Runtime: the library's Generator, with the logits the first and the last tokens were chosen from kept.
Greedy greedy(gpt2_onnx::Model& model, const std::vector<std::vector<int64_t>>& prompts, size_t steps) {
  const auto vocab = static_cast<size_t>(model.manifest().vocab_size);
  gpt2_onnx::GenerateOptions options;
  options.max_new_tokens = static_cast<int>(steps);
  options.stop_at_eos = false;
  gpt2_onnx::Generator generator(model, prompts, options);
  const auto copy_logits = [&] {
    std::vector<float> all(prompts.size() * vocab);  // (B, V)
    for (size_t row = 0; row < prompts.size(); ++row) {
      std::copy_n(generator.logits(row), vocab, all.begin() + static_cast<std::ptrdiff_t>(row * vocab));
    }
    return all;
  };
  Greedy out{std::vector<std::vector<int64_t>>(prompts.size()), copy_logits(), {}};
  for (size_t step = 0; step < steps; ++step) {
    if (step + 1 == steps) out.last_logits = copy_logits();
    generator.next();
  }
  const auto results = generator.results();
  for (size_t row = 0; row < prompts.size(); ++row) out.tokens[row] = results[row].ids;
  return out;
}

std::string join(const std::vector<int64_t>& ids) {
  std::ostringstream out;
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
  return out.str();
}

// Tokens must equal the golden ones, except that at a near-tie step (the golden margin between the chosen token
// and the runner-up within 2 × atol) they may diverge; nothing after a divergence is compared
// (gpt2_onnx/golden.py, greedy_agreement).
void compare_tokens(Report& report, const std::string& name, const std::vector<int64_t>& got,
                    const GoldenCase& c, double atol) {
  const std::vector<int64_t>& expected = c.greedy_ids;
  for (size_t step = 0; step < expected.size(); ++step) {
    if (step < got.size() && got[step] == expected[step]) continue;
    if (step < got.size() && step < c.greedy_margins.size() && c.greedy_margins[step] <= 2 * atol) {
      char line[200];
      std::snprintf(line, sizeof line, ": %zu tokens match, then a near-tie at step %zu (margin %.3g <= 2 x tol)",
                    step, step, double(c.greedy_margins[step]));
      report.add(true, name + line);
      return;
    }
    report.add(false, name + ": tokens differ at step " + std::to_string(step) + ": got [" + join(got) +
                          "], expected [" + join(expected) + "]");
    return;
  }
  report.add(got.size() == expected.size(), name + ": " + std::to_string(expected.size()) + " greedy tokens match" +
                                                (got.size() == expected.size() ? "" : ", but more were produced"));
}

void compare_top5(Report& report, const std::string& name, const float* logits, size_t vocab, const GoldenCase& c,
                  double atol) {
  // The ranks must agree up to ties within the tolerance: at every rank, the expected id's logit lies within
  // 2 × atol of the logit holding that rank here (fp32's few roundings: the exact order but for true ties; reduced
  // precisions may swap near-ties).
  const auto top = gpt2_onnx::top_k(logits, vocab, c.top5_ids.size());
  bool ranks_agree = top.size() == c.top5_ids.size();
  for (size_t i = 0; ranks_agree && i < top.size(); ++i) {
    ranks_agree = std::fabs(double(logits[c.top5_ids[i]]) - double(logits[top[i]])) <= 2 * atol;
  }
  const std::string order = top == c.top5_ids ? "" : ", expected [" + join(c.top5_ids) + "]";
  report.add(ranks_agree, name + ": top-5 ids [" + join(top) + "]" + order +
                              (ranks_agree && !order.empty() ? " (near-ties within 2x tol)" : ""));
  double worst = 0.0;
  for (size_t i = 0; i < c.top5_ids.size(); ++i) {
    worst = std::max(worst, std::fabs(double(logits[c.top5_ids[i]]) - c.top5_logits[i]));
  }
  char line[160];
  std::snprintf(line, sizeof line, ": top-5 logits max|d| %.3g (tol %.3g)", worst, atol);
  report.add(worst <= atol, name + line);
}

// The KV loop's last step must give the logits that one prefill over the whole sequence gives without a cache.
// This holds for any weights, so it catches a broken cache even where a random model repeats one token.
void compare_with_recompute(Report& report, const std::string& name, gpt2_onnx::Model& model, const GoldenCase& c,
                            const Greedy& result, double atol) {
  if (result.tokens[0].size() < 2) return;  // no decode step was taken
  std::vector<int64_t> sequence = c.input_ids;  // (T + steps - 1,)
  sequence.insert(sequence.end(), result.tokens[0].begin(), result.tokens[0].end() - 1);
  const std::vector<float> expected = model.next_token_logits(sequence);  // (V,)
  double worst = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    worst = std::max(worst, std::fabs(double(result.last_logits[i]) - double(expected[i])));
  }
  char line[160];
  std::snprintf(line, sizeof line, ": step %zu logits via the KV cache vs recomputed, max|d| %.3g (tol %.3g)",
                result.tokens[0].size() - 1, worst, atol);
  report.add(worst <= atol, name + line);
}

void check_golden(gpt2_onnx::Model& model, const gpt2_onnx::programs::Golden& golden, bool batch, Report& report) {
  const auto vocab = static_cast<size_t>(model.manifest().vocab_size);
  for (size_t i = 0; i < golden.cases.size(); ++i) {
    const GoldenCase& c = golden.cases[i];
    const std::string name = "case " + std::to_string(i);
    std::cout << name << " \"" << c.prompt << "\" (" << c.input_ids.size() << " prompt tokens)\n";
    const Greedy result = greedy(model, {c.input_ids}, c.greedy_ids.size());
    const double atol = golden.atol_for(c);
    compare_tokens(report, name, result.tokens[0], c, atol);
    compare_top5(report, name, result.first_logits.data(), vocab, c, atol);
    compare_with_recompute(report, name, model, c, result, atol);
  }
  if (!batch || golden.cases.size() < 2) return;
  // Left padding must not change any row: the padded positions are masked and their position ids ignored.
  std::vector<std::vector<int64_t>> prompts;
  size_t steps = 0;
  for (const auto& c : golden.cases) {
    prompts.push_back(c.input_ids);
    steps = std::max(steps, c.greedy_ids.size());
  }
  std::cout << "all " << prompts.size() << " cases as one left-padded batch\n";
  const Greedy result = greedy(model, prompts, steps);
  for (size_t i = 0; i < golden.cases.size(); ++i) {
    const GoldenCase& c = golden.cases[i];
    const std::string name = "batch row " + std::to_string(i);
    const std::vector<int64_t> got(result.tokens[i].begin(), result.tokens[i].begin() + c.greedy_ids.size());
    compare_tokens(report, name, got, c, golden.atol_for(c));
    compare_top5(report, name, result.first_logits.data() + i * vocab, vocab, c, golden.atol_for(c));
  }
}

// This process's resident memory in MiB (VmRSS of /proc/self/status); -1 where the system has no such file.
long resident_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10) / 1024;  // kB → MiB
  }
  return -1;
}

void print_memory(const std::string& when) {
  const long mib = resident_mib();
  if (mib >= 0) std::cout << "memory: RSS " << mib << " MiB " << when << "\n";
}

void print_weights(const gpt2_onnx::Model& model) {
  const auto shared = model.shared_weights();
  if (!shared) {
    std::cout << "weights: loaded and prepacked by ONNX Runtime for each session\n";
    return;
  }
  const bool prepacked = model.weight_loading() == gpt2_onnx::WeightLoading::shared_prepacked;
  std::cout << "weights: one map of " << model.manifest().weights_file << " (" << shared->tensors << " tensors, "
            << shared->bytes / (1024 * 1024) << " MiB) shared by both sessions, "
            << (prepacked ? "prepacked once for both, map pages released" : "prepacking off") << "\n";
}

int run(const Args& args) {
  if (args.help) {
    std::cout << kUsage;
    return 0;
  }
  gpt2_onnx::Model model = gpt2_onnx::Model::open(args.folder, args.model);
  const gpt2_onnx::Manifest& manifest = model.manifest();
  const gpt2_onnx::programs::Golden golden = gpt2_onnx::programs::read_golden(args.golden);
  std::cout << "ONNX Runtime " << gpt2_onnx::Model::onnxruntime_version() << ", provider " << args.model.provider
            << "\nexport " << args.folder.string() << ": " << manifest.n_layer << " layers, " << manifest.n_head
            << " heads, d=" << manifest.n_embd << ", vocab " << manifest.vocab_size << ", opset " << manifest.opset
            << " (needs ONNX Runtime >= " << manifest.min_onnxruntime << ")\n";
  print_weights(model);
  print_memory("with both sessions loaded");
  Report report;
  check_golden(model, golden, args.batch, report);
  print_memory("after the check");
  std::cout << "golden check " << (report.failed ? "FAILED" : "passed") << ": " << report.passed << " comparisons ok, "
            << report.failed << " failed\n";
  return report.failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return gpt2_onnx::programs::run_program("gpt2_golden_check", [&] { return run(parse_args(argc, argv)); });
}
