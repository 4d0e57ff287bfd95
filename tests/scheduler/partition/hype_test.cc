#include "scheduler/partition/hype.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/builtin_configs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace neupims::scheduler::partition {
namespace {

using ::testing::HasSubstr;

HypeWorkload Example() {
  absl::StatusOr<HypeWorkload> w = LoadHypeWorkload("cnn-step");
  EXPECT_TRUE(w.ok()) << w.status();
  return *w;
}

const HypeKindProfile& Row(const HypeWorkload& w, const std::string& kind, InputSize size) {
  for (const HypeKindProfile& p : w.profiles) {
    if (p.kind == kind && p.size == size) return p;
  }
  ADD_FAILURE() << kind;
  return w.profiles[0];
}

// A synthetic workload: 1 GB/s links both ways (a transfer of b bytes takes 2b ns), no power.
HypeWorkload Synthetic() {
  HypeWorkload w;
  w.name = "synthetic";
  w.system = {.fpga_units = 1, .gpu_link_bytes_per_s = 1e9, .fpga_link_bytes_per_s = 1e9};
  w.profiles = Example().profiles;
  // "Long": a 20 ms GPU-only op; "Bag": the GPU op of sec. 3.4's AlexNet example (5.146 ms).
  w.profiles.push_back({.kind = "Long", .gpu = {.time_s = 20e-3, .peak_power_w = 250}});
  w.profiles.push_back({.kind = "Bag",
                        .gpu = {.time_s = 5.146e-3, .peak_power_w = 250},
                        .fpga = FpgaOpProfile{.time_s = 25e-3, .peak_power_w = 80}});
  return w;
}

std::vector<double> Instants(const HypeSchedule& s) {
  std::vector<double> t;
  for (const SimulatedOp& o : s.ops) t.push_back(o.start_s);
  return t;
}

// ---------------------------------------------------------------------------------------------
// Sec. 3.3, eq. 1.

TEST(HypeLatencyIndicator, ReproducesThePapersWorkedExample) {
  // A (2048 x 1024) x B (1024 x 1024); (CU 2, SIMD 1, WG 128, UL 64) at 210 MHz and
  // (4, 2, 64, 64) at 241 MHz.
  const MatMulDims dims{.m_height = 2048, .m_width = 1024, .n_width = 1024};
  const FpgaKernelConfig first{
      .cu_num = 2, .simd_width = 1, .work_group_size = 128, .unroll = 64, .fmax_hz = 210e6};
  const FpgaKernelConfig second{
      .cu_num = 4, .simd_width = 2, .work_group_size = 64, .unroll = 64, .fmax_hz = 241e6};
  EXPECT_NEAR(LatencyIndicator(dims, first), 81.81, 0.005);
  EXPECT_NEAR(LatencyIndicator(dims, second), 142.57, 0.005);
}

TEST(HypeLatencyIndicator, TheKernelVariantTakesTheSmallestIndicator) {
  const HypeWorkload w = Example();
  ASSERT_EQ(w.kernels.size(), 1u);
  absl::StatusOr<KernelVariantChoice> c = ChooseKernelConfig(w.kernels[0]);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->config, 0);  // the 210 MHz combination, as the paper concludes
  EXPECT_NEAR(c->latency_indicator, 81.81, 0.005);
  EXPECT_FALSE(ChooseKernelConfig({.kind = "MatMul"}).ok());
}

TEST(HypeInputSize, ClassesFollowSection3_2) {
  EXPECT_EQ(ClassifyInputSize({512, 1023, 300}), InputSize::kSmall);
  EXPECT_EQ(ClassifyInputSize({2048, 1024, 1024}), InputSize::kMedium);
  EXPECT_EQ(ClassifyInputSize({4095, 10, 10}), InputSize::kMedium);
  EXPECT_EQ(ClassifyInputSize({4096, 10, 10}), InputSize::kLarge);
}

// ---------------------------------------------------------------------------------------------
// Sec. 3.2: the filter.

