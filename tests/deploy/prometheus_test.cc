// Debian's real Prometheus scrapes a live server with the project's configuration
// (deploy/prometheus/prometheus.yml pointed at the server's ephemeral metrics port, and the
// real rules.yml with every `for:` shortened to 0s so the test need not wait minutes) and is
// queried through its HTTP API: the request counter equals what was sent, a recording rule
// evaluates, no alert fires while the run is healthy, and the KV-cache alert fires once the test
// fills the cache. The server runs a device with a small HBM (4096 rows: 7 KV blocks per PIM
// channel), so 32 requests fill every channel, at a slow realtime speed so that they stay.
// Skipped when the prometheus binary is not installed.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "deploy_test_util.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "neupims/v1/llm_service.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "server/server.h"

extern char** environ;

namespace neupims::deploy_test {
namespace {

namespace fs = std::filesystem;
using neupims::v1::CompleteResponse;
using neupims::v1::GenerateRequest;
using neupims::v1::LlmService;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kPrometheus[] = "/usr/bin/prometheus";
// Simulated seconds per wall second: the 32 filling requests take ~0.27 simulated seconds, so
// they hold the cache for ~13 wall seconds.
constexpr double kSpeed = 0.02;
constexpr int kHealthyRequests = 6;
constexpr int kFillRequests = 32;
constexpr int64_t kFillPrompt = 200;  // 7 blocks of 32 tokens: a whole channel
constexpr int64_t kFillNewTokens = 20;

// Polls `done` every 250 ms until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& done, seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(250));
  }
  return done();
}

class PrometheusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kPrometheus, X_OK) != 0) {
      GTEST_SKIP() << kPrometheus << " not installed (Debian package prometheus; "
                   << "scripts/install_deps.sh installs it)";
    }
    dir_ = fs::path(::testing::TempDir()) / absl::StrCat("prometheus_test_", getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ASSERT_NO_FATAL_FAILURE(StartServer());
    ASSERT_NO_FATAL_FAILURE(StartPrometheus());
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
    for (std::thread& t : clients_) t.join();
    if (prometheus_pid_ > 0) {
      kill(prometheus_pid_, SIGTERM);
      int status = 0;
      waitpid(prometheus_pid_, &status, 0);
    }
    if (!HasFailure()) fs::remove_all(dir_);
  }

  void StartServer() {
    nlohmann::json device =
        nlohmann::json::parse(ReadFile(SourcePath("configs/devices/neupims.json")));
    device["name"] = "neupims-small-hbm";
    device["hbm"]["organization"]["rows"] = 4096;
    const fs::path device_path = dir_ / "small_hbm.json";
    std::ofstream(device_path) << device.dump(2);
    server::ServerOptions o;
    o.port = 0;
    o.metrics_port = 0;
    o.http_port = std::nullopt;  // not used; the default 8000 may be taken
    o.runner.pacing = server::Pacing::kRealtime;
    o.runner.speed = kSpeed;
    o.runner.engine.device = device_path.string();
    absl::StatusOr<std::unique_ptr<server::Server>> s = server::Server::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    stub_ = LlmService::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                                    grpc::InsecureChannelCredentials()));
  }

  // The project's config and rules, pointed at this server, scraping and evaluating every second.
  void StartPrometheus() {
    std::string config = ReadFile(SourcePath("deploy/prometheus/prometheus.yml"));
    ASSERT_NE(config.find("127.0.0.1:9400"), std::string::npos);
    config = absl::StrReplaceAll(
        config, {{"127.0.0.1:9400", absl::StrCat("127.0.0.1:", server_->metrics_port())},
                 {"scrape_interval: 5s", "scrape_interval: 1s"},
                 {"evaluation_interval: 5s", "evaluation_interval: 1s"}});
    std::ofstream(dir_ / "prometheus.yml") << config;
    const std::string rules = ReadFile(SourcePath("deploy/prometheus/rules.yml"));
    std::ofstream(dir_ / "rules.yml")
        << std::regex_replace(rules, std::regex(R"(for: *\S+)"), "for: 0s");
    port_ = FreePort();
    ASSERT_GT(port_, 0);
    const std::vector<std::string> args = {
        kPrometheus, absl::StrCat("--config.file=", (dir_ / "prometheus.yml").string()),
        absl::StrCat("--storage.tsdb.path=", (dir_ / "data").string()),
        absl::StrCat("--web.listen-address=127.0.0.1:", port_), "--log.level=warn"};
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const std::string log = (dir_ / "prometheus.log").string();
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    const int rc =
        posix_spawn(&prometheus_pid_, kPrometheus, &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ASSERT_EQ(rc, 0) << "cannot start " << kPrometheus;
    ASSERT_TRUE(WaitFor([&] { return HttpGet(port_, "/-/ready").status == 200; }, seconds(20)))
        << ReadFile(log);
  }

  // The result vector of an instant query (empty on errors).
  nlohmann::json Query(const std::string& promql) {
    const HttpResponse r = HttpGet(port_, "/api/v1/query?query=" + UrlEncode(promql));
    if (r.status != 200) return nlohmann::json::array();
    const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
    if (j.is_discarded() || j.value("status", "") != "success") return nlohmann::json::array();
    return j["data"]["result"];
  }
  // The single value of an instant query, NaN when it has none.
  double Scalar(const std::string& promql) {
    const nlohmann::json v = Query(promql);
    if (v.size() != 1) return std::nan("");
    return std::strtod(v[0]["value"][1].get<std::string>().c_str(), nullptr);
  }
  // Names of the alerts in `state` ("firing", "pending").
  std::vector<std::string> Alerts(const std::string& state) {
    const HttpResponse r = HttpGet(port_, "/api/v1/alerts");
    std::vector<std::string> names;
    const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
    if (j.is_discarded() || !j.contains("data")) return {"<no answer>"};
    for (const nlohmann::json& a : j["data"]["alerts"]) {
      if (a["state"] == state) names.push_back(a["labels"]["alertname"]);
    }
    return names;
  }

  void SendOnThread(int64_t prompt, int64_t new_tokens) {
    clients_.emplace_back([this, prompt, new_tokens] {
      GenerateRequest r;
      r.set_prompt_length(prompt);
      r.set_max_new_tokens(new_tokens);
      r.set_ignore_eos(true);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + seconds(60));
      CompleteResponse resp;
      (void)stub_->Complete(&ctx, r, &resp);  // the fill is aborted by Shutdown
    });
  }

  fs::path dir_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<LlmService::Stub> stub_;
  std::vector<std::thread> clients_;
  pid_t prometheus_pid_ = 0;
  int port_ = 0;
};

