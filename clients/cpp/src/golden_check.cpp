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
// It prints how the sessions got their weights (--weights, see WeightLoading in kv_runner.hpp; default shared) and
// the process's resident memory with both sessions loaded and after the check (Linux).
//
// Exit status: 0 all match, 1 a mismatch, 2 bad arguments or export folder, 3 ONNX Runtime could not run it.
#include <onnxruntime_cxx_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "batching.hpp"
#include "export_files.hpp"
#include "kv_runner.hpp"
#include "program.hpp"

namespace {

using gpt2::GoldenCase;

using gpt2::UsageError;

struct Args {
  std::filesystem::path folder;
  std::filesystem::path golden;  // default: FOLDER/golden.json
  gpt2::RuntimeOptions runtime;
  bool batch = true;
};

gpt2::WeightLoading weight_loading(const std::string& name) {
  for (auto way : {gpt2::WeightLoading::shared_prepacked, gpt2::WeightLoading::shared_unpacked,
                   gpt2::WeightLoading::per_session}) {
    if (name == gpt2::to_string(way)) return way;
  }
  throw UsageError("--weights takes shared, shared-unpacked or per-session, not '" + name + "'");
}

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--golden") {
      args.golden = value();
    } else if (arg == "--provider") {
      args.runtime.provider = value();
    } else if (arg == "--device-id") {
      args.runtime.device_id = gpt2::parse_int(value(), arg);
    } else if (arg == "--threads") {
      args.runtime.intra_op_threads = gpt2::parse_int(value(), arg);
    } else if (arg == "--no-batch") {
      args.batch = false;
    } else if (arg == "--weights") {
      args.runtime.weights = weight_loading(value());
    } else if (!arg.empty() && arg[0] == '-') {
      throw UsageError("unknown option " + arg);
    } else if (args.folder.empty()) {
      args.folder = arg;
    } else {
      throw UsageError("more than one export folder given");
    }
  }
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

// Greedy decoding of left-padded prompts for `steps` tokens, with the KV cache kept in ONNX Runtime.
Greedy greedy(gpt2::ExportSessions& sessions, const std::vector<std::vector<int64_t>>& prompts, size_t steps,
              int64_t pad_id) {
  const int64_t vocab = sessions.manifest().vocab_size;
  gpt2::PaddedBatch batch = gpt2::left_pad(prompts, pad_id);  // (B, T)
  gpt2::KvRunner runner(sessions);
  std::vector<float> logits = runner.prefill(batch.input_ids, batch.attention_mask);  // (B, V)
  Greedy out{std::vector<std::vector<int64_t>>(prompts.size()), logits, {}};
  gpt2::Int64Matrix mask = batch.attention_mask;
  for (size_t step = 0; step < steps; ++step) {
    std::vector<int64_t> next(prompts.size());  // (B,)
    for (size_t row = 0; row < prompts.size(); ++row) {
      next[row] = gpt2::argmax(logits.data() + row * vocab, static_cast<size_t>(vocab));
      out.tokens[row].push_back(next[row]);
    }
    if (step + 1 == steps) break;
    mask = gpt2::append_ones_column(mask);  // (B, P + 1)
    logits = runner.decode(next, mask);     // (B, V)
  }
  out.last_logits = std::move(logits);
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
  const auto top = gpt2::top_k(logits, vocab, c.top5_ids.size());
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
void compare_with_recompute(Report& report, const std::string& name, gpt2::ExportSessions& sessions,
                            const GoldenCase& c, const Greedy& result, double atol) {
  if (result.tokens[0].size() < 2) return;  // no decode step was taken
  std::vector<int64_t> sequence = c.input_ids;
  sequence.insert(sequence.end(), result.tokens[0].begin(), result.tokens[0].end() - 1);
  gpt2::PaddedBatch batch = gpt2::left_pad({sequence}, 0);  // (1, T + steps - 1)
  gpt2::KvRunner fresh(sessions);
  const std::vector<float> expected = fresh.prefill(batch.input_ids, batch.attention_mask);  // (1, V)
  double worst = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    worst = std::max(worst, std::fabs(double(result.last_logits[i]) - double(expected[i])));
  }
  char line[160];
  std::snprintf(line, sizeof line, ": step %zu logits via the KV cache vs recomputed, max|d| %.3g (tol %.3g)",
                result.tokens[0].size() - 1, worst, atol);
  report.add(worst <= atol, name + line);
}