TEST(HypeFilter, ThresholdsAreTheLargestOfTheFasterMatMulAndConv2DInputs) {
  absl::StatusOr<OffloadThresholds> t =
      DeriveOffloadThresholds(Example().profiles, {"MatMul", "Conv2D"});
  ASSERT_TRUE(t.ok());
  // FPGA no slower for small and medium of both; the large inputs are slower on the FPGA.
  EXPECT_DOUBLE_EQ(t->mem_bw_bytes_per_s, 60.31e9);  // Conv2D medium
  EXPECT_DOUBLE_EQ(t->ipc, 5.549);                   // MatMul medium
}

TEST(HypeFilter, BothBandwidthAndIpcMustBeUnderTheirThresholds) {
  const HypeWorkload w = Example();
  const OffloadThresholds t = *DeriveOffloadThresholds(w.profiles, {"MatMul", "Conv2D"});
  EXPECT_TRUE(PassesOffloadFilter(Row(w, "MatMul", InputSize::kMedium).gpu, t));  // inclusive
  EXPECT_TRUE(PassesOffloadFilter(Row(w, "Conv2D", InputSize::kSmall).gpu, t));
  EXPECT_TRUE(PassesOffloadFilter(Row(w, "Mul", InputSize::kLarge).gpu, t));
  // IPC above: MatMul large (5.764), whose FPGA kernel is 11% slower.
  EXPECT_FALSE(PassesOffloadFilter(Row(w, "MatMul", InputSize::kLarge).gpu, t));
  // Bandwidth above although the IPC is low: an OR would admit these, 1.6x-3.7x slower on the
  // FPGA (the "high memory bandwidth" operations sec. 3.2 rules out).
  for (const char* kind : {"Conv2DBackpropFilter", "Conv2DBackpropInput"}) {
    for (InputSize s : {InputSize::kSmall, InputSize::kMedium, InputSize::kLarge}) {
      const HypeKindProfile& p = Row(w, kind, s);
      EXPECT_LT(p.gpu.ipc, t.ipc);
      EXPECT_FALSE(PassesOffloadFilter(p.gpu, t)) << kind;
      EXPECT_GT(p.fpga->time_s, 1.6 * p.gpu.time_s) << kind;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Sec. 3.3 critical path and sec. 3.4 case 1.

TEST(HypePlan, Case1OffloadsOnlyWhenTheTransferIsShorterThanThePrecedingGpuOp) {
  // The paper's AlexNet example: Conv2D follows BiasAddGrad (5.146 ms on the V100); a 4.931 ms
  // transfer hides behind it, 5.2 ms does not. "Long" keeps both off the critical path.
  for (const auto& [bytes, fpga] :
       std::vector<std::pair<int64_t, bool>>{{2'465'500, true}, {2'600'000, false}}) {
    HypeWorkload w = Synthetic();
    w.ops = {{.name = "long", .kind = "Long"},
             {.name = "bag", .kind = "Bag"},
             {.name = "conv", .kind = "Conv2D", .deps = {1}, .transfer_bytes = bytes}};
    absl::StatusOr<HypePlan> plan = PlanHype(w);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->ops[2].device == HypeDevice::kFpga, fpga) << bytes;
    EXPECT_EQ(plan->ops[2].reason,
              fpga ? PlacementReason::kFilterAndFaster : PlacementReason::kTransferNotHidden);
  }
}

TEST(HypePlan, SlowerOpsGoToTheFpgaOnlyOffTheCriticalPath) {
  HypeWorkload w = Synthetic();
  // BiasAddGrad small fails the filter and is 1.8x slower on the FPGA (0.528 vs 0.289 ms).
  w.ops = {{.name = "long", .kind = "Long"},
           {.name = "side", .kind = "BiasAddGrad"},
           {.name = "tail", .kind = "BiasAddGrad", .deps = {0}}};
  absl::StatusOr<HypePlan> plan = PlanHype(w);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->ops[1].device, HypeDevice::kFpga);
  EXPECT_EQ(plan->ops[1].reason, PlacementReason::kOffCriticalPath);
  EXPECT_FALSE(plan->ops[1].passes_filter);
  EXPECT_EQ(plan->ops[2].device, HypeDevice::kGpu);  // on the critical path
  EXPECT_EQ(plan->ops[2].reason, PlacementReason::kFiltered);
  EXPECT_DOUBLE_EQ(plan->ops[2].gpu_slack_s, 0);
  EXPECT_DOUBLE_EQ(plan->critical_path_s, plan->gpu_only_critical_path_s);
}

TEST(HypePlan, AnOffloadThatWouldLengthenTheCriticalPathStaysOnTheGpu) {
  HypeWorkload w = Synthetic();
  // "side" has 20 - 5.146 ms of slack; on the FPGA "Bag" takes 25 ms.
  w.ops = {{.name = "long", .kind = "Long"}, {.name = "side", .kind = "Bag"}};
  absl::StatusOr<HypePlan> plan = PlanHype(w);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->ops[1].device, HypeDevice::kGpu);
  EXPECT_EQ(plan->ops[1].reason, PlacementReason::kProlongsCriticalPath);
}

