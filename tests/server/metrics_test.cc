#include "server/metrics.h"

#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hw/device.h"
#include "hw/dram/command.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "server/engine_runner.h"

namespace neupims::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kDevices = 4;
constexpr engine::SimTime kMs = 1'000'000;
constexpr engine::SimTime kS = 1'000'000'000;

class ServerMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<hw::DeviceConfig> device = hw::LoadDeviceConfig("neupims");
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = *device;
    registry_ = std::make_shared<prometheus::Registry>();
    metrics_ = std::make_unique<ServerMetrics>(registry_, "gpt3-7b", device_, kDevices);
  }

  std::string Scrape() const {
    prometheus::TextSerializer serializer;
    return serializer.Serialize(registry_->Collect());
  }

  // The value of one series (`name{labels}` exactly as exposed), NaN if it is not exposed.
  double Value(const std::string& series) const {
    const std::string text = Scrape();
    const std::string key = "\n" + series + " ";
    const size_t at = ("\n" + text).find(key);
    if (at == std::string::npos) {
      ADD_FAILURE() << "no series " << series << " in\n" << text;
      return std::numeric_limits<double>::quiet_NaN();
    }
    return std::strtod(text.c_str() + at + key.size() - 1, nullptr);
  }

  // `name` with model_name and optional extra labels (alphabetical, as exposed).
  static std::string S(const std::string& name, const std::string& before = "",
                       const std::string& after = "") {
    std::string labels;
    if (!before.empty()) labels += before + ",";
    labels += "model_name=\"gpt3-7b\"";
    if (!after.empty()) labels += "," + after;
    return name + "{" + labels + "}";
  }

  hw::DeviceConfig device_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<ServerMetrics> metrics_;
};

engine::Request MakeRequest(engine::SimTime arrival, engine::SimTime admitted,
                            engine::SimTime first_token, engine::SimTime finished,
                            int64_t generated) {
  engine::Request r;
  r.prompt_tokens = 100;
  r.max_new_tokens = generated;
  r.arrival = arrival;
  r.first_admitted = admitted;
  r.first_token = first_token;
  r.finished = finished;
  r.generated = generated;
  return r;
}

Completion MakeCompletion(Finish reason) {
  Completion c;
  c.reason = reason;
  return c;
}

TEST_F(ServerMetricsTest, ExposesPrefixedFamiliesWithModelNameAndCleanBuckets) {
  const std::string text = Scrape();
  for (const char* type_line : {
           "# TYPE neupims:num_requests_running gauge",
           "# TYPE neupims:num_requests_waiting gauge",
           "# TYPE neupims:num_requests_prefilling gauge",
           "# TYPE neupims:kv_cache_usage_perc gauge",
           "# TYPE neupims:num_preemptions_total counter",
           "# TYPE neupims:prompt_tokens_total counter",
           "# TYPE neupims:generation_tokens_total counter",
           "# TYPE neupims:request_success_total counter",
           "# TYPE neupims:time_to_first_token_seconds histogram",
           "# TYPE neupims:time_per_output_token_seconds histogram",
           "# TYPE neupims:inter_token_latency_seconds histogram",
           "# TYPE neupims:request_time_per_output_token_seconds histogram",
           "# TYPE neupims:e2e_request_latency_seconds histogram",
           "# TYPE neupims:request_queue_time_seconds histogram",
           "# TYPE neupims:request_prefill_time_seconds histogram",
           "# TYPE neupims:request_decode_time_seconds histogram",
           "# TYPE neupims:iteration_latency_seconds histogram",
           "# TYPE neupims:iteration_tokens_total histogram",
           "# TYPE neupims:batch_size histogram",
           "# TYPE neupims:sub_batch_size histogram",
           "# TYPE neupims:npu_systolic_utilization gauge",
           "# TYPE neupims:npu_vector_utilization gauge",
           "# TYPE neupims:pim_utilization gauge",
           "# TYPE neupims:hbm_bandwidth_utilization gauge",
           "# TYPE neupims:interconnect_utilization gauge",
           "# TYPE neupims:pim_commands_total counter",
           "# TYPE neupims:channel_load_imbalance gauge",
           "# TYPE neupims:energy_joules_total counter",
           "# TYPE neupims:power_watts gauge",
           "# TYPE neupims:sim_time_seconds gauge",
           "# TYPE neupims:sim_wall_time_ratio gauge",
           "# TYPE neupims:iterations_total counter",
           "# TYPE neupims:server_draining gauge",
       }) {
    EXPECT_THAT(text, HasSubstr(std::string(type_line) + "\n"));
  }
  std::istringstream lines(text);
  std::string line;
  int samples = 0;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    ++samples;
    EXPECT_EQ(line.rfind("neupims:", 0), 0u) << line;
    EXPECT_THAT(line, HasSubstr("model_name=\"gpt3-7b\"")) << line;
    // Bucket bounds print as short decimals (no 0.008999999999999999).
    const size_t le = line.find("le=\"");
    if (le != std::string::npos) {
      EXPECT_LE(line.find('"', le + 4) - (le + 4), 6u) << line;
    }
  }
  EXPECT_GT(samples, 100);
  // Every finish reason and PIM command type is exposed from the start.
  EXPECT_EQ(Value(S("neupims:request_success_total", "finished_reason=\"rejected\"")), 0);
  EXPECT_EQ(Value(S("neupims:pim_commands_total", "command=\"PIM_GEMV\"")), 0);
  EXPECT_EQ(Value(S("neupims:energy_joules_total", "component=\"prefill_npus\"")), 0);
  EXPECT_EQ(Value(S("neupims:channel_load_imbalance")), 1);
}

