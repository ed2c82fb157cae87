// Generation one step at a time, for callers that time or inspect each step (the benchmark, the golden check):
// the constructor runs the prefill, each next() chooses a token per running row and runs the decode step that gives
// the logits of the next one. Model::generate is this loop.
//
//   gpt2_onnx::Generator g(model, {prompt_ids}, options);   // prefill
//   while (!g.done()) g.next();                              // one token per row and step
//   gpt2_onnx::Generation result = g.results()[0];
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "gpt2_onnx/model.hpp"
#include "gpt2_onnx/options.hpp"

namespace gpt2_onnx {

class Generator {
 public:
  // Validates the options and prompts (OptionsError, PromptTooLongError), left-pads the batch and runs the prefill.
  // Sampling: each row draws from its own SplitMix64 started at one seed (options.seed, else a fresh random one), so
  // that a prompt samples the same ids alone or in a batch.
  // The model must outlive the generator; generators of one model must not run at the same time.
  Generator(Model& model, std::vector<std::vector<int64_t>> prompts, const GenerateOptions& options);
  Generator(Generator&&) noexcept;
  Generator& operator=(Generator&&) noexcept;
  ~Generator();

  size_t batch_size() const;
  // The seed every row's SplitMix64 starts from: options.seed, else the fresh random one drawn for this sampled
  // generation (give it as options.seed to sample the same ids again); a greedy one draws none (0).
  uint64_t seed() const;
  bool done() const;  // every row has ended (end-of-text or max_new_tokens)
  // The logits (V,) the next token of `row` will be chosen from.
  const float* logits(size_t row) const;
  // Chooses each running row's next token (finished rows get -1), records it, and, unless every row has now ended,
  // runs one decode step for the next logits. No decode step follows the last token.
  const std::vector<int64_t>& next();
  // Every row so far: prompt ids, new ids, finish reason; text is left "" (Model::generate fills it).
  std::vector<Generation> results() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpt2_onnx
