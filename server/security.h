// Security: TLS and bearer-token authentication, shared by the gRPC and the HTTP front ends.
//
// SecurityOptions are four file paths (flags `--tls-cert`, `--tls-key`, `--tls-client-ca`,
// `--auth-token-file`; config keys `tls_cert`, `tls_key`, `tls_client_ca`, `auth_token_file`).
// Security::Load reads and checks them once at start-up, so a bad file is refused before anything
// listens, with an error naming the flag, the config key and the file; the servers then only
// read the loaded material (PEM text, the token's digest).
//
// The token check compares SHA-256 digests in constant time (CRYPTO_memcmp), so neither the
// token's bytes nor its length leak through timing, and its refusals never echo what was sent.
#ifndef NEUPIMS_SERVER_SECURITY_H_
#define NEUPIMS_SERVER_SECURITY_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace neupims::server {

struct SecurityOptions {
  std::string tls_cert;         // PEM certificate chain (leaf first); with tls_key: TLS
  std::string tls_key;          // PEM private key of the certificate (unencrypted)
  std::string tls_client_ca;    // PEM CA certificate(s): clients must present one they signed
  std::string auth_token_file;  // its first line, trimmed, is the bearer token

  bool tls() const { return !tls_cert.empty() || !tls_key.empty(); }
  bool token() const { return !auth_token_file.empty(); }
  bool any() const { return tls() || !tls_client_ca.empty() || token(); }
};

// The warning `neupims serve` prints when it binds `bind_address`: "" on loopback, or when TLS and
// a client check (a token or mutual TLS) are both on; otherwise it says which is missing.
std::string BindWarning(const std::string& bind_address, const SecurityOptions& options);

class Security {
 public:
  // Reads and checks the files. InvalidArgument (NotFound for a missing file) naming the flag, the
  // config key and the path: a key without a certificate or the reverse, a client CA without TLS,
  // an unreadable or empty file, no PEM certificate or key in it, a key that does not match the
  // certificate, an empty token or one with characters an HTTP header cannot carry.
  static absl::StatusOr<std::shared_ptr<const Security>> Load(const SecurityOptions& options);

  bool tls() const { return !cert_pem_.empty(); }
  bool mutual_tls() const { return !client_ca_pem_.empty(); }
  bool token() const { return has_token_; }
  const std::string& cert_pem() const { return cert_pem_; }
  const std::string& key_pem() const { return key_pem_; }
  const std::string& client_ca_pem() const { return client_ca_pem_; }

  // Checks the `authorization` header values of one request: OK without a configured token, or
  // when there is exactly one value, `Bearer <token>` (scheme case-insensitive). Otherwise
  // UNAUTHENTICATED, saying what was wrong (missing, not a bearer token, wrong token) but never
  // what was sent.
  absl::Status CheckAuthorization(const std::vector<absl::string_view>& values) const;

  // Sets up an OpenSSL server context for the HTTP API: TLS 1.2 or later, the certificate chain
  // and key, and with a client CA, required and verified client certificates. False on failure
  // (not expected: Load checked the same material).
  bool ConfigureServerContext(SSL_CTX* ctx) const;

 private:
  Security() = default;
  std::string cert_pem_, key_pem_, client_ca_pem_;
  bool has_token_ = false;
  std::array<uint8_t, 32> token_digest_{};
};

}  // namespace neupims::server

#endif  // NEUPIMS_SERVER_SECURITY_H_