TEST_F(ServerMetricsTest, SendLagBucketsAreTheDocumentedOnes) {
  std::ifstream doc(std::string(NEUPIMS_SOURCE_DIR) + "/docs/metrics.md");
  ASSERT_TRUE(doc.good());
  std::string line, row;
  while (std::getline(doc, line)) {
    if (line.rfind("| `token_send_lag_seconds`", 0) == 0) row = line;
  }
  ASSERT_FALSE(row.empty()) << "no bucket row for token_send_lag_seconds in docs/metrics.md";
  const std::vector<std::string> cells = absl::StrSplit(row, '|');
  ASSERT_GE(cells.size(), 3u);
  std::vector<std::string> documented;
  for (absl::string_view v : absl::StrSplit(cells[2], ',')) {
    double d = 0;
    ASSERT_TRUE(absl::SimpleAtod(v, &d)) << v;
    documented.push_back(std::string(absl::StripAsciiWhitespace(v)));
  }
  std::vector<std::string> exposed;
  std::istringstream text(Scrape());
  const std::string prefix = "neupims:token_send_lag_seconds_bucket{model_name=\"gpt3-7b\",le=\"";
  while (std::getline(text, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    const std::string le =
        line.substr(prefix.size(), line.find('"', prefix.size()) - prefix.size());
    if (le != "+Inf") exposed.push_back(le);
  }
  EXPECT_EQ(exposed, documented);
}

TEST_F(ServerMetricsTest, CountsPromptAndGenerationTokens) {
  metrics_->OnPromptTokens(100);
  metrics_->OnPromptTokens(28);
  metrics_->OnPromptTokens(-5);
  metrics_->OnGenerationTokens(3);
  metrics_->OnGenerationTokens(2);
  metrics_->OnGenerationTokens(0);
  const std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("neupims:prompt_tokens_total{model_name=\"gpt3-7b\"} 128\n"));
  EXPECT_THAT(text, HasSubstr("neupims:generation_tokens_total{model_name=\"gpt3-7b\"} 5\n"));
}

