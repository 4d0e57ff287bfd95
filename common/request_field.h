// The request field a refusal concerns, carried as an absl::Status payload. The one request
// check (Engine::CheckRequest, and the token ids of server/generate_request.cc) names its own
// fields (the gRPC proto's: prompt_tokens, max_new_tokens) in its message; a front end whose
// protocol names them otherwise (the OpenAI HTTP API: max_tokens, prompt, messages) reads the
// field here and maps it, for its error's `param` and the message's words, without a second check.
#ifndef NEUPIMS_COMMON_REQUEST_FIELD_H_
#define NEUPIMS_COMMON_REQUEST_FIELD_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace neupims {

inline constexpr absl::string_view kRequestFieldPayload = "type.neupims/RequestField";
// The engine's field names (engine::SubmitSpec, proto/neupims/v1/llm_service.proto).
inline constexpr absl::string_view kPromptTokensField = "prompt_tokens";
inline constexpr absl::string_view kMaxNewTokensField = "max_new_tokens";

// `status` marked as concerning request field `field`.
inline absl::Status WithRequestField(absl::Status status, absl::string_view field) {
  status.SetPayload(kRequestFieldPayload, absl::Cord(field));
  return status;
}

// The field WithRequestField marked; empty when none.
inline std::string RequestFieldOf(const absl::Status& status) {
  const auto field = status.GetPayload(kRequestFieldPayload);
  return field.has_value() ? std::string(*field) : std::string();
}

}  // namespace neupims

#endif  // NEUPIMS_COMMON_REQUEST_FIELD_H_
