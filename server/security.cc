#include "server/security.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_io.h"
#include "common/status_macros.h"

namespace neupims::server {
namespace {

// PEM files and token files are small; a larger one is a wrong path.
constexpr int64_t kMaxPemBytes = int64_t{1} << 20;
constexpr int64_t kMaxTokenFileBytes = int64_t{64} << 10;

// An option as both the command line and the config file name it, for errors.
struct OptionName {
  const char* flag;
  const char* key;
};
constexpr OptionName kCert{"--tls-cert", "tls_cert"};
constexpr OptionName kKey{"--tls-key", "tls_key"};
constexpr OptionName kClientCa{"--tls-client-ca", "tls_client_ca"};
constexpr OptionName kTokenFile{"--auth-token-file", "auth_token_file"};

std::string Name(OptionName o) { return absl::StrCat(o.flag, " (config \"", o.key, "\")"); }

absl::Status Bad(OptionName o, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(Name(o), ": ", message));
}

struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using BioPtr = std::unique_ptr<BIO, BioFree>;

BioPtr MemoryBio(const std::string& text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// OpenSSL's error queue as text, emptied.
std::string TakeOpenSslErrors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    absl::StrAppend(&out, out.empty() ? "" : "; ", buf);
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

// True when the error queue holds only the "no start line" that ends every PEM read loop.
bool OnlyEndOfPem() {
  const unsigned long e = ERR_peek_last_error();
  return e == 0 || (ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE);
}

// Every certificate of a PEM text, in order; a damaged one is an error.
absl::StatusOr<std::vector<X509Ptr>> ParseCertificates(const std::string& pem) {
  ERR_clear_error();
  BioPtr bio = MemoryBio(pem);
  std::vector<X509Ptr> certs;
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) certs.emplace_back(x);
  if (!OnlyEndOfPem()) {
    return absl::InvalidArgumentError(absl::StrCat("bad PEM certificate: ", TakeOpenSslErrors()));
  }
  ERR_clear_error();
  if (certs.empty()) return absl::InvalidArgumentError("no PEM certificate in the file");
  return certs;
}

// OpenSSL's default would ask for a passphrase on the terminal.
int NoPassphrase(char*, int, int, void*) { return -1; }

absl::StatusOr<PkeyPtr> ParsePrivateKey(const std::string& pem) {
  ERR_clear_error();
  BioPtr bio = MemoryBio(pem);
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("no unencrypted PEM private key in the file (", TakeOpenSslErrors(), ")"));
  }
  return key;
}

// Reads one of the files; its errors (which name the path) are prefixed with the option.
absl::StatusOr<std::string> ReadOptionFile(OptionName o, const std::string& path,
                                           int64_t max_bytes) {
  absl::StatusOr<std::string> data = ReadInputFile(path, max_bytes);
  if (data.ok()) return data;
  const std::string message = absl::StrCat(Name(o), ": ", data.status().message());
  // A missing file keeps NotFound; every other problem is bad input too (exit code 2).
  if (absl::IsNotFound(data.status())) return absl::NotFoundError(message);
  return absl::InvalidArgumentError(message);
}

std::array<uint8_t, 32> Sha256(absl::string_view data) {
  std::array<uint8_t, 32> digest{};
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha256(), nullptr);
  return digest;
}

// The token: the file's first line (TokenFromFileContents, the load generator's rule too).
absl::StatusOr<std::string> ReadToken(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string data, ReadOptionFile(kTokenFile, path, kMaxTokenFileBytes));
  absl::StatusOr<std::string> token = TokenFromFileContents(data);
  if (!token.ok()) return Bad(kTokenFile, absl::StrCat(path, ": ", token.status().message()));
  return token;
}

absl::Status CheckTlsPairing(const SecurityOptions& o) {
  if (!o.tls_key.empty() && o.tls_cert.empty()) {
    return Bad(kKey, absl::StrCat("given without ", Name(kCert), "; TLS needs both"));
  }
  if (!o.tls_cert.empty() && o.tls_key.empty()) {
    return Bad(kCert, absl::StrCat("given without ", Name(kKey), "; TLS needs both"));
  }
  if (!o.tls_client_ca.empty() && o.tls_cert.empty()) {
    return Bad(kClientCa, absl::StrCat("mutual TLS needs TLS: give ", Name(kCert), " and ",
                                       Name(kKey), " too"));
  }
  return absl::OkStatus();
}

// Reads the certificate and the key and checks that they belong together.
absl::Status LoadCertificateAndKey(const SecurityOptions& o, std::string* cert_pem,
                                   std::string* key_pem) {
  ASSIGN_OR_RETURN(*cert_pem, ReadOptionFile(kCert, o.tls_cert, kMaxPemBytes));
  absl::StatusOr<std::vector<X509Ptr>> chain = ParseCertificates(*cert_pem);
  if (!chain.ok()) return Bad(kCert, absl::StrCat(o.tls_cert, ": ", chain.status().message()));
  ASSIGN_OR_RETURN(*key_pem, ReadOptionFile(kKey, o.tls_key, kMaxPemBytes));
  absl::StatusOr<PkeyPtr> key = ParsePrivateKey(*key_pem);
  if (!key.ok()) return Bad(kKey, absl::StrCat(o.tls_key, ": ", key.status().message()));
  if (X509_check_private_key(chain->front().get(), key->get()) != 1) {
    ERR_clear_error();
    return Bad(kKey, absl::StrCat(o.tls_key, ": does not match the (first) certificate in ",
                                  Name(kCert), " ", o.tls_cert));
  }
  return absl::OkStatus();
}

