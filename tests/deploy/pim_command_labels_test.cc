// The dashboard's "PIM commands per wall second, by type" panel plots
// neupims:pim_commands_total{command}: each mode's server issues its own command set (NeuPIMs
// sec. 5.2, Table 1; docs/metrics.md). A neupims-mode server issues PIM_HEADER, PIM_GEMV and
// PIM_PRECHARGE and never Newton's PIM_DOTPRODUCT / PIM_RDRESULT; an npu+pim (Newton) server
// issues PIM_DOTPRODUCT / PIM_RDRESULT and never PIM_GEMV or PIM_HEADER. Both issue PIM_GWRITE
// and PIM_ACTIVATION. Real servers (fast pacing, ephemeral loopback ports) serve a few requests;
// their /metrics scrape is read.
#include <map>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "deploy_test_util.h"
#include "engine/system_mode.h"
#include "gtest/gtest.h"
#include "server/server.h"

namespace neupims::deploy_test {
namespace {

// command label -> value of the neupims:pim_commands_total samples of a scrape.
std::map<std::string, double> PimCommandCounts(const std::string& exposition) {
  static constexpr char kPrefix[] = "neupims:pim_commands_total{command=\"";
  std::map<std::string, double> counts;
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::ConsumePrefix(&line, kPrefix)) continue;
    const size_t quote = line.find('"');
    const size_t space = line.rfind(' ');
    double value = 0;
    if (quote == line.npos || space == line.npos ||
        !absl::SimpleAtod(line.substr(space + 1), &value)) {
      continue;
    }
    counts[std::string(line.substr(0, quote))] = value;
  }
  return counts;
}

// Serves four completions in `mode` and returns the scrape's PIM command counts.
std::map<std::string, double> CountsAfterRequests(engine::SystemModeKind mode) {
  server::ServerOptions o;
  o.port = 0;
  o.metrics_port = 0;
  o.http_port = std::nullopt;
  o.runner.pacing = server::Pacing::kFast;
  o.runner.engine.mode = mode;
  absl::StatusOr<std::unique_ptr<server::Server>> s = server::Server::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return {};
  EXPECT_TRUE(CompleteEach((*s)->port(), 4, 64, 32).ok());
  const HttpResponse scrape = HttpGet((*s)->metrics_port(), "/metrics");
  EXPECT_EQ(scrape.status, 200);
  (*s)->Shutdown();
  return PimCommandCounts(scrape.body);
}

TEST(PimCommandCountsTest, ReadsTheCommandLabelAndValue) {
  const auto counts = PimCommandCounts(
      "# TYPE neupims:pim_commands_total counter\n"
      "neupims:pim_commands_total{command=\"PIM_GEMV\",model_name=\"m\"} 12\n"
      "neupims:pim_commands_total{command=\"REF\",model_name=\"m\"} 0\n"
      "neupims:other_total{command=\"PIM_HEADER\"} 3\n");
  EXPECT_EQ(counts, (std::map<std::string, double>{{"PIM_GEMV", 12}, {"REF", 0}}));
}

TEST(PimCommandLabelsTest, NeuPimsModeIssuesTheNeuPimsCommandSetOnly) {
  auto c = CountsAfterRequests(engine::SystemModeKind::kNeuPims);
  for (const char* issued :
       {"PIM_GWRITE", "PIM_ACTIVATION", "PIM_HEADER", "PIM_GEMV", "PIM_PRECHARGE"}) {
    EXPECT_GT(c[issued], 0) << issued;
  }
  EXPECT_EQ(c["PIM_DOTPRODUCT"], 0);
  EXPECT_EQ(c["PIM_RDRESULT"], 0);
}

TEST(PimCommandLabelsTest, NewtonModeIssuesTheNewtonCommandSetOnly) {
  auto c = CountsAfterRequests(engine::SystemModeKind::kNpuPim);
  for (const char* issued : {"PIM_GWRITE", "PIM_ACTIVATION", "PIM_DOTPRODUCT", "PIM_RDRESULT"}) {
    EXPECT_GT(c[issued], 0) << issued;
  }
  EXPECT_EQ(c["PIM_GEMV"], 0);
  EXPECT_EQ(c["PIM_HEADER"], 0);
}

}  // namespace
}  // namespace neupims::deploy_test