TEST_F(ServerMetricsTest, CountsFinishReasonsAndObservesRequestLatencies) {
  // Arrives at 1 s, admitted at 1.5 s, first token at 1.75 s, 5 tokens, done at 3.75 s.
  const engine::Request r = MakeRequest(1 * kS, 1500 * kMs, 1750 * kMs, 3750 * kMs, 5);
  metrics_->OnFinished(r, MakeCompletion(Finish::kLength));
  metrics_->OnFinished(r, MakeCompletion(Finish::kLength));
  metrics_->OnFinished(r, MakeCompletion(Finish::kStop));

  const std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("neupims:request_success_total{finished_reason=\"length\","
                              "model_name=\"gpt3-7b\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("neupims:request_success_total{finished_reason=\"stop\","
                              "model_name=\"gpt3-7b\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("neupims:request_success_total{finished_reason=\"abort\","
                              "model_name=\"gpt3-7b\"} 0\n"));
  struct Expected {
    const char* name;
    double seconds;
  };
  for (const Expected& e : {Expected{"neupims:time_to_first_token_seconds", 0.75},
                            Expected{"neupims:request_queue_time_seconds", 0.5},
                            Expected{"neupims:request_prefill_time_seconds", 0.25},
                            Expected{"neupims:request_decode_time_seconds", 2.0},
                            Expected{"neupims:e2e_request_latency_seconds", 2.75},
                            Expected{"neupims:request_time_per_output_token_seconds", 0.5}}) {
    SCOPED_TRACE(e.name);
    EXPECT_EQ(Value(S(std::string(e.name) + "_count")), 3);
    EXPECT_DOUBLE_EQ(Value(S(std::string(e.name) + "_sum")), 3 * e.seconds);
  }
  // Bucket placement (le is cumulative): 0.75 s lands in le="0.75", not le="0.5".
  EXPECT_EQ(Value(S("neupims:time_to_first_token_seconds_bucket", "", "le=\"0.5\"")), 0);
  EXPECT_EQ(Value(S("neupims:time_to_first_token_seconds_bucket", "", "le=\"0.75\"")), 3);
  EXPECT_EQ(Value(S("neupims:e2e_request_latency_seconds_bucket", "", "le=\"2.5\"")), 0);
  EXPECT_EQ(Value(S("neupims:e2e_request_latency_seconds_bucket", "", "le=\"5\"")), 3);
  EXPECT_EQ(Value(S("neupims:e2e_request_latency_seconds_bucket", "", "le=\"+Inf\"")), 3);
}

TEST_F(ServerMetricsTest, AbortedAndRejectedRequestsSkipCompletionLatencies) {
  // Aborted after its first token: TTFT, queue and prefill are real; e2e and decode are not.
  metrics_->OnFinished(MakeRequest(0, 100 * kMs, 300 * kMs, 900 * kMs, 4),
                       MakeCompletion(Finish::kAborted));
  // Aborted while waiting: only the success counter.
  metrics_->OnFinished(MakeRequest(0, scheduler::kNoTime, scheduler::kNoTime, 50 * kMs, 0),
                       MakeCompletion(Finish::kAborted));
  // Rejected: never admitted.
  metrics_->OnFinished(MakeRequest(0, scheduler::kNoTime, scheduler::kNoTime, 0, 0),
                       MakeCompletion(Finish::kRejected));
  // One token only: no per-request time per output token.
  metrics_->OnFinished(MakeRequest(0, 0, 200 * kMs, 200 * kMs, 1), MakeCompletion(Finish::kLength));

  EXPECT_EQ(Value(S("neupims:request_success_total", "finished_reason=\"abort\"")), 2);
  EXPECT_EQ(Value(S("neupims:request_success_total", "finished_reason=\"rejected\"")), 1);
  EXPECT_EQ(Value(S("neupims:request_success_total", "finished_reason=\"length\"")), 1);
  EXPECT_EQ(Value(S("neupims:time_to_first_token_seconds_count")), 2);
  EXPECT_DOUBLE_EQ(Value(S("neupims:time_to_first_token_seconds_sum")), 0.3 + 0.2);
  EXPECT_EQ(Value(S("neupims:request_queue_time_seconds_count")), 2);
  EXPECT_DOUBLE_EQ(Value(S("neupims:request_queue_time_seconds_sum")), 0.1);
  EXPECT_EQ(Value(S("neupims:request_prefill_time_seconds_count")), 2);
  EXPECT_DOUBLE_EQ(Value(S("neupims:request_prefill_time_seconds_sum")), 0.2 + 0.2);
  EXPECT_EQ(Value(S("neupims:e2e_request_latency_seconds_count")), 1);
  EXPECT_EQ(Value(S("neupims:request_decode_time_seconds_count")), 1);
  EXPECT_EQ(Value(S("neupims:request_decode_time_seconds_sum")), 0);
  EXPECT_EQ(Value(S("neupims:request_time_per_output_token_seconds_count")), 0);
}

TEST_F(ServerMetricsTest, IterationHistogramsCountersAndHardwareGauges) {
  engine::IterationCost cost;
  cost.channel_imbalance = 1.25;
  engine::IterationRecord it;
  it.start = 0;
  it.end = 8 * kMs;
  it.decode = 64;
  it.prefill = 2;
  it.preempted = 2;
  it.sub_batch = {40, 24};
  it.prefill_tokens = 512;  // local prefill
  it.cost = &cost;

  engine::EngineStats s;
  s.first_event = 0;
  s.iterations = 1;
  s.preemptions = 2;
  s.busy_ns = 8 * kMs;
  s.systolic_busy_ns = 2e6;                                  // 0.25
  s.vector_busy_ns = 1e6;                                    // 0.125
  s.pim_mac_ns = device_.hbm.org.channels * 4e6;             // 0.5 per channel
  s.interconnect_busy_ns = 0.8e6;                            // 0.1
  s.npu_hbm_bytes = device_.PeakHbmBytesPerSecond() * 2e-3;  // 2 ms at peak: 0.25
  s.npu_dynamic_j = 0.4;
  s.npu_static_j = 0.2;
  s.dram_j = 0.3;
  s.pim_j = 0.1;
  s.dram_background_j = 0.05;
  s.prefill_j = 0.15;
  s.pim_commands[static_cast<int>(hw::CommandType::kPimGemv)] = 1000;
  s.pim_commands[static_cast<int>(hw::CommandType::kRef)] = 10;
  metrics_->OnIteration(it, s);

  const std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("neupims:iterations_total{model_name=\"gpt3-7b\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("neupims:num_preemptions_total{model_name=\"gpt3-7b\"} 2\n"));
  // PIM commands are per device in EngineStats: x4 devices. REF appears once it counts.
  EXPECT_THAT(text, HasSubstr("neupims:pim_commands_total{command=\"PIM_GEMV\","
                              "model_name=\"gpt3-7b\"} 4000\n"));
  EXPECT_THAT(text, HasSubstr("neupims:pim_commands_total{command=\"REF\","
                              "model_name=\"gpt3-7b\"} 40\n"));
  EXPECT_THAT(text, HasSubstr("neupims:pim_commands_total{command=\"PIM_HEADER\","
                              "model_name=\"gpt3-7b\"} 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("command=\"RD\"")));
  EXPECT_DOUBLE_EQ(Value(S("neupims:energy_joules_total", "component=\"npu_dynamic\"")), 0.4);
  EXPECT_DOUBLE_EQ(Value(S("neupims:energy_joules_total", "component=\"npu_static\"")), 0.2);
  EXPECT_DOUBLE_EQ(Value(S("neupims:energy_joules_total", "component=\"dram\"")), 0.3);
  EXPECT_DOUBLE_EQ(Value(S("neupims:energy_joules_total", "component=\"pim\"")), 0.1);
  EXPECT_DOUBLE_EQ(Value(S("neupims:energy_joules_total", "component=\"dram_background\"")), 0.05);
  EXPECT_DOUBLE_EQ(Value(S("neupims:energy_joules_total", "component=\"prefill_npus\"")), 0.15);

  // One 8 ms iteration: 64 inter-token gaps of 8 ms (8 ms is a bucket bound: le is inclusive).
  EXPECT_EQ(Value(S("neupims:time_per_output_token_seconds_count")), 64);
  EXPECT_DOUBLE_EQ(Value(S("neupims:time_per_output_token_seconds_sum")), 64 * 0.008);
  EXPECT_EQ(Value(S("neupims:time_per_output_token_seconds_bucket", "", "le=\"0.007\"")), 0);
  EXPECT_EQ(Value(S("neupims:time_per_output_token_seconds_bucket", "", "le=\"0.008\"")), 64);
  EXPECT_EQ(Value(S("neupims:inter_token_latency_seconds_count")), 64);
  EXPECT_DOUBLE_EQ(Value(S("neupims:inter_token_latency_seconds_sum")), 64 * 0.008);
  EXPECT_EQ(Value(S("neupims:iteration_latency_seconds_count")), 1);
  EXPECT_DOUBLE_EQ(Value(S("neupims:iteration_latency_seconds_sum")), 0.008);
  EXPECT_EQ(Value(S("neupims:iteration_latency_seconds_bucket", "", "le=\"0.008\"")), 1);
  EXPECT_EQ(Value(S("neupims:iteration_tokens_total_sum")), 64 + 512);
  EXPECT_EQ(Value(S("neupims:iteration_tokens_total_bucket", "", "le=\"512\"")), 0);
  EXPECT_EQ(Value(S("neupims:iteration_tokens_total_bucket", "", "le=\"1024\"")), 1);
  EXPECT_EQ(Value(S("neupims:batch_size_count")), 1);
  EXPECT_EQ(Value(S("neupims:batch_size_sum")), 64);
  EXPECT_EQ(Value(S("neupims:sub_batch_size_sum", "", "sub_batch=\"1\"")), 40);
  EXPECT_EQ(Value(S("neupims:sub_batch_size_sum", "", "sub_batch=\"2\"")), 24);
  EXPECT_EQ(Value(S("neupims:sub_batch_size_bucket", "", "sub_batch=\"2\",le=\"16\"")), 0);
  EXPECT_EQ(Value(S("neupims:sub_batch_size_bucket", "", "sub_batch=\"2\",le=\"32\"")), 1);
  EXPECT_DOUBLE_EQ(Value(S("neupims:channel_load_imbalance")), 1.25);

  // Utilisation over the window (this one iteration), relative to its busy time.
  EXPECT_DOUBLE_EQ(Value(S("neupims:npu_systolic_utilization")), 0.25);
  EXPECT_DOUBLE_EQ(Value(S("neupims:npu_vector_utilization")), 0.125);
  EXPECT_DOUBLE_EQ(Value(S("neupims:pim_utilization")), 0.5);
  EXPECT_NEAR(Value(S("neupims:hbm_bandwidth_utilization")), 0.25, 1e-12);
  EXPECT_DOUBLE_EQ(Value(S("neupims:interconnect_utilization")), 0.1);
  // 1.2 J from the first event (t = 0) to the iteration's end (8 ms).
  EXPECT_NEAR(Value(S("neupims:power_watts")), 1.2 / 0.008, 1e-9);

  // An iteration without decodes (prefill only) keeps the last imbalance and adds no gaps.
  engine::IterationRecord prefill_only;
  prefill_only.start = 8 * kMs;
  prefill_only.end = 20 * kMs;
  prefill_only.prefill = 1;
  prefill_only.prefill_tokens = 300;
  engine::IterationCost balanced;
  prefill_only.cost = &balanced;
  s.iterations = 2;
  s.busy_ns = 20 * kMs;
  metrics_->OnIteration(prefill_only, s);
  EXPECT_DOUBLE_EQ(Value(S("neupims:channel_load_imbalance")), 1.25);
  EXPECT_EQ(Value(S("neupims:time_per_output_token_seconds_count")), 64);
  EXPECT_EQ(Value(S("neupims:batch_size_count")), 2);
  EXPECT_EQ(Value(S("neupims:batch_size_bucket", "", "le=\"0\"")), 1);
  EXPECT_EQ(Value(S("neupims:iterations_total")), 2);
}