void check_golden(gpt2::ExportSessions& sessions, const gpt2::Golden& golden, bool batch, Report& report) {
  const auto vocab = static_cast<size_t>(sessions.manifest().vocab_size);
  for (size_t i = 0; i < golden.cases.size(); ++i) {
    const GoldenCase& c = golden.cases[i];
    const std::string name = "case " + std::to_string(i);
    std::cout << name << " \"" << c.prompt << "\" (" << c.input_ids.size() << " prompt tokens)\n";
    const Greedy result = greedy(sessions, {c.input_ids}, c.greedy_ids.size(), 0);
    const double atol = golden.atol_for(c);
    compare_tokens(report, name, result.tokens[0], c, atol);
    compare_top5(report, name, result.first_logits.data(), vocab, c, atol);
    compare_with_recompute(report, name, sessions, c, result, atol);
  }
  if (!batch || golden.cases.size() < 2) return;
  // Left padding must not change any row: the padded positions are masked and their position ids ignored.
  std::vector<std::vector<int64_t>> prompts;
  size_t steps = 0;
  for (const auto& c : golden.cases) {
    prompts.push_back(c.input_ids);
    steps = std::max(steps, c.greedy_ids.size());
  }
  const int64_t pad = sessions.manifest().pad_token_id.value_or(sessions.manifest().eos_token_id.value_or(0));
  std::cout << "all " << prompts.size() << " cases as one left-padded batch\n";
  const Greedy result = greedy(sessions, prompts, steps, pad);
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

void print_weights(const gpt2::ExportSessions& sessions) {
  const gpt2::MappedWeights* shared = sessions.shared_weights();
  if (shared == nullptr) {
    std::cout << "weights: loaded and prepacked by ONNX Runtime for each session\n";
    return;
  }
  const bool prepacked = sessions.weight_loading() == gpt2::WeightLoading::shared_prepacked;
  std::cout << "weights: one map of " << sessions.manifest().weights_file << " (" << shared->tensor_count()
            << " tensors, " << shared->mapped_bytes() / (1024 * 1024) << " MiB) shared by both sessions, "
            << (prepacked ? "prepacked once for both, map pages released" : "prepacking off") << "\n";
}

// "1.31.1" < "1.16.0"? Compared as numbers, part by part; a part's leading digits count ("0rc1" → 0).
bool older_than(const std::string& version, const std::string& minimum) {
  std::istringstream a(version), b(minimum);
  std::string x, y;
  while (std::getline(b, y, '.')) {
    if (!std::getline(a, x, '.')) x = "0";
    const long have = std::strtol(x.c_str(), nullptr, 10), need = std::strtol(y.c_str(), nullptr, 10);
    if (have != need) return have < need;
  }
  return false;
}

int run(const Args& args) {
  const gpt2::Manifest manifest = gpt2::read_manifest(args.folder);
  const gpt2::Golden golden = gpt2::read_golden(args.golden);
  const std::string version = Ort::GetVersionString();
  std::cout << "ONNX Runtime " << version << " (C API " << ORT_API_VERSION << "), provider " << args.runtime.provider
            << "\nexport " << args.folder.string() << ": " << manifest.n_layer << " layers, " << manifest.n_head
            << " heads, d=" << manifest.n_embd << ", vocab " << manifest.vocab_size << ", opset " << manifest.opset
            << " (needs ONNX Runtime >= " << manifest.min_onnxruntime << ")\n";
  if (!manifest.min_onnxruntime.empty() && older_than(version, manifest.min_onnxruntime)) {
    std::cerr << "error: ONNX Runtime " << version << " is older than this export needs (" << manifest.min_onnxruntime
              << ")\n";
    return 3;
  }
  Ort::Env env(ORT_LOGGING_LEVEL_WARNING, "gpt2_golden_check");
  gpt2::ExportSessions sessions(env, args.folder, manifest, args.runtime);
  print_weights(sessions);
  print_memory("with both sessions loaded");
  Report report;
  check_golden(sessions, golden, args.batch, report);
  print_memory("after the check");
  std::cout << "golden check " << (report.failed ? "FAILED" : "passed") << ": " << report.passed << " comparisons ok, "
            << report.failed << " failed\n";
  return report.failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return gpt2::run_program(
      "gpt2_golden_check EXPORT_FOLDER [--golden FILE] [--provider cpu|cuda] [--device-id N] [--threads N] "
      "[--no-batch] [--weights shared|shared-unpacked|per-session]",
      [&] { return run(parse_args(argc, argv)); });
}
