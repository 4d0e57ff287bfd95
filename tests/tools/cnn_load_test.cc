// neupims-bench's CNN mode against a real in-process server (fast pacing): every request is
// counted, and the simulated figures are the partition's closed forms.
#include "tools/loadgen/cnn_load.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/server.h"

namespace neupims::loadgen {
namespace {

class CnnLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::ServerOptions o;
    o.port = 0;
    o.metrics_port = -1;
    o.http_port = std::nullopt;
    o.runner.pacing = server::Pacing::kFast;
    o.cnn.models = {"resnet50"};
    o.cnn.policy = engine::cnn::PlanPolicy::kGpuOnly;
    absl::StatusOr<std::unique_ptr<server::Server>> s = server::Server::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    options_.server = absl::StrCat("127.0.0.1:", server_->port());
    options_.model = "resnet50";
    options_.requests = 40;
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }
  const scheduler::partition::Plan& Plan() { return server_->cnn_runner()->Find("resnet50")->plan; }

  std::unique_ptr<server::Server> server_;
  CnnLoadOptions options_;
};

TEST_F(CnnLoadTest, ClosedLoopReportsThePartitionsThroughputAndLatency) {
  options_.concurrency = 4;
  absl::StatusOr<CnnLoadResult> r = RunCnnLoad(options_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ok, 40);
  EXPECT_EQ(r->failed, 0);
  EXPECT_EQ(r->images, 40);
  EXPECT_EQ(r->partition, "gpu0:conv1-prob");
  EXPECT_EQ(r->policy, "gpu-only");
  const double latency = Plan().stages[0].compute_s;
  EXPECT_NEAR(r->sim_latency_s.p99, latency, 1e-8);
  // 40 images, one bottleneck apart, the last one a whole latency.
  EXPECT_NEAR(r->sim_images_per_s, 40 / (39 * Plan().bottleneck_s + latency), 1e-3);
  EXPECT_NEAR(r->sim_energy_per_image_j, Plan().energy_j, 1e-5 * Plan().energy_j);
  EXPECT_GT(r->client_latency_s.median, 0);
}

TEST_F(CnnLoadTest, PoissonOpenLoopSendsEveryRequestWithItsBatch) {
  options_.rate = 2000;
  options_.batch = 2;
  absl::StatusOr<CnnLoadResult> r = RunCnnLoad(options_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ok, 40);
  EXPECT_EQ(r->images, 80);
}

TEST_F(CnnLoadTest, AnUnknownModelIsASetupError) {
  options_.model = "vgg16";
  absl::StatusOr<CnnLoadResult> r = RunCnnLoad(options_);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("--cnn-model vgg16"));
}

// As the flags (ValidateOptions does the same for the LLM mode): a library caller's rate of
// 1e-308 made an infinite Poisson gap and a timeout of 1e308 s an overflowing deadline, both
// converted to int64 nanoseconds. Refused before anything connects, naming the flag.
TEST(CnnLoadOptionsTest, OutOfRangeRatesTimeoutsAndCountsAreRefusedNamingTheFlag) {
  const auto problem = [](auto set) {
    CnnLoadOptions o;
    o.server = "127.0.0.1:1";  // never reached
    o.model = "resnet50";
    set(o);
    return RunCnnLoad(o).status();
  };
  const absl::Status rate = problem([](CnnLoadOptions& o) { o.rate = 1e-308; });
  EXPECT_EQ(rate.code(), absl::StatusCode::kInvalidArgument) << rate;
  EXPECT_THAT(rate.message(), ::testing::HasSubstr("--cnn-rate: value"));
  const absl::Status timeout = problem([](CnnLoadOptions& o) { o.timeout_s = 1e308; });
  EXPECT_THAT(timeout.message(), ::testing::HasSubstr("--timeout-s: value"));
  const absl::Status connect = problem([](CnnLoadOptions& o) { o.connect_timeout_s = 0; });
  EXPECT_THAT(connect.message(), ::testing::HasSubstr("--connect-timeout-s: value"));
  const absl::Status requests = problem([](CnnLoadOptions& o) { o.requests = 0; });
  EXPECT_THAT(requests.message(), ::testing::HasSubstr("--cnn-requests: value 0"));
}

}  // namespace
}  // namespace neupims::loadgen