TEST_F(ServerMetricsTest, CountersNeverDecrease) {
  engine::IterationRecord it;
  it.start = 0;
  it.end = 10 * kMs;
  it.decode = 8;
  engine::EngineStats s1;
  s1.iterations = 10;
  s1.preemptions = 5;
  s1.busy_ns = 10 * kMs;
  s1.systolic_busy_ns = 5e6;
  s1.npu_dynamic_j = 2.0;
  s1.prefill_j = 1.0;
  s1.pim_commands[static_cast<int>(hw::CommandType::kPimGemv)] = 100;
  metrics_->OnIteration(it, s1);

  // Smaller cumulative statistics (e.g. another engine): nothing goes down.
  engine::EngineStats s2;
  s2.iterations = 3;
  s2.preemptions = 1;
  s2.busy_ns = 2 * kMs;
  s2.systolic_busy_ns = 0;
  s2.npu_dynamic_j = 0.5;
  s2.prefill_j = 0.25;
  s2.pim_commands[static_cast<int>(hw::CommandType::kPimGemv)] = 10;
  it.start = 10 * kMs;
  it.end = 20 * kMs;
  metrics_->OnIteration(it, s2);
  std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("neupims:iterations_total{model_name=\"gpt3-7b\"} 10\n"));
  EXPECT_THAT(text, HasSubstr("neupims:num_preemptions_total{model_name=\"gpt3-7b\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("neupims:pim_commands_total{command=\"PIM_GEMV\","
                              "model_name=\"gpt3-7b\"} 400\n"));
  EXPECT_DOUBLE_EQ(Value(S("neupims:energy_joules_total", "component=\"npu_dynamic\"")), 2.0);
  EXPECT_DOUBLE_EQ(Value(S("neupims:energy_joules_total", "component=\"prefill_npus\"")), 1.0);
  EXPECT_GE(Value(S("neupims:npu_systolic_utilization")), 0);
  EXPECT_GE(Value(S("neupims:power_watts")), 0);

  // Growth after that counts from the new baseline.
  engine::EngineStats s3 = s2;
  s3.iterations = 5;
  s3.preemptions = 2;
  s3.npu_dynamic_j = 0.75;
  s3.prefill_j = 0.25;
  s3.pim_commands[static_cast<int>(hw::CommandType::kPimGemv)] = 15;
  s3.busy_ns = s2.busy_ns + 10 * kMs;
  s3.systolic_busy_ns = 5e6;
  it.start = 20 * kMs;
  it.end = 30 * kMs;
  metrics_->OnIteration(it, s3);
  text = Scrape();
  EXPECT_THAT(text, HasSubstr("neupims:iterations_total{model_name=\"gpt3-7b\"} 12\n"));
  EXPECT_THAT(text, HasSubstr("neupims:num_preemptions_total{model_name=\"gpt3-7b\"} 6\n"));
  EXPECT_THAT(text, HasSubstr("neupims:pim_commands_total{command=\"PIM_GEMV\","
                              "model_name=\"gpt3-7b\"} 420\n"));
  EXPECT_DOUBLE_EQ(Value(S("neupims:energy_joules_total", "component=\"npu_dynamic\"")), 2.25);
  EXPECT_DOUBLE_EQ(Value(S("neupims:energy_joules_total", "component=\"prefill_npus\"")), 1.0);
  // The window only adds growth too: 10 ms of systolic work over 20 ms of iterations (s1 and
  // s3; s2 added nothing), 3.25 J over the 30 ms since the first iteration began.
  EXPECT_DOUBLE_EQ(Value(S("neupims:npu_systolic_utilization")), 0.5);
  EXPECT_NEAR(Value(S("neupims:power_watts")), 3.25 / 0.030, 1e-9);
}

