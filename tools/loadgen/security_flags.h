// The client side of a secured `neupims serve` as command-line flags: one definition for the
// load generator (neupims-bench) and the soak (bench/soak).
#ifndef NEUPIMS_TOOLS_LOADGEN_SECURITY_FLAGS_H_
#define NEUPIMS_TOOLS_LOADGEN_SECURITY_FLAGS_H_

#include <string>

#include "CLI/CLI.hpp"
#include "tools/loadgen/loadgen.h"
#include "tools/workload/range_flag.h"

namespace neupims::loadgen {

// --tls-ca, --tls-cert, --tls-key into `tls`, and --auth-token-file into `auth_token_file`.
// Only their emptiness is checked here: the files are read by ChannelCredentials and
// ReadAuthToken, whose errors name the flag and the file.
inline void AddClientSecurityFlags(CLI::App* app, TlsClientOptions* tls,
                                   std::string* auth_token_file) {
  app->add_option("--auth-token-file", *auth_token_file,
                  "File whose first line is the bearer token of a server started with "
                  "--auth-token-file; sent with every call")
      ->check(NonEmpty());
  app->add_option("--tls-ca", tls->ca,
                  "PEM CA certificate that signed the certificate of a server started with "
                  "--tls-cert: its gRPC services are reached over TLS, and an https:// URL is "
                  "verified with it")
      ->check(NonEmpty());
  app->add_option("--tls-cert", tls->cert,
                  "PEM client certificate for a server with --tls-client-ca (mutual TLS; needs "
                  "--tls-key)")
      ->check(NonEmpty());
  app->add_option("--tls-key", tls->key, "PEM private key of --tls-cert (unencrypted)")
      ->check(NonEmpty());
}

}  // namespace neupims::loadgen

#endif  // NEUPIMS_TOOLS_LOADGEN_SECURITY_FLAGS_H_
