#include "hw/roofline/roofline.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims::hw::roofline {
namespace {

using ::testing::HasSubstr;

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

RooflineSpec Simple() {
  return {.name = "t",
          .peak_flops_per_s = 1e12,
          .compute_efficiency = 0.5,
          .memory_bytes_per_s = 100e9,
          .bandwidth_efficiency = 0.8,
          .power_w = 200,
          .per_layer_overhead_s = 1e-6};
}

TEST(RooflineSpecTest, EveryBuiltinLoads) {
  for (const char* kind : {"cpu", "gpu"}) {
    for (const std::string& name : BuiltinRooflineNames(kind)) {
      absl::StatusOr<RooflineSpec> s = LoadRooflineSpec(kind, name);
      ASSERT_TRUE(s.ok()) << name << ": " << s.status();
      EXPECT_EQ(s->name, name);
      EXPECT_EQ(s->kind, kind);
    }
  }
  EXPECT_EQ(BuiltinRooflineNames("gpu").size(), 2u);
  EXPECT_EQ(BuiltinRooflineNames("cpu").size(), 1u);
}

TEST(RooflineSpecTest, DatasheetFiguresOfDonnasDevices) {
  absl::StatusOr<RooflineSpec> gpu = LoadRooflineSpec("gpu", "rtx3070ti");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_DOUBLE_EQ(gpu->peak_flops_per_s, 21.75e12);
  EXPECT_DOUBLE_EQ(gpu->memory_bytes_per_s, 608.3e9);
  absl::StatusOr<RooflineSpec> cpu = LoadRooflineSpec("cpu", "xeon-w3323");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_DOUBLE_EQ(cpu->peak_flops_per_s, 12 * 3.5e9 * 64);
  EXPECT_DOUBLE_EQ(cpu->memory_bytes_per_s, 8 * 25.6e9);
}

TEST(RooflineSpecTest, MissingSourceIsRefusedNamingTheField) {
  std::ifstream in(std::string(NEUPIMS_SOURCE_DIR) + "/configs/gpu/v100.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string key = "\"power_w\": \"NVIDIA";
  const size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, key.size(), "\"power\": \"NVIDIA");
  absl::StatusOr<RooflineSpec> s = LoadRooflineSpec("gpu", WriteTemp("v100x.json", text));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("sources.power_w"));
  EXPECT_THAT(s.status().message(), HasSubstr("sources.power"));
}

std::string V100WithPower(const std::string& power) {
  std::ifstream in(std::string(NEUPIMS_SOURCE_DIR) + "/configs/gpu/v100.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string key = "\"power_w\": 300,";
  const size_t at = text.find(key);
  if (at == std::string::npos) return "";
  return text.replace(at, key.size(), "\"power_w\": " + power + ",");
}

// As the FPGA's: energy is power x time, so a power of 0 or 1e-308 would print efficiencies of
// inf; a milliwatt is the floor.
TEST(RooflineSpecTest, PowerOutsideAMilliwattToAHundredKilowattsIsRefusedNamingFileAndField) {
  for (const char* power : {"1e-308", "0", "0.0009", "-1", "100001"}) {
    const std::string text = V100WithPower(power);
    ASSERT_FALSE(text.empty());
    const std::string path = WriteTemp("v100_power.json", text);
    absl::StatusOr<RooflineSpec> s = LoadRooflineSpec("gpu", path);
    ASSERT_FALSE(s.ok()) << power;
    EXPECT_THAT(s.status().message(), HasSubstr("power_w")) << power;
    EXPECT_THAT(s.status().message(), HasSubstr(path)) << power;
  }
  for (const char* power : {"0.001", "100000"}) {
    const std::string path = WriteTemp("v100_power.json", V100WithPower(power));
    EXPECT_TRUE(LoadRooflineSpec("gpu", path).ok()) << power;
  }
}

TEST(RooflineModelTest, ComputeBoundLayerTakesFlopsOverEffectivePeak) {
  const RooflineModel m(Simple());
  const Cost c = m.Estimate({.flops = 1e9, .bytes = 1000});
  EXPECT_DOUBLE_EQ(c.time_s, 1e-6 + 1e9 / (1e12 * 0.5));
  EXPECT_DOUBLE_EQ(c.energy_j, 200 * c.time_s);
}

TEST(RooflineModelTest, MemoryBoundLayerTakesBytesOverEffectiveBandwidth) {
  const RooflineModel m(Simple());
  const Cost c = m.Estimate({.flops = 1e6, .bytes = 800'000'000});
  EXPECT_DOUBLE_EQ(c.time_s, 1e-6 + 8e8 / (100e9 * 0.8));
}

TEST(RooflineModelTest, RidgePointSeparatesTheTwoRegimes) {
  const RooflineSpec s = Simple();
  EXPECT_DOUBLE_EQ(s.ridge_flops_per_byte(), 0.5e12 / 80e9);
  const RooflineModel m(s);
  const int64_t bytes = 1'000'000;
  const double at_ridge = s.ridge_flops_per_byte() * bytes;
  EXPECT_NEAR(m.Estimate({.flops = at_ridge, .bytes = bytes}).time_s,
              m.Estimate({.flops = 0, .bytes = bytes}).time_s, 1e-15);
  EXPECT_GT(m.Estimate({.flops = 2 * at_ridge, .bytes = bytes}).time_s,
            m.Estimate({.flops = at_ridge, .bytes = bytes}).time_s);
}

TEST(MeasuredProfileTest, MeasuredLayersOverrideTheRoofline) {
  const std::string path =
      WriteTemp("prof.csv", "layer,time_s,energy_j\nconv1,0.002,0.5\n\nfc8,1e-4,0.01\n");
  absl::StatusOr<MeasuredProfile> p = LoadMeasuredProfile(path);
  ASSERT_TRUE(p.ok()) << p.status();
  const RooflineModel m(Simple(), *p);
  EXPECT_DOUBLE_EQ(m.CostOf("conv1", {.flops = 1e9}).time_s, 0.002);
  EXPECT_DOUBLE_EQ(m.CostOf("conv1", {.flops = 1e9}).energy_j, 0.5);
  EXPECT_DOUBLE_EQ(m.CostOf("conv2", {.flops = 1e9}).time_s, m.Estimate({.flops = 1e9}).time_s);
}

TEST(MeasuredProfileTest, BadRowsAreRefusedNamingFileAndLine) {
  const std::string neg = WriteTemp("neg.csv", "layer,time_s,energy_j\nconv1,-1,0\n");
  absl::StatusOr<MeasuredProfile> p = LoadMeasuredProfile(neg);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr(neg + ":2"));
  EXPECT_THAT(p.status().message(), HasSubstr("time_s"));

  const std::string dup = WriteTemp("dup.csv", "layer,time_s,energy_j\na,1,1\na,2,2\n");
  EXPECT_THAT(LoadMeasuredProfile(dup).status().message(), HasSubstr("duplicate layer 'a'"));
  const std::string hdr = WriteTemp("hdr.csv", "name,time,energy\na,1,1\n");
  EXPECT_THAT(LoadMeasuredProfile(hdr).status().message(), HasSubstr("layer,time_s,energy_j"));
}

}  // namespace
}  // namespace neupims::hw::roofline