TEST_F(ServerMetricsTest, SlidingWindowCoversAboutOneSimulatedSecond) {
  engine::IterationRecord it;
  it.decode = 1;
  engine::EngineStats s;
  s.first_event = 0;
  auto run = [&](engine::SimTime start, engine::SimTime end, double systolic_ns, double joules) {
    it.start = start;
    it.end = end;
    ++s.iterations;
    s.busy_ns += end - start;
    s.systolic_busy_ns += systolic_ns;
    s.npu_static_j += joules;
    metrics_->OnIteration(it, s);
  };
  // A: [0, 10 ms], arrays always busy, 1 J.
  run(0, 10 * kMs, 10e6, 1.0);
  EXPECT_DOUBLE_EQ(Value(S("neupims:npu_systolic_utilization")), 1.0);
  EXPECT_NEAR(Value(S("neupims:power_watts")), 1.0 / 0.010, 1e-9);
  // B: [2 s, 2.01 s], 20% busy, 0.5 J. The window starts at A's end (the newest snapshot at
  // least 1 s old), so A's work is out and the idle gap is in.
  run(2 * kS, 2010 * kMs, 2e6, 0.5);
  EXPECT_DOUBLE_EQ(Value(S("neupims:npu_systolic_utilization")), 0.2);
  EXPECT_NEAR(Value(S("neupims:power_watts")), 0.5 / 2.0, 1e-12);
  // Idle for more than a second (simulated time from SetLoad): nothing left in the window.
  metrics_->SetLoad(engine::EngineLoad{}, 3.5, 1.0);
  EXPECT_EQ(Value(S("neupims:npu_systolic_utilization")), 0);
  EXPECT_EQ(Value(S("neupims:power_watts")), 0);
  // C and D within the window of B: busy-time weighted over B, C, D.
  run(3500 * kMs, 3510 * kMs, 5e6, 0.2);
  EXPECT_DOUBLE_EQ(Value(S("neupims:npu_systolic_utilization")), 0.5);
  EXPECT_NEAR(Value(S("neupims:power_watts")), 0.2 / 1.5, 1e-12);
  run(3510 * kMs, 3520 * kMs, 0, 0.1);
  EXPECT_DOUBLE_EQ(Value(S("neupims:npu_systolic_utilization")), 0.25);
  EXPECT_NEAR(Value(S("neupims:power_watts")), 0.3 / 1.51, 1e-12);
}