TEST(HypePlan, TheExampleStepOffloadsWithoutLengtheningItsCriticalPath) {
  const HypeWorkload w = Example();
  absl::StatusOr<HypePlan> plan = PlanHype(w);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_LE(plan->critical_path_s, plan->gpu_only_critical_path_s * (1 + 1e-12));
  int offloaded = 0;
  for (size_t i = 0; i < w.ops.size(); ++i) {
    const OpPlacement& o = plan->ops[i];
    if (o.device != HypeDevice::kFpga) continue;
    ++offloaded;
    const HypeKindProfile& p = w.ProfileOf(w.ops[i]);
    // Either it passed the filter with a kernel no slower than the GPU, or it had slack.
    EXPECT_TRUE((o.passes_filter && p.fpga->time_s <= p.gpu.time_s) || o.gpu_slack_s > 0)
        << w.ops[i].name;
  }
  EXPECT_GT(offloaded, 0);
}

// ---------------------------------------------------------------------------------------------
// Sec. 3.4: the runtime scheduler.

void ExpectCapHoldsAtEveryInstant(const HypeWorkload& w, const HypeSchedule& s, double cap) {
  for (const PowerStep& p : s.power) EXPECT_LE(p.power_w, cap + 1e-9) << "at " << p.t_s;
  EXPECT_LE(s.peak_power_w, cap + 1e-9);
  // Independently of the recorded timeline: the power just after every op start.
  for (double t : Instants(s)) {
    double power = w.system.IdlePowerW();
    for (const SimulatedOp& o : s.ops) {
      if (o.start_s <= t && t < o.end_s) {
        power +=
            o.power_w - (o.device == HypeDevice::kGpu ? w.system.gpu_idle_w : w.system.fpga_idle_w);
      }
    }
    EXPECT_LE(power, cap + 1e-9) << "at " << t;
  }
}

void ExpectDependenciesAndExclusiveDevices(const HypeWorkload& w, const HypeSchedule& s) {
  for (size_t i = 0; i < w.ops.size(); ++i) {
    for (int d : w.ops[i].deps) EXPECT_GE(s.ops[i].start_s, s.ops[d].end_s - 1e-15);
    for (size_t j = 0; j < i; ++j) {
      if (s.ops[i].device != s.ops[j].device || s.ops[i].unit != s.ops[j].unit) continue;
      const bool apart =
          s.ops[i].start_s >= s.ops[j].end_s - 1e-15 || s.ops[j].start_s >= s.ops[i].end_s - 1e-15;
      EXPECT_TRUE(apart) << w.ops[i].name << " overlaps " << w.ops[j].name;
    }
  }
}

TEST(HypeRuntime, ThePowerCapHoldsAtEveryInstantOfTheSchedule) {
  const HypeWorkload w = Example();
  const std::vector<HypeDevice> placement = Placement(*PlanHype(w));
  absl::StatusOr<HypeSchedule> free_run = SimulateHype(w, placement);
  ASSERT_TRUE(free_run.ok()) << free_run.status();
  for (double cap : {230.0, 250.0, 210.0, 150.0}) {
    ASSERT_GT(free_run->peak_power_w, cap);  // the cap binds
    absl::StatusOr<HypeSchedule> s = SimulateHype(w, placement, cap);
    ASSERT_TRUE(s.ok()) << s.status();
    ExpectCapHoldsAtEveryInstant(w, *s, cap);
    ExpectDependenciesAndExclusiveDevices(w, *s);
    EXPECT_GE(s->makespan_s, free_run->makespan_s - 1e-12);
  }
}

