#include "server/status_map.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/engine.h"

namespace neupims::server {
namespace {

// `m`, or its first kMaxGrpcMessageBytes bytes (not splitting a UTF-8 character) and how long
// it was (status_map.h says why).
std::string CutMessage(absl::string_view m) {
  if (m.size() <= kMaxGrpcMessageBytes) return std::string(m);
  size_t end = kMaxGrpcMessageBytes;
  // Back off over continuation bytes (10xxxxxx) to the start of the character the cut hits.
  while (end > 0 && (static_cast<unsigned char>(m[end]) & 0xC0) == 0x80) --end;
  return absl::StrCat(m.substr(0, end), "... (", m.size(), " bytes in all)");
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  switch (s.code()) {
    case absl::StatusCode::kCancelled:
      code = grpc::StatusCode::CANCELLED;
      break;
    case absl::StatusCode::kInvalidArgument:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case absl::StatusCode::kDeadlineExceeded:
      code = grpc::StatusCode::DEADLINE_EXCEEDED;
      break;
    case absl::StatusCode::kNotFound:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case absl::StatusCode::kAlreadyExists:
      code = grpc::StatusCode::ALREADY_EXISTS;
      break;
    case absl::StatusCode::kPermissionDenied:
      code = grpc::StatusCode::PERMISSION_DENIED;
      break;
    case absl::StatusCode::kResourceExhausted:
      code = grpc::StatusCode::RESOURCE_EXHAUSTED;
      break;
    case absl::StatusCode::kFailedPrecondition:
      code = grpc::StatusCode::FAILED_PRECONDITION;
      break;
    case absl::StatusCode::kAborted:
      code = grpc::StatusCode::ABORTED;
      break;
    case absl::StatusCode::kOutOfRange:
      code = grpc::StatusCode::OUT_OF_RANGE;
      break;
    case absl::StatusCode::kUnimplemented:
      code = grpc::StatusCode::UNIMPLEMENTED;
      break;
    case absl::StatusCode::kInternal:
      code = grpc::StatusCode::INTERNAL;
      break;
    case absl::StatusCode::kUnavailable:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    case absl::StatusCode::kDataLoss:
      code = grpc::StatusCode::DATA_LOSS;
      break;
    case absl::StatusCode::kUnauthenticated:
      code = grpc::StatusCode::UNAUTHENTICATED;
      break;
    default:
      code = grpc::StatusCode::UNKNOWN;
      break;
  }
  return grpc::Status(code, CutMessage(s.message()));
}

HttpError ToHttpError(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
      if (engine::IsRequestTooLarge(s)) return {413, "invalid_request_error"};
      return {400, "invalid_request_error"};
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kOutOfRange:
      return {400, "invalid_request_error"};
    case absl::StatusCode::kNotFound:
      return {404, "not_found_error"};
    case absl::StatusCode::kResourceExhausted:
      return {429, "rate_limit_error"};
    case absl::StatusCode::kUnavailable:
      return {503, "service_unavailable_error"};
    case absl::StatusCode::kCancelled:
      return {499, "cancelled_error"};
    case absl::StatusCode::kDeadlineExceeded:
      return {504, "timeout_error"};
    case absl::StatusCode::kUnimplemented:
      return {501, "not_implemented_error"};
    case absl::StatusCode::kPermissionDenied:
      return {403, "permission_denied_error"};
    case absl::StatusCode::kUnauthenticated:
      return {401, "authentication_error"};
    default:
      return {500, "internal_server_error"};
  }
}

}  // namespace neupims::server
