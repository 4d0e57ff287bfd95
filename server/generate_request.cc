#include "server/generate_request.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/request_field.h"

namespace neupims::server {
namespace {

absl::StatusOr<int64_t> PromptTokens(const Prompt& prompt, const models::ModelConfig& m,
                                     const ByteTokenizer& tokenizer) {
  if (const auto* text = std::get_if<std::string>(&prompt)) {
    return static_cast<int64_t>(tokenizer.Encode(*text).size());
  }
  if (const auto* ids = std::get_if<std::vector<int64_t>>(&prompt)) {
    for (int64_t id : *ids) {
      if (id < 0 || id >= m.vocab) {
        return WithRequestField(absl::InvalidArgumentError(absl::StrCat(
                                    "token id ", id, " is outside [0, ", m.vocab, ") of ", m.name)),
                                kPromptTokensField);
      }
    }
    return static_cast<int64_t>(ids->size());
  }
  return std::get<PromptLength>(prompt).tokens;
}

}  // namespace

absl::StatusOr<SubmitArgs> ToSubmitArgs(const ServedEngine& served, const ByteTokenizer& tokenizer,
                                        const GenerateInput& in) {
  const models::ModelConfig& m = served.model;
  if (!in.model.empty() && in.model != m.name) {
    return absl::NotFoundError(
        absl::StrCat("model '", in.model, "' is not served here (serving '", m.name, "')"));
  }
  absl::StatusOr<int64_t> prompt_tokens = PromptTokens(in.prompt, m, tokenizer);
  if (!prompt_tokens.ok()) return prompt_tokens.status();
  SubmitArgs a;
  a.request_id = in.request_id;
  a.prompt_tokens = *prompt_tokens;
  a.max_new_tokens = in.max_new_tokens;
  a.ignore_eos = in.ignore_eos;
  a.seed = in.seed;
  a.priority = in.priority;
  return a;
}

absl::StatusOr<std::string> SubmitGenerate(EngineRunner* runner, ServerMetrics* metrics,
                                           const GenerateInput& input,
                                           std::shared_ptr<RequestSink> sink) {
  absl::StatusOr<std::string> id = [&]() -> absl::StatusOr<std::string> {
    absl::StatusOr<SubmitArgs> args =
        ToSubmitArgs(*runner->Snapshot().served, runner->tokenizer(), input);
    if (!args.ok()) return args.status();
    return runner->Submit(*args, std::move(sink));
  }();
  if (!id.ok() && metrics != nullptr) {
    metrics->OnRequestError(absl::StatusCodeToString(id.status().code()));
  }
  return id;
}

}  // namespace neupims::server