TEST_F(ServerMetricsTest, SlidingWindowKeepsAtMost1024Iterations) {
  engine::IterationRecord it;
  it.decode = 1;
  engine::EngineStats s;
  s.first_event = 0;
  // 2000 iterations of 1 us: the first 1000 keep the arrays busy, the last 1000 do not.
  for (int i = 0; i < 2000; ++i) {
    it.start = i * 1000;
    it.end = (i + 1) * 1000;
    ++s.iterations;
    s.busy_ns += 1000;
    if (i < 1000) s.systolic_busy_ns += 1000;
    metrics_->OnIteration(it, s);
  }
  // The window holds the last 1024 iterations: 24 busy ones.
  EXPECT_DOUBLE_EQ(Value(S("neupims:npu_systolic_utilization")), 24.0 / 1024.0);
  EXPECT_EQ(Value(S("neupims:iterations_total")), 2000);
}

TEST_F(ServerMetricsTest, LoadGauges) {
  engine::EngineLoad load;
  load.running = 3;
  load.waiting = 2;
  load.prefilling = 1;
  load.kv_usage = 0.25;
  load.channel_kv_usage.assign(device_.hbm.org.channels, 0.0);
  load.channel_kv_usage[5] = 0.75;
  metrics_->SetLoad(load, 10.0, 2.5);

  const std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("neupims:num_requests_running{model_name=\"gpt3-7b\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("neupims:num_requests_waiting{model_name=\"gpt3-7b\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("neupims:num_requests_prefilling{model_name=\"gpt3-7b\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("neupims:kv_cache_usage_perc{model_name=\"gpt3-7b\"} 0.25\n"));
  EXPECT_THAT(text, HasSubstr("neupims:channel_kv_cache_usage_perc{channel=\"5\","
                              "model_name=\"gpt3-7b\"} 0.75\n"));
  EXPECT_THAT(text, HasSubstr("neupims:channel_kv_cache_usage_perc{channel=\"31\","
                              "model_name=\"gpt3-7b\"} 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("channel=\"32\"")));
  EXPECT_THAT(text, HasSubstr("neupims:sim_time_seconds{model_name=\"gpt3-7b\"} 10\n"));
  EXPECT_THAT(text, HasSubstr("neupims:sim_wall_time_ratio{model_name=\"gpt3-7b\"} 2.5\n"));

  load.running = 0;
  load.channel_kv_usage[5] = 0.5;
  metrics_->SetLoad(load, 0.0, std::numeric_limits<double>::quiet_NaN());  // never NaN
  EXPECT_EQ(Value(S("neupims:num_requests_running")), 0);
  EXPECT_EQ(Value(S("neupims:channel_kv_cache_usage_perc", "channel=\"5\"")), 0.5);
  EXPECT_EQ(Value(S("neupims:sim_wall_time_ratio")), 0);
}

TEST_F(ServerMetricsTest, DrainingGaugeFollowsTheServer) {
  EXPECT_EQ(Value(S("neupims:server_draining")), 0);
  metrics_->SetDraining(true);
  EXPECT_EQ(Value(S("neupims:server_draining")), 1);
}

TEST_F(ServerMetricsTest, RequestErrorsByCodeFromManyThreads) {
  metrics_->OnRequestError("INVALID_ARGUMENT");
  metrics_->OnRequestError("INVALID_ARGUMENT");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this] {
      for (int i = 0; i < 250; ++i) metrics_->OnRequestError("RESOURCE_EXHAUSTED");
    });
  }
  for (std::thread& t : threads) t.join();
  const std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("neupims:request_errors_total{code=\"INVALID_ARGUMENT\","
                              "model_name=\"gpt3-7b\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("neupims:request_errors_total{code=\"RESOURCE_EXHAUSTED\","
                              "model_name=\"gpt3-7b\"} 1000\n"));
  EXPECT_EQ(metrics_->registry(), registry_);
}

}  // namespace
}  // namespace neupims::server
