// Helpers of the deploy/ tests: the files under deploy/, a plain HTTP client (the server's
// /metrics, Prometheus' API), the metric names of a scrape and of PromQL expressions, and the
// recording rules and expressions of deploy/prometheus/rules.yml.
#ifndef NEUPIMS_TESTS_DEPLOY_DEPLOY_TEST_UTIL_H_
#define NEUPIMS_TESTS_DEPLOY_DEPLOY_TEST_UTIL_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace neupims::deploy_test {

// A file of the source tree (NEUPIMS_SOURCE_DIR), read whole; "" if it cannot be read.
std::string SourcePath(const std::string& relative);
std::string ReadFile(const std::string& path);

struct HttpResponse {
  int status = 0;  // 0: no answer
  std::string body;
};
// HTTP/1.0 GET of `target` (path and query) from 127.0.0.1:port.
HttpResponse HttpGet(int port, const std::string& target);
std::string UrlEncode(const std::string& s);

// Sample names of a text-format scrape (with their _bucket / _sum / _count suffixes).
std::set<std::string> ScrapeSampleNames(const std::string& exposition);

// The metric (or recording-rule) names a PromQL expression selects: identifiers that are not
// functions, aggregations, keywords, label names (inside {} and by / without / on / ignoring
// clauses), strings, durations, numbers or Grafana variables ($x, ${x}).
std::set<std::string> PromqlMetricNames(const std::string& expr);

// deploy/prometheus/rules.yml read line by line (the subset of YAML it uses): the names of its
// recording rules, and every `expr` (single-line or `|` block) in file order.
struct RulesFile {
  std::vector<std::string> records;
  std::vector<std::string> exprs;
  std::vector<std::string> alerts;
};
RulesFile ParseRulesFile(const std::string& yaml);

// Sends `n` gRPC Complete calls (8 tokens each, ignore_eos) to the server on 127.0.0.1:`port`,
// with prompts of `first_prompt`, `first_prompt + prompt_step`, ... tokens, so that its /metrics
// has served traffic to show; the first call that fails, as a Status.
absl::Status CompleteEach(int port, int n, int first_prompt, int prompt_step);

// Loopback TCP port nothing listens on right now.
int FreePort();

}  // namespace neupims::deploy_test

#endif  // NEUPIMS_TESTS_DEPLOY_DEPLOY_TEST_UTIL_H_
