// The one place where the project's absl::Status codes become gRPC status codes.
#ifndef NEUPIMS_SERVER_STATUS_MAP_H_
#define NEUPIMS_SERVER_STATUS_MAP_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace neupims::server {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace neupims::server

#endif  // NEUPIMS_SERVER_STATUS_MAP_H_
