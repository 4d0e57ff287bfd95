// The one place where the project's absl::Status codes become the front ends' statuses: gRPC
// status codes, and HTTP statuses with OpenAI's error types for the OpenAI-compatible API.
#ifndef NEUPIMS_SERVER_STATUS_MAP_H_
#define NEUPIMS_SERVER_STATUS_MAP_H_

#include <cstddef>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace neupims::server {

// The longest gRPC status message sent as is. Messages echo what the client sent (an id, a model
// name, a shape), and gRPC carries the message in a trailer, percent-encoded (a non-ASCII byte
// takes three), that a client drops when it is over its metadata limit (8-16 KiB), replacing the
// status with its own RESOURCE_EXHAUSTED. A longer message is cut at a UTF-8 character boundary
// and ends "... (N bytes in all)".
inline constexpr size_t kMaxGrpcMessageBytes = 1024;

// The code mapped one to one; the message cut to kMaxGrpcMessageBytes.
grpc::Status ToGrpcStatus(const absl::Status& status);

// An error as the OpenAI HTTP API reports it: the HTTP status and the error object's "type".
struct HttpError {
  int http_status = 500;
  const char* type = "internal_server_error";
};

// 400 invalid argument / failed precondition / already exists, 404 not found (an unknown model),
// 413 a request too large for the model (engine::IsRequestTooLarge), 429 resource exhausted
// (the waiting queue is full), 503 unavailable (draining), 499 cancelled, 504 deadline,
// 501 unimplemented, 500 otherwise. Not for OK.
HttpError ToHttpError(const absl::Status& status);

}  // namespace neupims::server

#endif  // NEUPIMS_SERVER_STATUS_MAP_H_
