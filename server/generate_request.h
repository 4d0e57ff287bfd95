// GenerateInput: a generation request as every front end receives it (gRPC's GenerateRequest,
// the OpenAI-compatible HTTP API's completions), and the one path from it to the engine.
//
// Both front ends build a GenerateInput from their wire format and call SubmitGenerate, so the
// checks (the served model, the vocabulary, then the engine's own Engine::CheckRequest through
// EngineRunner::Submit) and the error metrics are the same whatever the protocol.
#ifndef NEUPIMS_SERVER_GENERATE_REQUEST_H_
#define NEUPIMS_SERVER_GENERATE_REQUEST_H_

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "server/engine_runner.h"
#include "server/metrics.h"

namespace neupims::server {

// A prompt given only by its length in tokens (gRPC's prompt_length; trace replays).
struct PromptLength {
  int64_t tokens = 0;
};

// Text (tokenised by the server's ByteTokenizer), token ids, or a length.
using Prompt = std::variant<std::string, std::vector<int64_t>, PromptLength>;

struct GenerateInput {
  std::string request_id;  // empty: the runner names it
  std::string model;       // empty: the served model
  Prompt prompt = PromptLength{};
  int64_t max_new_tokens = 0;
  bool ignore_eos = false;
  uint64_t seed = 0;
  int priority = 0;
};

// NOT_FOUND for a model not served here, INVALID_ARGUMENT for a token id outside the
// vocabulary. Lengths are the engine's to judge (Engine::CheckRequest, in EngineRunner::Submit).
absl::StatusOr<SubmitArgs> ToSubmitArgs(const ServedEngine& served, const ByteTokenizer& tokenizer,
                                        const GenerateInput& input);

// ToSubmitArgs, then EngineRunner::Submit; a refusal is counted in `metrics` (may be null) by
// its code and returned. On success the sink receives the request's output.
absl::StatusOr<std::string> SubmitGenerate(EngineRunner* runner, ServerMetrics* metrics,
                                           const GenerateInput& input,
                                           std::shared_ptr<RequestSink> sink);

}  // namespace neupims::server

#endif  // NEUPIMS_SERVER_GENERATE_REQUEST_H_
