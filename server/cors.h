// CORS (cross-origin resource sharing) for the OpenAI-compatible HTTP API, so that a browser page
// served from another origin can call it: vLLM's --allowed-origins, --allowed-methods,
// --allowed-headers and --allow-credentials (config keys allowed_origins, allowed_methods,
// allowed_headers, allow_credentials). Off by default: no origin allowed, no CORS header sent.
//
// This file decides the headers; openai_api.cc puts them on the responses (a preflight OPTIONS
// from an allowed origin is answered 204 before the bearer-token check, since browsers send it
// without the Authorization header; every other response to an allowed origin carries
// Access-Control-Allow-Origin, errors and SSE streams included).
#ifndef NEUPIMS_SERVER_CORS_H_
#define NEUPIMS_SERVER_CORS_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace neupims::server {

struct CorsOptions {
  // scheme://host[:port] as browsers send them in Origin, or "*" (any origin); empty: CORS off.
  std::vector<std::string> allowed_origins;
  // Preflight answers' Access-Control-Allow-Methods; "*": the API's own (GET, HEAD, POST).
  std::vector<std::string> allowed_methods = {"*"};
  // Preflight answers' Access-Control-Allow-Headers; "*": whatever the preflight asks for
  // (Access-Control-Request-Headers), which covers Authorization too.
  std::vector<std::string> allowed_headers = {"*"};
  // Access-Control-Allow-Credentials: true (cookies, TLS client certificates); with "*" origins
  // the request's own origin is then echoed, as browsers refuse "*" with credentials.
  bool allow_credentials = false;

  bool enabled() const { return !allowed_origins.empty(); }
};

// How long a browser may cache a preflight's answer (Starlette's default, as vLLM's).
inline constexpr int kCorsMaxAgeS = 600;

// One item of each list, checked where a flag or a config key is read (the caller names it):
// INVALID_ARGUMENT saying what is wrong with `item`.
absl::Status CheckCorsOrigin(absl::string_view item);
absl::Status CheckCorsMethod(absl::string_view item);
absl::Status CheckCorsHeader(absl::string_view item);

using HeaderList = std::vector<std::pair<std::string, std::string>>;

class Cors {
 public:
  explicit Cors(CorsOptions options) : options_(std::move(options)) {}

  bool enabled() const { return options_.enabled(); }
  // The headers every response to a request from `origin` carries (Access-Control-Allow-Origin,
  // -Allow-Credentials, Vary); empty when `origin` is empty (not a cross-origin request) or not
  // allowed.
  HeaderList ResponseHeaders(absl::string_view origin) const;
  // A preflight's answer beyond ResponseHeaders (-Allow-Methods, -Allow-Headers, -Max-Age);
  // `requested_headers` is the preflight's Access-Control-Request-Headers.
  HeaderList PreflightHeaders(absl::string_view requested_headers) const;

 private:
  bool Allowed(absl::string_view origin) const;
  CorsOptions options_;
};

}  // namespace neupims::server

#endif  // NEUPIMS_SERVER_CORS_H_
