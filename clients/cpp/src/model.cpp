#include "gpt2_onnx/model.hpp"

#include "file_check.hpp"
#include "gpt2_onnx/generator.hpp"
#include "kv_runner.hpp"
#include "model_impl.hpp"

namespace gpt2_onnx {
namespace {

// The files onnxruntime-genai's tokenizer reads from the folder.
const std::vector<std::string> kTokenizerFiles = {"genai_config.json", "tokenizer.json", "tokenizer_config.json"};

void check_options(const ModelOptions& options) {
  if (options.provider != "cpu" && options.provider != "cuda") {
    throw OptionsError("unknown provider '" + options.provider + "'; choose cpu or cuda");
  }
  if (options.intra_op_threads < 0 || options.inter_op_threads < 0) {
    throw OptionsError("thread counts must be >= 0 (0: ONNX Runtime's default)");
  }
  if (options.device_id < 0) throw OptionsError("device_id must be >= 0");
}

}  // namespace

const char* to_string(WeightLoading loading) {
  switch (loading) {
    case WeightLoading::shared_prepacked:
      return "shared";
    case WeightLoading::shared_unpacked:
      return "shared-unpacked";
    case WeightLoading::per_session:
      return "per-session";
  }
  return "?";
}

std::optional<WeightLoading> weight_loading_named(const std::string& name) {
  for (auto way : {WeightLoading::shared_prepacked, WeightLoading::shared_unpacked, WeightLoading::per_session}) {
    if (name == to_string(way)) return way;
  }
  return std::nullopt;
}

const char* to_string(FinishReason reason) { return reason == FinishReason::eos ? "eos" : "length"; }

Model Model::open(const std::filesystem::path& folder, const ModelOptions& options) {
  check_options(options);
  detail::init_onnxruntime();  // before any ONNX Runtime object, the empty Env below included
  auto impl = std::make_unique<Impl>();
  impl->folder = folder;
  impl->manifest = read_manifest(folder);
  const Manifest& manifest = impl->manifest;
  std::vector<std::string> needed = {manifest.prefill.file, manifest.decode.file, manifest.weights_file};
  const bool with_tokenizer = options.tokenizer && text_available();
  if (with_tokenizer) needed.insert(needed.end(), kTokenizerFiles.begin(), kTokenizerFiles.end());
  detail::check_files(folder, manifest, needed, options.file_check);

  detail::check_onnxruntime_version(manifest);
  detail::onnxruntime_call([&] {
    impl->env = Ort::Env(ORT_LOGGING_LEVEL_WARNING, "gpt2_onnx");
    impl->sessions = std::make_unique<detail::ExportSessions>(impl->env, folder, manifest, options);
  });
  if (with_tokenizer) impl->tokenizer = Tokenizer::open(folder);
  return Model(std::move(impl));
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

const Manifest& Model::manifest() const { return impl_->manifest; }
const std::filesystem::path& Model::folder() const { return impl_->folder; }
WeightLoading Model::weight_loading() const { return impl_->sessions->weight_loading(); }
bool Model::has_tokenizer() const { return impl_->tokenizer.has_value(); }

std::optional<SharedWeights> Model::shared_weights() const {
  const detail::MappedWeights* weights = impl_->sessions->shared_weights();
  if (weights == nullptr) return std::nullopt;
  return SharedWeights{weights->tensor_count(), weights->mapped_bytes()};
}

const Tokenizer& Model::tokenizer() const {
  if (!impl_->tokenizer) {
    throw TextUnavailableError(text_available() ? "this model was opened without its tokenizer"
                                                : std::string("this gpt2_onnx was built without the text layer: ") +
                                                      text_unavailable_reason());
  }
  return *impl_->tokenizer;
}

Generation Model::generate(const std::vector<int64_t>& prompt_ids, const GenerateOptions& options,
                           const TokenCallback& on_token) {
  Generator generator(*this, {prompt_ids}, options);
  std::optional<TextStream> text;
  if (impl_->tokenizer) text.emplace(impl_->tokenizer->stream());
  std::string all;  // every piece: the stream's text adds up to decode(ids)
  while (!generator.done()) {
    const int64_t id = generator.next()[0];
    const std::string piece = text ? text->push(id) : "";
    all += piece;
    if (on_token) on_token(id, piece);
  }
  if (text) {
    const std::string rest = text->finish();
    all += rest;
    if (on_token && !rest.empty()) on_token(-1, rest);
  }
  Generation result = generator.results()[0];
  result.text = std::move(all);
  return result;
}

std::vector<Generation> Model::generate(const std::vector<std::vector<int64_t>>& prompts,
                                        const GenerateOptions& options) {
  Generator generator(*this, prompts, options);
  while (!generator.done()) generator.next();
  std::vector<Generation> results = generator.results();
  if (impl_->tokenizer) {
    for (auto& result : results) result.text = impl_->tokenizer->decode(result.ids);
  }
  return results;
}

Generation Model::generate(std::string_view prompt, const GenerateOptions& options, const TokenCallback& on_token) {
  return generate(tokenizer().encode(prompt), options, on_token);
}

std::vector<Generation> Model::generate(const std::vector<std::string>& prompts, const GenerateOptions& options) {
  std::vector<std::vector<int64_t>> ids;
  for (const auto& prompt : prompts) ids.push_back(tokenizer().encode(prompt));
  return generate(ids, options);
}

std::vector<float> Model::next_token_logits(const std::vector<int64_t>& prompt_ids) {
  detail::check_prompts(impl_->manifest, {prompt_ids}, 1);
  detail::PaddedBatch batch = detail::left_pad({prompt_ids}, 0);  // (1, T)
  detail::KvRunner runner(*impl_->sessions, 1, batch.input_ids.cols);
  const float* logits = detail::onnxruntime_call([&] { return runner.prefill(batch.input_ids, batch.attention_mask); });
  return std::vector<float>(logits, logits + impl_->manifest.vocab_size);  // (V,)
}

std::string Model::onnxruntime_version() {
  detail::init_onnxruntime();
  return Ort::GetVersionString();
}

}  // namespace gpt2_onnx
