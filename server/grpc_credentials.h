// gRPC server credentials for the Security settings (security.h): plaintext or TLS (mutual TLS
// with a client CA), and with a token, a bearer-token check on every call except the health
// service's (grpc.health.v1.Health), so that load balancers and orchestrators can probe health
// without the token. Reflection and neupims.v1.LlmService require it.
//
// The check is gRPC's server auth-metadata processor, which gRPC runs on each call's initial
// metadata before routing it to any service: a refused call never reaches a handler and ends with
// UNAUTHENTICATED. gRPC C++ refuses a processor on its insecure credentials, so these credentials
// are built from gRPC's C API (grpc/grpc_security.h), where the processor applies to plaintext
// and TLS ports alike. The accepted `authorization` header is consumed: handlers never see it.
#ifndef NEUPIMS_SERVER_GRPC_CREDENTIALS_H_
#define NEUPIMS_SERVER_GRPC_CREDENTIALS_H_

#include <functional>
#include <memory>

#include "grpcpp/security/server_credentials.h"
#include "server/security.h"

namespace neupims::server {

// `on_refused` (may be empty) is called once per refused call, on a gRPC thread.
std::shared_ptr<grpc::ServerCredentials> MakeGrpcServerCredentials(
    std::shared_ptr<const Security> security, std::function<void()> on_refused);

}  // namespace neupims::server

#endif  // NEUPIMS_SERVER_GRPC_CREDENTIALS_H_
