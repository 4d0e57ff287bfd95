// Fuzzes the request check: the bytes are parsed as a gRPC GenerateRequest, turned into the
// front ends' GenerateInput (LlmServiceImpl::ToInput), checked against the served model
// (ToSubmitArgs) and by the engine's one request check (Engine::CheckRequest), as
// EngineRunner::Submit does. An accepted request fits the model's context; a refusal is
// InvalidArgument or NotFound (a model not served here) with a message.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "neupims/v1/llm_service.pb.h"
#include "server/engine_runner.h"
#include "server/generate_request.h"
#include "server/llm_service.h"
#include "server/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

struct Target {
  std::unique_ptr<neupims::engine::Engine> engine;
  neupims::server::ServedEngine served;
  neupims::server::ByteTokenizer tokenizer;
};

Target& GetTarget() {
  static Target* target = [] {
    auto* t = new Target;
    neupims::engine::EngineOptions options;  // the built-in default model and device
    options.max_prompt_tokens = 1500;
    absl::StatusOr<std::unique_ptr<neupims::engine::Engine>> e =
        neupims::engine::Engine::Create(options);
    FUZZ_CHECK(e.ok(), e.status().ToString());
    t->engine = std::move(*e);
    t->served.model = t->engine->model();
    return t;
  }();
  return *target;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Target& t = GetTarget();
  neupims::v1::GenerateRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  const neupims::server::GenerateInput input = neupims::server::LlmServiceImpl::ToInput(request);
  absl::StatusOr<neupims::server::SubmitArgs> args =
      neupims::server::ToSubmitArgs(t.served, t.tokenizer, input);
  absl::Status status = args.status();
  if (args.ok()) {
    neupims::engine::SubmitSpec spec;
    spec.prompt_tokens = args->prompt_tokens;
    spec.max_new_tokens = args->max_new_tokens;
    spec.priority = args->priority;
    status = t.engine->CheckRequest(spec);
    if (status.ok()) {
      FUZZ_CHECK(spec.prompt_tokens >= 1 && spec.prompt_tokens <= 1500, "prompt");
      FUZZ_CHECK(spec.max_new_tokens >= 1, "max_new_tokens");
      FUZZ_CHECK(spec.prompt_tokens + spec.max_new_tokens <= t.served.model.max_seq_len, "context");
      return 0;
    }
  }
  FUZZ_CHECK(absl::IsInvalidArgument(status) || absl::IsNotFound(status), status.ToString());
  FUZZ_CHECK(!status.message().empty(), "message");
  return 0;
}