TEST(HypeRuntime, WithoutACapTheHybridStepIsNoSlowerThanGpuOnly) {
  const HypeWorkload w = Example();
  absl::StatusOr<HypeSchedule> gpu =
      SimulateHype(w, std::vector<HypeDevice>(w.ops.size(), HypeDevice::kGpu));
  absl::StatusOr<HypeSchedule> hybrid = SimulateHype(w, Placement(*PlanHype(w)));
  ASSERT_TRUE(gpu.ok() && hybrid.ok());
  ExpectDependenciesAndExclusiveDevices(w, *hybrid);
  EXPECT_LE(hybrid->makespan_s, gpu->makespan_s * (1 + 1e-12));
  EXPECT_LT(hybrid->energy_j, gpu->energy_j);
}

TEST(HypeRuntime, ACapNoOpCanMeetIsRefusedNamingTheOp) {
  const HypeWorkload w = Example();
  const std::vector<HypeDevice> placement(w.ops.size(), HypeDevice::kGpu);
  absl::StatusOr<HypeSchedule> s = SimulateHype(w, placement, 40);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("idle"));
  s = SimulateHype(w, placement, 115);  // BackpropInput small: 54 - 13 + 83 W on the FPGA
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("conv2_input_grad"));
}

// A library caller's cap is checked before the simulation runs: a NaN cap used to compare false
// with every power and end in the scheduler's internal "made no progress".
TEST(HypeRuntime, ANonFiniteOrNegativeCapIsAnInvalidArgumentNamingTheField) {
  const HypeWorkload w = Example();
  const std::vector<HypeDevice> placement(w.ops.size(), HypeDevice::kGpu);
  for (double cap : {std::nan(""), std::numeric_limits<double>::infinity(), -5.0}) {
    absl::StatusOr<HypeSchedule> s = SimulateHype(w, placement, cap);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << cap;
    EXPECT_THAT(std::string(s.status().message()), HasSubstr("power_cap_w")) << cap;
  }
}

TEST(HypeWorkloadData, BadWorkloadsAreRefused) {
  HypeWorkload w = Synthetic();
  w.ops = {{.name = "a", .kind = "NoSuchKind"}};
  EXPECT_THAT(std::string(PlanHype(w).status().message()), HasSubstr("no profile"));
  w.ops = {{.name = "a", .kind = "Long", .deps = {0}}};
  EXPECT_FALSE(PlanHype(w).ok());
  EXPECT_FALSE(LoadHypeWorkload("no-such-workload").ok());
}

// The built-in cnn-step workload as a mutable JSON tree.
nlohmann::json CnnStepJson() {
  std::optional<absl::string_view> text = BuiltinConfigText("hype/cnn-step.json");
  EXPECT_TRUE(text.has_value());
  const absl::string_view t = text.value_or("{}");
  return nlohmann::json::parse(t.begin(), t.end());
}

// The error of loading `j` written to a file named for the running test (OK if it loads): CTest
// runs the tests of one binary as separate processes at once (-j2), and they share TempDir().
absl::Status LoadStatus(const nlohmann::json& j, std::string* path) {
  const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  *path = (std::filesystem::path(::testing::TempDir()) / ("hype_" + name + ".json")).string();
  std::ofstream(*path) << j.dump();
  return LoadHypeWorkload(*path).status();
}