bool IsLoopback(const std::string& a) {
  return a.rfind("127.", 0) == 0 || a == "::1" || a == "[::1]" || a == "localhost";
}

}  // namespace

std::string BindWarning(const std::string& bind_address, const SecurityOptions& o) {
  const bool client_check = o.token() || !o.tls_client_ca.empty();
  if (IsLoopback(bind_address) || (o.tls() && client_check)) return "";
  std::vector<std::string> missing, risks;
  if (!o.tls()) {
    missing.push_back("TLS (--tls-cert, --tls-key)");
    risks.push_back("requests, outputs and any token cross the network in clear text");
  }
  if (!client_check) {
    missing.push_back("client authentication (--auth-token-file or --tls-client-ca)");
    risks.push_back("anyone who can reach these ports can submit requests and read the outputs");
  }
  return absl::StrCat("warning: listening on ", bind_address, " without ",
                      absl::StrJoin(missing, " and without "), ": ", absl::StrJoin(risks, "; "));
}

absl::StatusOr<std::shared_ptr<const Security>> Security::Load(const SecurityOptions& o) {
  RETURN_IF_ERROR(CheckTlsPairing(o));
  std::shared_ptr<Security> s(new Security());
  if (o.tls()) RETURN_IF_ERROR(LoadCertificateAndKey(o, &s->cert_pem_, &s->key_pem_));
  if (!o.tls_client_ca.empty()) {
    ASSIGN_OR_RETURN(s->client_ca_pem_, ReadOptionFile(kClientCa, o.tls_client_ca, kMaxPemBytes));
    absl::StatusOr<std::vector<X509Ptr>> cas = ParseCertificates(s->client_ca_pem_);
    if (!cas.ok()) {
      return Bad(kClientCa, absl::StrCat(o.tls_client_ca, ": ", cas.status().message()));
    }
  }
  if (o.token()) {
    ASSIGN_OR_RETURN(const std::string token, ReadToken(o.auth_token_file));
    s->token_digest_ = Sha256(token);
    s->has_token_ = true;
  }
  return std::shared_ptr<const Security>(std::move(s));
}

absl::Status Security::CheckAuthorization(const std::vector<absl::string_view>& values) const {
  if (!has_token_) return absl::OkStatus();
  if (values.empty()) {
    return absl::UnauthenticatedError(
        "missing bearer token: this server requires the header `authorization: Bearer <token>`");
  }
  if (values.size() > 1) return absl::UnauthenticatedError("more than one authorization header");
  const absl::string_view v = absl::StripAsciiWhitespace(values.front());
  constexpr absl::string_view kScheme = "bearer ";
  if (v.size() <= kScheme.size() || !absl::StartsWithIgnoreCase(v, kScheme)) {
    return absl::UnauthenticatedError(
        "the authorization header is not a bearer token: expected `Bearer <token>`");
  }
  // Digests of equal length, compared in constant time: the token's length does not leak either.
  const std::array<uint8_t, 32> presented =
      Sha256(absl::StripLeadingAsciiWhitespace(v.substr(kScheme.size())));
  if (CRYPTO_memcmp(presented.data(), token_digest_.data(), presented.size()) != 0) {
    return absl::UnauthenticatedError("invalid bearer token");
  }
  return absl::OkStatus();
}

bool Security::ConfigureServerContext(SSL_CTX* ctx) const {
  if (!tls()) return false;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  absl::StatusOr<std::vector<X509Ptr>> chain = ParseCertificates(cert_pem_);
  absl::StatusOr<PkeyPtr> key = ParsePrivateKey(key_pem_);
  if (!chain.ok() || !key.ok() || SSL_CTX_use_certificate(ctx, chain->front().get()) != 1) {
    return false;
  }
  for (size_t i = 1; i < chain->size(); ++i) {
    // The context takes the certificate on success.
    if (SSL_CTX_add_extra_chain_cert(ctx, (*chain)[i].get()) != 1) return false;
    (void)(*chain)[i].release();
  }
  if (SSL_CTX_use_PrivateKey(ctx, key->get()) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    return false;
  }
  if (!mutual_tls()) return true;
  absl::StatusOr<std::vector<X509Ptr>> cas = ParseCertificates(client_ca_pem_);
  if (!cas.ok()) return false;
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  for (const X509Ptr& ca : *cas) {
    // Both copy the certificate (the store and the CA-name list take references).
    if (X509_STORE_add_cert(store, ca.get()) != 1 || SSL_CTX_add_client_CA(ctx, ca.get()) != 1) {
      return false;
    }
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return true;
}

}  // namespace neupims::server
