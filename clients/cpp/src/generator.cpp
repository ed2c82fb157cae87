#include "gpt2_onnx/generator.hpp"

#include <algorithm>
#include <stdexcept>

#include "batching.hpp"
#include "gpt2_onnx/sampling.hpp"
#include "kv_runner.hpp"
#include "model_impl.hpp"

namespace gpt2_onnx {

namespace detail {

void check_prompts(const Manifest& manifest, const std::vector<std::vector<int64_t>>& prompts, int max_new_tokens) {
  if (max_new_tokens < 1) {
    throw OptionsError("max_new_tokens must be an integer >= 1, not " + std::to_string(max_new_tokens));
  }
  if (prompts.empty()) throw OptionsError("no prompt given");
  size_t longest = 0;
  for (const auto& prompt : prompts) {
    if (prompt.empty()) throw OptionsError("the prompt is empty: GPT-2 needs at least one token");
    for (const int64_t id : prompt) {
      if (id < 0 || id >= manifest.vocab_size) {
        throw OptionsError("prompt token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                           std::to_string(manifest.vocab_size - 1) + ")");
      }
    }
    longest = std::max(longest, prompt.size());
  }
  const auto total = static_cast<int64_t>(longest) + max_new_tokens;
  if (total > manifest.n_positions) {
    throw PromptTooLongError("the prompt has " + std::to_string(longest) + " tokens; with " +
                             std::to_string(max_new_tokens) + " new tokens that is " + std::to_string(total) +
                             ", more than the model's context of " + std::to_string(manifest.n_positions) +
                             " positions");
  }
}

}  // namespace detail

struct Generator::Impl {
  Impl(Model::Impl& model, const TokenSelector& row_selector, uint64_t generation_seed, int64_t batch,
       int64_t capacity)
      : runner(*model.sessions, batch, capacity),
        seed(generation_seed),
        select(static_cast<size_t>(batch), row_selector) {}

  detail::KvRunner runner;
  uint64_t seed;                      // every row's SplitMix64 starts from it
  std::vector<TokenSelector> select;  // (B,): each row draws from its own stream, never from another row's
  std::vector<std::vector<int64_t>> prompts;
  const float* logits = nullptr;  // (B, V), the runner's: what the next tokens are chosen from
  std::vector<int64_t> feed;      // (B,): the tokens of the next decode step
  int64_t vocab = 0;
  int max_new_tokens = 0;
  std::optional<int64_t> eos;  // ends a row where stop_at_eos
  int64_t pad = 0;             // fed to rows that have ended while others run on
  std::vector<std::vector<int64_t>> ids;              // (B, steps so far)
  std::vector<std::optional<FinishReason>> finished;  // (B,)
  std::vector<int64_t> last;                          // (B,): the latest next()'s tokens
};

Generator::Generator(Model& model, std::vector<std::vector<int64_t>> prompts, const GenerateOptions& options) {
  Model::Impl& m = *model.impl_;
  detail::check_prompts(m.manifest, prompts, options.max_new_tokens);
  size_t longest = 0;
  for (const auto& prompt : prompts) longest = std::max(longest, prompt.size());
  const auto capacity = static_cast<int64_t>(longest) + options.max_new_tokens;  // every position it can reach
  // One seed per generation, drawn here where it samples without options.seed (a greedy one needs none, and the
  // benchmark's timed prefill stays free of it). The first TokenSelector refuses bad options before any allocation.
  const bool sampled = TokenSelector(options, 0).sampled();
  const uint64_t seed = sampled ? seed_of(options) : options.seed.value_or(0);
  impl_ = std::make_unique<Impl>(m, TokenSelector(options, seed), seed, static_cast<int64_t>(prompts.size()),
                                 capacity);
  Impl& g = *impl_;
  g.vocab = m.manifest.vocab_size;
  g.max_new_tokens = options.max_new_tokens;
  if (options.stop_at_eos) g.eos = m.manifest.eos_token_id;
  g.pad = m.manifest.pad_token_id.value_or(m.manifest.eos_token_id.value_or(0));
  const size_t batch = prompts.size();
  g.ids.resize(batch);
  g.finished.resize(batch);
  g.last.assign(batch, -1);
  detail::PaddedBatch padded = detail::left_pad(prompts, g.pad);  // (B, T)
  g.prompts = std::move(prompts);
  g.feed.assign(batch, g.pad);
  g.logits = detail::onnxruntime_call([&] { return g.runner.prefill(padded.input_ids, padded.attention_mask); });
}

Generator::Generator(Generator&&) noexcept = default;
Generator& Generator::operator=(Generator&&) noexcept = default;
Generator::~Generator() = default;

size_t Generator::batch_size() const { return impl_->prompts.size(); }

uint64_t Generator::seed() const { return impl_->seed; }

bool Generator::done() const {
  return std::all_of(impl_->finished.begin(), impl_->finished.end(), [](const auto& f) { return f.has_value(); });
}

const float* Generator::logits(size_t row) const { return impl_->logits + row * impl_->vocab; }

const std::vector<int64_t>& Generator::next() {
  if (done()) throw std::logic_error("Generator::next after every row has ended");
  Impl& g = *impl_;
  std::vector<int64_t>& feed = g.feed;  // (B,): ended rows are fed the pad id
  for (size_t row = 0; row < g.prompts.size(); ++row) {
    g.last[row] = -1;
    feed[row] = g.pad;
    if (g.finished[row]) continue;
    const int64_t id = g.select[row](logits(row), static_cast<size_t>(g.vocab));
    g.ids[row].push_back(id);
    g.last[row] = feed[row] = id;
    if (g.eos && id == *g.eos) {
      g.finished[row] = FinishReason::eos;
    } else if (static_cast<int>(g.ids[row].size()) == g.max_new_tokens) {
      g.finished[row] = FinishReason::length;
    }
  }
  if (done()) return g.last;  // no decode step for a token nobody reads
  g.logits = detail::onnxruntime_call([&] { return g.runner.decode(feed); });  // the mask grows inside
  return g.last;
}

std::vector<Generation> Generator::results() const {
  std::vector<Generation> out;
  for (size_t row = 0; row < impl_->prompts.size(); ++row) {
    out.push_back({impl_->prompts[row], impl_->ids[row], "", impl_->finished[row].value_or(FinishReason::length)});
  }
  return out;
}

}  // namespace gpt2_onnx
