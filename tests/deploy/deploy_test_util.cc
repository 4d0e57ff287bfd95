#include "deploy_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grpcpp/grpcpp.h"
#include "neupims/v1/llm_service.grpc.pb.h"
#include "tests/raw_http_get.h"

namespace neupims::deploy_test {

absl::Status CompleteEach(int port, int n, int first_prompt, int prompt_step) {
  auto stub = v1::LlmService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  for (int i = 0; i < n; ++i) {
    v1::GenerateRequest r;
    r.set_prompt_length(first_prompt + prompt_step * i);
    r.set_max_new_tokens(8);
    r.set_ignore_eos(true);
    grpc::ClientContext ctx;
    v1::CompleteResponse resp;
    if (const grpc::Status s = stub->Complete(&ctx, r, &resp); !s.ok()) {
      return absl::UnknownError(
          absl::StrCat("Complete ", i, ": gRPC code ", s.error_code(), ": ", s.error_message()));
    }
  }
  return absl::OkStatus();
}

std::string SourcePath(const std::string& relative) {
  return absl::StrCat(NEUPIMS_SOURCE_DIR, "/", relative);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

HttpResponse HttpGet(int port, const std::string& target) {
  HttpResponse out;
  const std::string response = testing_util::RawHttpGet(port, target, /*timeout_s=*/10);
  const size_t space = response.find(' ');
  const size_t body = response.find("\r\n\r\n");
  if (space == std::string::npos || body == std::string::npos) return out;
  out.status = std::atoi(response.c_str() + space + 1);
  out.body = response.substr(body + 4);
  return out;
}

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

std::set<std::string> ScrapeSampleNames(const std::string& exposition) {
  std::set<std::string> names;
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t end = line.find_first_of("{ ");
    names.insert(std::string(line.substr(0, end)));
  }
  return names;
}

std::set<std::string> PromqlMetricNames(const std::string& expr) {
  std::string e = expr;
  // Strings, range / subquery brackets, label matchers and Grafana variables hold no metric.
  for (const char* pattern : {R"("(?:[^"\\]|\\.)*")", R"('(?:[^'\\]|\\.)*')", R"(\[[^\]]*\])",
                              R"(\{[^}]*\})", R"(\$\w+)"}) {
    e = std::regex_replace(e, std::regex(pattern), " ");
  }
  // Label lists of grouping and vector-matching clauses.
  e = std::regex_replace(
      e, std::regex(R"(\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\))"), " ");
  static const std::set<std::string> kKeywords = {
      "by",  "without", "on",   "ignoring", "group_left", "group_right", "and",
      "or",  "unless",  "bool", "offset",   "inf",        "nan",         "Inf",
      "NaN", "atan2",   "topk", "bottomk",  "quantile",   "count_values"};
  std::set<std::string> names;
  const std::regex ident(R"(([A-Za-z_:][A-Za-z0-9_:]*))");
  for (auto it = std::sregex_iterator(e.begin(), e.end(), ident); it != std::sregex_iterator();
       ++it) {
    const size_t at = static_cast<size_t>(it->position(1));
    const std::string name = (*it)[1];
    // Part of a number (1e3, 0.5) or of a longer token.
    if (at > 0 && (std::isalnum(static_cast<unsigned char>(e[at - 1])) || e[at - 1] == '.')) {
      continue;
    }
    size_t next = at + name.size();
    while (next < e.size() && std::isspace(static_cast<unsigned char>(e[next]))) ++next;
    if (next < e.size() && e[next] == '(') continue;  // a function or an aggregation
    if (kKeywords.contains(name)) continue;
    names.insert(name);
  }
  return names;
}

RulesFile ParseRulesFile(const std::string& yaml) {
  RulesFile out;
  const std::vector<std::string> lines = absl::StrSplit(yaml, '\n');
  auto indent = [](const std::string& l) { return l.find_first_not_of(' '); };
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string trimmed(absl::StripAsciiWhitespace(lines[i]));
    if (absl::StartsWith(trimmed, "- record:")) {
      out.records.emplace_back(absl::StripAsciiWhitespace(trimmed.substr(9)));
    } else if (absl::StartsWith(trimmed, "- alert:")) {
      out.alerts.emplace_back(absl::StripAsciiWhitespace(trimmed.substr(8)));
    } else if (absl::StartsWith(trimmed, "expr:")) {
      std::string value(absl::StripAsciiWhitespace(trimmed.substr(5)));
      if (value == "|" || value == ">" || value == "|-" || value == ">-") {
        value.clear();
        const size_t base = indent(lines[i]);
        while (i + 1 < lines.size() &&
               (absl::StripAsciiWhitespace(lines[i + 1]).empty() || indent(lines[i + 1]) > base)) {
          absl::StrAppend(&value, lines[++i], "\n");
        }
      }
      out.exprs.push_back(value);
    }
  }
  return out;
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

}  // namespace neupims::deploy_test
