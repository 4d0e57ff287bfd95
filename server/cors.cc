#include "server/cors.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace neupims::server {
namespace {

constexpr const char* kMethods[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};

// RFC 9110's token characters (header field names).
bool IsTokenChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         absl::StrContains("!#$%&'*+-.^_`|~", c);
}

bool Contains(const std::vector<std::string>& list, absl::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

}  // namespace

absl::Status CheckCorsOrigin(absl::string_view item) {
  if (item == "*") return absl::OkStatus();
  const size_t sep = item.find("://");
  const bool scheme_ok = sep != absl::string_view::npos && sep > 0 &&
                         absl::ascii_isalpha(static_cast<unsigned char>(item[0])) &&
                         std::all_of(item.begin(), item.begin() + sep, [](char c) {
                           return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '+' ||
                                  c == '-' || c == '.';
                         });
  const absl::string_view host =
      sep == absl::string_view::npos ? absl::string_view() : item.substr(sep + 3);
  // Browsers send an origin without a path, query or trailing slash: one with them never matches.
  const bool host_ok = !host.empty() && std::none_of(host.begin(), host.end(), [](char c) {
    return c == '/' || c == '?' || c == '#' || c == '*' || absl::ascii_isspace(c) ||
           absl::ascii_iscntrl(c);
  });
  if (!scheme_ok || !host_ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "origin '", item,
        "' is not scheme://host[:port] (e.g. http://localhost:3000, no path or trailing slash) "
        "or '*'"));
  }
  return absl::OkStatus();
}

absl::Status CheckCorsMethod(absl::string_view item) {
  if (item == "*" ||
      std::find(std::begin(kMethods), std::end(kMethods), item) != std::end(kMethods)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("method '", item, "' is not one of *, ", absl::StrJoin(kMethods, ", ")));
}

absl::Status CheckCorsHeader(absl::string_view item) {
  if (!item.empty() && std::all_of(item.begin(), item.end(), IsTokenChar)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("header '", item, "' is not a header name (or '*')"));
}

bool Cors::Allowed(absl::string_view origin) const {
  if (origin.empty()) return false;
  return std::any_of(
      options_.allowed_origins.begin(), options_.allowed_origins.end(),
      [origin](const std::string& o) { return o == "*" || absl::EqualsIgnoreCase(o, origin); });
}

HeaderList Cors::ResponseHeaders(absl::string_view origin) const {
  if (!Allowed(origin)) return {};
  const bool any = Contains(options_.allowed_origins, "*");
  HeaderList h = {{"Access-Control-Allow-Origin",
                   any && !options_.allow_credentials ? "*" : std::string(origin)},
                  {"Vary", "Origin"}};
  if (options_.allow_credentials) h.push_back({"Access-Control-Allow-Credentials", "true"});
  return h;
}

HeaderList Cors::PreflightHeaders(absl::string_view requested_headers) const {
  // "*" is a wildcard to browsers only without credentials, and never covers Authorization: the
  // API's methods and the requested headers are spelled out instead.
  const std::string methods = Contains(options_.allowed_methods, "*")
                                  ? "GET, HEAD, POST"
                                  : absl::StrJoin(options_.allowed_methods, ", ");
  HeaderList h = {{"Access-Control-Allow-Methods", methods},
                  {"Access-Control-Max-Age", absl::StrCat(kCorsMaxAgeS)}};
  if (!Contains(options_.allowed_headers, "*")) {
    h.push_back({"Access-Control-Allow-Headers", absl::StrJoin(options_.allowed_headers, ", ")});
  } else if (!requested_headers.empty()) {
    h.push_back({"Access-Control-Allow-Headers", std::string(requested_headers)});
  }
  return h;
}

}  // namespace neupims::server
