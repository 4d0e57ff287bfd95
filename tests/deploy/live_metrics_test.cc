// Every metric the dashboard (deploy/grafana/neupims.json) and the rules
// (deploy/prometheus/rules.yml) refer to is one a live server really exports: the real server
// on ephemeral loopback ports serves a few requests over gRPC, and its /metrics scrape is the
// reference. Recording-rule names count as defined; `up` is Prometheus' own.
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "deploy_test_util.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "neupims/v1/llm_service.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "server/server.h"

namespace neupims::deploy_test {
namespace {

using neupims::v1::CompleteResponse;
using neupims::v1::GenerateRequest;
using neupims::v1::LlmService;

// Series Prometheus adds itself, not the server.
const std::set<std::string>& PrometheusOwn() {
  static const std::set<std::string> kOwn = {"up", "ALERTS", "ALERTS_FOR_STATE"};
  return kOwn;
}

class LiveMetricsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server::ServerOptions o;
    o.port = 0;
    o.metrics_port = 0;
    o.http_port = std::nullopt;  // not used; the default 8000 may be taken
    o.runner.pacing = server::Pacing::kFast;
    absl::StatusOr<std::unique_ptr<server::Server>> s = server::Server::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    const absl::Status served = CompleteEach((*s)->port(), 4, 32, 16);
    ASSERT_TRUE(served.ok()) << served;
    auto stub = LlmService::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*s)->port()),
                                                        grpc::InsecureChannelCredentials()));
    GenerateRequest bad;  // refused: a request error series appears
    bad.set_prompt_length(8);
    bad.set_max_new_tokens(0);
    grpc::ClientContext ctx;
    CompleteResponse resp;
    ASSERT_EQ(stub->Complete(&ctx, bad, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    const HttpResponse scrape = HttpGet((*s)->metrics_port(), "/metrics");
    ASSERT_EQ(scrape.status, 200);
    names_ = new std::set<std::string>(ScrapeSampleNames(scrape.body));
    (*s)->Shutdown();
  }
  static void TearDownTestSuite() { delete names_; }

  // The names of `expr` that are neither exported nor defined: recording rules in `records`.
  static std::vector<std::string> Unknown(const std::string& expr,
                                          const std::set<std::string>& records) {
    std::vector<std::string> unknown;
    for (const std::string& n : PromqlMetricNames(expr)) {
      if (!names_->contains(n) && !records.contains(n) && !PrometheusOwn().contains(n)) {
        unknown.push_back(n);
      }
    }
    return unknown;
  }

  static std::set<std::string>* names_;
};

std::set<std::string>* LiveMetricsTest::names_ = nullptr;

TEST(PromqlMetricNamesTest, SkipsFunctionsLabelsKeywordsAndVariables) {
  EXPECT_EQ(PromqlMetricNames(R"(histogram_quantile(0.99, sum by (le, model_name) )"
                              R"((rate(neupims:ttft_bucket{model_name=~"$m",le!="1e3"}[5m]))))"),
            (std::set<std::string>{"neupims:ttft_bucket"}));
  EXPECT_EQ(PromqlMetricNames("a:b / on (instance) group_left c_total > 1e3 and bool d offset 5m"),
            (std::set<std::string>{"a:b", "c_total", "d"}));
  EXPECT_EQ(PromqlMetricNames("up{job=\"x\"} == 0"), (std::set<std::string>{"up"}));
}

TEST_F(LiveMetricsTest, ScrapeHasTheServersFamilies) {
  ASSERT_NE(names_, nullptr);
  EXPECT_TRUE(names_->contains("neupims:request_success_total"));
  EXPECT_TRUE(names_->contains("neupims:time_to_first_token_seconds_bucket"));
  EXPECT_TRUE(names_->contains("neupims:request_errors_total"));
  EXPECT_FALSE(names_->contains("neupims:no_such_metric"));
}

TEST_F(LiveMetricsTest, EveryRuleExpressionSelectsExportedSeries) {
  ASSERT_NE(names_, nullptr);
  const RulesFile rules = ParseRulesFile(ReadFile(SourcePath("deploy/prometheus/rules.yml")));
  ASSERT_GE(rules.records.size(), 10u);
  ASSERT_GE(rules.alerts.size(), 7u);
  ASSERT_EQ(rules.exprs.size(), rules.records.size() + rules.alerts.size());
  const std::set<std::string> records(rules.records.begin(), rules.records.end());
  for (const std::string& expr : rules.exprs) {
    EXPECT_FALSE(PromqlMetricNames(expr).empty()) << expr;
    EXPECT_EQ(Unknown(expr, records), std::vector<std::string>{}) << expr;
  }
}

TEST_F(LiveMetricsTest, EveryDashboardQuerySelectsExportedSeriesOrRecordingRules) {
  ASSERT_NE(names_, nullptr);
  const RulesFile rules = ParseRulesFile(ReadFile(SourcePath("deploy/prometheus/rules.yml")));
  const std::set<std::string> records(rules.records.begin(), rules.records.end());
  const nlohmann::json dashboard =
      nlohmann::json::parse(ReadFile(SourcePath("deploy/grafana/neupims.json")));
  int queries = 0;
  std::set<std::string> used;
  for (const nlohmann::json& panel : dashboard.at("panels")) {
    if (panel.at("type") == "row") continue;
    ASSERT_TRUE(panel.contains("targets")) << panel.at("title");
    for (const nlohmann::json& target : panel.at("targets")) {
      const std::string expr = target.at("expr");
      ++queries;
      const std::set<std::string> names = PromqlMetricNames(expr);
      EXPECT_FALSE(names.empty()) << expr;
      used.insert(names.begin(), names.end());
      EXPECT_EQ(Unknown(expr, records), std::vector<std::string>{})
          << panel.at("title") << ": " << expr;
    }
  }
  // Template variables read label values of a metric too.
  for (const nlohmann::json& var : dashboard.at("templating").at("list")) {
    if (var.at("type") != "query") continue;
    const std::string q = var.at("query").at("query");
    const std::string metric = q.substr(q.find('(') + 1, q.find(',') - q.find('(') - 1);
    EXPECT_TRUE(names_->contains(metric)) << q;
  }
  EXPECT_GE(queries, 30);
  // The dashboard plots the recording rules it relies on, not just raw series.
  int recorded = 0;
  for (const std::string& n : used) recorded += records.contains(n) ? 1 : 0;
  EXPECT_GE(recorded, 10);
}

}  // namespace
}  // namespace neupims::deploy_test