// A time_ms of 0 or 1e308 reached the scheduler, which failed with an internal "made no
// progress" naming neither file nor field; 1e308 W or GB/s parsed and printed a 309-digit peak
// power. Each figure now has a physically generous range and the error names file and field.
TEST(HypeWorkloadData, OutOfRangeFiguresAreRefusedNamingFileAndField) {
  const std::vector<std::vector<std::string>> cases = {
      {"profiles", "gpu", "time_ms", "0"},
      {"profiles", "gpu", "time_ms", "1e308"},
      {"profiles", "fpga", "time_ms", "0"},
      {"profiles", "gpu", "peak_w", "1e308"},
      {"profiles", "gpu", "avg_w", "1e308"},
      {"profiles", "fpga", "avg_w", "1e308"},
      {"profiles", "gpu", "mem_bw_gb_per_s", "1e308"},
      {"profiles", "gpu", "ipc", "1e308"},
      {"system", "", "gpu_idle_w", "1e308"},
      {"system", "", "host_w", "1e308"},
      {"system", "transfer_probe", "gpu_ms", "1e308"},
      {"system", "transfer_probe", "bytes", "1e18"},
      {"kernels", "configs", "fmax_mhz", "1e308"}};
  for (const std::vector<std::string>& c : cases) {
    nlohmann::json j = CnnStepJson();
    const double v = std::stod(c[3]);
    std::string field;
    if (c[0] == "profiles") {
      j["profiles"][0][c[1]][c[2]] = v;
      field = "profiles[0]." + c[1] + "." + c[2];
    } else if (c[0] == "kernels") {
      j["kernels"][0]["configs"][0][c[2]] = v;
      field = "kernels[0].configs[0]." + c[2];
    } else if (c[1].empty()) {
      j["system"][c[2]] = v;
      field = "system." + c[2];
    } else {
      if (c[2] == "bytes") {
        j["system"][c[1]][c[2]] = static_cast<int64_t>(v);
      } else {
        j["system"][c[1]][c[2]] = v;
      }
      field = "system." + c[1] + "." + c[2];
    }
    std::string path;
    const absl::Status s = LoadStatus(j, &path);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << field << "=" << c[3];
    EXPECT_THAT(std::string(s.message()), HasSubstr(path + ": field '" + field + "'"))
        << field << "=" << c[3];
  }
}

// Built in code rather than read, a zero-time op reached the runtime scheduler, which never saw
// it end and returned an internal "made no progress".
TEST(HypeWorkloadData, AZeroTimeProfileIsInvalidNotAStalledSchedule) {
  HypeWorkload w = Synthetic();
  w.profiles.push_back({.kind = "Instant", .gpu = {.time_s = 0, .peak_power_w = 10}});
  w.ops = {{.name = "a", .kind = "Instant"}};
  const absl::StatusOr<HypeSchedule> s = SimulateHype(w, {HypeDevice::kGpu});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("profile Instant/small"));
}

TEST(HypeWorkloadData, TheShippedWorkloadIsInsideTheBounds) {
  std::string path;
  EXPECT_TRUE(LoadStatus(CnnStepJson(), &path).ok());
}

TEST(HypeWorkloadData, AnOpsDimsSelectItsKernelVariant) {
  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / "hype_dims.json").string();
  std::ofstream(path) << R"({
    "name": "dims", "threshold_kinds": ["MatMul"],
    "system": {"fpga_units": 1, "gpu_idle_w": 41, "fpga_idle_w": 13, "host_w": 0,
               "transfer_probe": {"bytes": 524288, "gpu_ms": 1.198, "fpga_ms": 0.547}},
    "profiles": [
      {"kind": "MatMul", "size": "small",
       "gpu": {"time_ms": 1.72, "peak_w": 214, "avg_w": 206, "mem_bw_gb_per_s": 38.35, "ipc": 5.401},
       "fpga": {"time_ms": 1.341, "peak_w": 58, "avg_w": 58}},
      {"kind": "MatMul", "size": "medium",
       "gpu": {"time_ms": 4.137, "peak_w": 274, "avg_w": 270, "mem_bw_gb_per_s": 48.05, "ipc": 5.549},
       "fpga": {"time_ms": 3.551, "peak_w": 65, "avg_w": 65}}],
    "ops": [{"name": "a", "kind": "MatMul", "dims": [512, 512, 512]},
            {"name": "b", "kind": "MatMul", "dims": [2048, 1024, 1024], "deps": ["a"]}]
  })";
  absl::StatusOr<HypeWorkload> w = LoadHypeWorkload(path);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->ops[0].size, InputSize::kSmall);
  EXPECT_EQ(w->ops[1].size, InputSize::kMedium);
  EXPECT_EQ(w->ops[1].deps, std::vector<int>{0});
  EXPECT_DOUBLE_EQ(w->ProfileOf(w->ops[1]).fpga->time_s, 3.551e-3);
}

}  // namespace
}  // namespace neupims::scheduler::partition