TEST_F(PrometheusTest, ScrapesCountsRecordsAndAlertsOnAFullKvCache) {
  // Two scrapes of the idle server first, so that the requests below raise the counter
  // between scrapes (a counter first seen at its final value has no rate).
  ASSERT_TRUE(WaitFor([&] { return Scalar("count_over_time(up{job=\"neupims\"}[1m])") >= 2; },
                      seconds(15)));
  EXPECT_EQ(Scalar("up{job=\"neupims\"}"), 1);
  // A healthy run: a few short requests, all completed.
  for (int i = 0; i < kHealthyRequests; ++i) SendOnThread(16, 2);
  for (std::thread& t : clients_) t.join();
  clients_.clear();
  const double sent = kHealthyRequests;
  EXPECT_TRUE(
      WaitFor([&] { return Scalar("sum(neupims:request_success_total{job=\"neupims\"})") == sent; },
              seconds(15)))
      << Query("neupims:request_success_total").dump();
  // The recording rule over the request counter evaluates to a rate.
  EXPECT_TRUE(WaitFor(
      [&] {
        return Scalar("model_name:neupims_request_success:rate1m{model_name=\"gpt3-7b\"}") > 0;
      },
      seconds(15)))
      << Query("model_name:neupims_request_success:rate1m").dump();
  // With every `for:` at 0s an alert whose condition held would be firing by now.
  EXPECT_EQ(Alerts("firing"), std::vector<std::string>{});
  EXPECT_EQ(Alerts("pending"), std::vector<std::string>{});

  // Fill every PIM channel's KV blocks.
  for (int i = 0; i < kFillRequests; ++i) SendOnThread(kFillPrompt, kFillNewTokens);
  auto kv_alert_firing = [&] {
    for (const std::string& a : Alerts("firing")) {
      if (a == "NeuPimsKvCacheNearlyFull") return true;
    }
    return false;
  };
  EXPECT_TRUE(WaitFor(kv_alert_firing, seconds(20)))
      << "kv usage " << Query("neupims:kv_cache_usage_perc").dump();
}

}  // namespace
}  // namespace neupims::deploy_test
