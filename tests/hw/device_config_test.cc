#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/builtin_configs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hw/device.h"
#include "nlohmann/json.hpp"

namespace neupims::hw {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

DeviceConfig MustLoad(absl::string_view name) {
  absl::StatusOr<DeviceConfig> cfg = LoadDeviceConfig(name);
  EXPECT_TRUE(cfg.ok()) << cfg.status();
  return cfg.ok() ? *cfg : DeviceConfig{};
}

// The built-in neupims device as a mutable JSON tree.
nlohmann::json NeuPimsJson() {
  std::optional<absl::string_view> text = BuiltinConfigText("devices/neupims.json");
  EXPECT_TRUE(text.has_value());
  const absl::string_view t = text.value_or("{}");
  return nlohmann::json::parse(t.begin(), t.end());
}

// The error of parsing `j` as "test.json" (OK if it parses).
absl::Status ParseStatus(const nlohmann::json& j) {
  return ParseDeviceConfig(j.dump(), "test.json").status();
}

TEST(DeviceConfig, NeuPimsHasTable2HbmOrganizationAndTiming) {
  const DeviceConfig cfg = MustLoad("neupims");
  EXPECT_EQ(cfg.name, "neupims");
  EXPECT_FALSE(cfg.description.empty());
  const HbmOrganization& o = cfg.hbm.org;
  EXPECT_EQ(o.channels, 32);
  EXPECT_EQ(o.ranks, 2);
  EXPECT_EQ(o.bank_groups, 4);
  EXPECT_EQ(o.banks_per_group, 4);
  EXPECT_EQ(o.banks_per_channel(), 32);
  EXPECT_EQ(o.page_bytes, 1024);
  EXPECT_EQ(o.burst_bytes, 64);
  EXPECT_DOUBLE_EQ(cfg.hbm.frequency_mhz, 1000);
  const HbmTiming& t = cfg.hbm.timing;
  EXPECT_EQ(t.tBL, 2);
  EXPECT_EQ(t.tRCD, 14);
  EXPECT_EQ(t.tFAW, 30);
  EXPECT_EQ(t.tREFI, 3900);
  EXPECT_EQ(t.tRFC, 260);
  EXPECT_EQ(cfg.hbm.refresh, RefreshPolicy::kAllRanks);
}

TEST(DeviceConfig, NeuPimsHasTable2Npu) {
  const DeviceConfig cfg = MustLoad("neupims");
  const NpuSpec& npu = cfg.npu;
  EXPECT_DOUBLE_EQ(npu.frequency_mhz, 1000);
  EXPECT_EQ(npu.systolic_arrays, 8);
  EXPECT_EQ(npu.array_rows, 128);
  EXPECT_EQ(npu.array_cols, 128);
  EXPECT_EQ(npu.vector_units, 8);
  EXPECT_EQ(npu.vector_lanes, 128);
  EXPECT_EQ(npu.element_bytes, 2);
  EXPECT_EQ(npu.peak_macs_per_cycle(), 8 * 128 * 128);
  const VectorOpCost& softmax = npu.vector_ops[static_cast<int>(VectorOp::kSoftmax)];
  EXPECT_EQ(softmax.passes, 3);
  EXPECT_EQ(softmax.reductions, 2);
}

TEST(DeviceConfig, NeuPimsHasDualRowBuffersAndTheNeuPimsCommandSet) {
  const DeviceConfig cfg = MustLoad("neupims");
  EXPECT_TRUE(cfg.hbm.pim.enabled);
  EXPECT_EQ(cfg.hbm.pim.row_buffers, RowBufferMode::kDual);
  EXPECT_EQ(cfg.hbm.pim.command_set, PimCommandSet::kNeuPims);
  EXPECT_EQ(cfg.hbm.pim.mac_lanes_per_bank, 16);
}

TEST(DeviceConfig, NewtonHasSingleRowBuffersAndTheNewtonCommandSet) {
  const DeviceConfig cfg = MustLoad("newton");
  EXPECT_EQ(cfg.name, "newton");
  EXPECT_TRUE(cfg.hbm.pim.enabled);
  EXPECT_EQ(cfg.hbm.pim.row_buffers, RowBufferMode::kSingle);
  EXPECT_EQ(cfg.hbm.pim.command_set, PimCommandSet::kNewton);
}

TEST(DeviceConfig, NpuOnlyHasPimDisabled) {
  const DeviceConfig cfg = MustLoad("npu-only");
  EXPECT_EQ(cfg.name, "npu-only");
  EXPECT_FALSE(cfg.hbm.pim.enabled);
}

TEST(DeviceConfig, EveryBuiltinDeviceLoads) {
  for (const std::string& name : BuiltinConfigNames("devices")) {
    SCOPED_TRACE(name);
    absl::StatusOr<DeviceConfig> cfg = LoadDeviceConfig(name);
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    EXPECT_EQ(cfg->name, name);
  }
}

TEST(DeviceConfig, NpuHbmBytesPerCycleIsDerivedFromEveryChannel) {
  const DeviceConfig cfg = MustLoad("neupims");
  // 32 channels x 64 B per burst / 2 cycles per burst, HBM and NPU both at 1 GHz.
  EXPECT_DOUBLE_EQ(cfg.hbm.peak_bytes_per_cycle(), 32.0);
  EXPECT_DOUBLE_EQ(cfg.HbmCyclesPerNpuCycle(), 1.0);
  EXPECT_DOUBLE_EQ(cfg.npu.hbm_bytes_per_cycle, 32 * 64 / 2.0);
  EXPECT_DOUBLE_EQ(cfg.npu.hbm_bytes_per_cycle, 1024.0);
}

TEST(DeviceConfig, NpuHbmBytesPerCycleFollowsTheClockRatio) {
  nlohmann::json j = NeuPimsJson();
  j["hbm"]["organization"]["channels"] = 16;
  j["npu"]["frequency_mhz"] = 2000;  // two NPU cycles per HBM cycle
  absl::StatusOr<DeviceConfig> cfg = ParseDeviceConfig(j.dump(), "test.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_DOUBLE_EQ(cfg->npu.hbm_bytes_per_cycle, 16 * 32 * 0.5);
}

TEST(DeviceConfig, PeakHbmBytesPerSecondIsOnePointZeroTwoFourTerabytes) {
  EXPECT_DOUBLE_EQ(MustLoad("neupims").PeakHbmBytesPerSecond(), 1.024e12);
}

TEST(DeviceConfig, UnmodifiedNeuPimsJsonParses) {
  const absl::Status s = ParseStatus(NeuPimsJson());
  EXPECT_TRUE(s.ok()) << s;
}

TEST(DeviceConfig, UnknownNameIsNotFound) {
  absl::StatusOr<DeviceConfig> cfg = LoadDeviceConfig("no-such-device");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(cfg.status().message(), HasSubstr("neupims"));
}

TEST(DeviceConfig, UnknownTopLevelFieldIsAnErrorNamingFileAndPath) {
  nlohmann::json j = NeuPimsJson();
  j["extra"] = 1;
  const absl::Status s = ParseStatus(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("test.json: unknown field 'extra'"));
}

TEST(DeviceConfig, UnknownTimingFieldIsAnErrorNamingFileAndPath) {
  nlohmann::json j = NeuPimsJson();
  j["hbm"]["timing_cycles"]["tRDC"] = 14;
  const absl::Status s = ParseStatus(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("test.json: unknown field 'hbm.timing_cycles.tRDC'"));
}

TEST(DeviceConfig, MissingTimingFieldIsAnErrorNamingFileAndPath) {
  nlohmann::json j = NeuPimsJson();
  j["hbm"]["timing_cycles"].erase("tRCD");
  const absl::Status s = ParseStatus(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("test.json: missing required field 'hbm.timing_cycles.tRCD'"));
}

// Energy figures had no upper bound: 1e308 pJ per MAC parsed and every run reported "inf J".
// Each is bounded far above any real part (1e6 in its unit), naming the field.
TEST(DeviceConfig, EnergyFiguresHaveAnUpperBoundNamingTheField) {
  const std::vector<std::vector<std::string>> fields = {
      {"npu", "energy", "mac_pj"},
      {"npu", "energy", "static_power_w"},
      {"hbm", "power", "idd4r_ma"},
      {"hbm", "power", "io_pj_per_bit"},
      {"pim", "energy", "dot_read_multiple"},
      {"pim", "energy", "dual_buffer_background_fraction"}};
  for (const std::vector<std::string>& f : fields) {
    nlohmann::json j = NeuPimsJson();
    j[f[0]][f[1]][f[2]] = 1e308;
    const absl::Status s = ParseStatus(j);
    EXPECT_FALSE(s.ok()) << f[2];
    EXPECT_THAT(s.message(), HasSubstr("test.json: field '" + f[0] + "." + f[1] + "." + f[2]))
        << f[2];
  }
}

TEST(DeviceConfig, MissingPimObjectIsAnError) {
  nlohmann::json j = NeuPimsJson();
  j.erase("pim");
  const absl::Status s = ParseStatus(j);
  EXPECT_THAT(s.message(), HasSubstr("test.json: missing required field 'pim'"));
}

TEST(DeviceConfig, PimIssueDefaultsToUnlimitedAndParsesAChipQueue) {
  EXPECT_EQ(MustLoad("neupims").hbm.pim.issue.scope, PimIssueScope::kUnlimited);
  nlohmann::json j = NeuPimsJson();
  j["pim"]["issue"] = {{"scope", "chip"}, {"instructions_per_ns", 0.5}};
  absl::StatusOr<DeviceConfig> cfg = ParseDeviceConfig(j.dump(), "test.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->hbm.pim.issue.scope, PimIssueScope::kChip);
  EXPECT_EQ(cfg->hbm.pim.issue.instructions_per_ns, 0.5);
}

TEST(DeviceConfig, UnknownPimIssueScopeIsAnErrorListingTheChoices) {
  nlohmann::json j = NeuPimsJson();
  j["pim"]["issue"] = {{"scope", "core"}};
  const absl::Status s = ParseStatus(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("test.json"), HasSubstr("pim.issue.scope"),
                                 HasSubstr("unlimited"), HasSubstr("chip")));
}

TEST(DeviceConfig, NonPositivePimIssueRateIsAnErrorNamingTheField) {
  nlohmann::json j = NeuPimsJson();
  j["pim"]["issue"] = {{"scope", "chip"}, {"instructions_per_ns", 0}};
  EXPECT_THAT(ParseStatus(j).message(), HasSubstr("pim.issue.instructions_per_ns"));
}

TEST(DeviceConfig, PimTimingDefaultsToTheControllersAndParsesTheReferenceChoices) {
  EXPECT_TRUE(MustLoad("neupims").hbm.pim.timing.IsDefault());
  nlohmann::json j = NeuPimsJson();
  j["pim"]["timing"] = {{"row_close", "per_bank_precharge"}, {"gemv", "fused_command"},
                        {"gemv_releases_row", true},         {"gwrite", "ordinary_access"},
                        {"gwrite_access_bytes", 32},         {"refresh_guard", "wait_for_refresh"}};
  absl::StatusOr<DeviceConfig> cfg = ParseDeviceConfig(j.dump(), "test.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  const PimTiming& t = cfg->hbm.pim.timing;
  EXPECT_EQ(t.row_close, PimRowClose::kPerBankPrecharge);
  EXPECT_EQ(t.gemv, PimGemvTiming::kFusedCommand);
  EXPECT_TRUE(t.gemv_releases_row);
  EXPECT_EQ(t.gwrite, PimGwriteTiming::kOrdinaryAccess);
  EXPECT_EQ(t.gwrite_access_bytes, 32);
  EXPECT_EQ(t.refresh_guard, PimRefreshGuard::kWaitForRefresh);
  EXPECT_FALSE(t.IsDefault());
}

TEST(DeviceConfig, BadPimTimingIsAnErrorNamingTheField) {
  nlohmann::json j = NeuPimsJson();
  j["pim"]["timing"] = {{"row_close", "lazy"}};
  EXPECT_THAT(ParseStatus(j).message(),
              AllOf(HasSubstr("test.json"), HasSubstr("pim.timing.row_close"),
                    HasSubstr("per_bank_precharge")));
  j["pim"]["timing"] = {{"refresh", "wait"}};
  EXPECT_THAT(ParseStatus(j).message(), HasSubstr("pim.timing.refresh"));
  j["pim"]["timing"] = {{"gemv_releases_row", true}};  // column steps always hold the row
  EXPECT_THAT(ParseStatus(j).message(), HasSubstr("pim.timing.gemv_releases_row"));
  j["pim"]["timing"] = {{"gwrite", "ordinary_access"}, {"gwrite_access_bytes", 48}};
  EXPECT_THAT(ParseStatus(j).message(), HasSubstr("pim.timing.gwrite_access_bytes"));
  nlohmann::json newton = NeuPimsJson();
  newton["pim"]["command_set"] = "newton";
  newton["pim"]["timing"] = {{"gemv", "fused_command"}};
  EXPECT_THAT(ParseStatus(newton).message(), HasSubstr("pim.timing.gemv"));
}

TEST(DeviceConfig, ReferenceNpuSwitchesDefaultToOursAndParse) {
  EXPECT_EQ(MustLoad("neupims").npu.gemm_timing, GemmTiming::kWeightStationary);
  EXPECT_NEAR(MustLoad("neupims").npu.hbm_refresh_fraction, 260.0 / 3900.0, 1e-12);
  nlohmann::json j = NeuPimsJson();
  j["npu"]["gemm_timing"] = "block_pipeline";
  absl::StatusOr<DeviceConfig> cfg = ParseDeviceConfig(j.dump(), "test.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->npu.gemm_timing, GemmTiming::kBlockPipeline);
  j["npu"]["activation_traffic"] = "dram_round_trip";
  cfg = ParseDeviceConfig(j.dump(), "test.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->npu.activation_traffic, ActivationTraffic::kDramRoundTrip);
  EXPECT_EQ(MustLoad("neupims").npu.activation_traffic, ActivationTraffic::kOnChip);
  EXPECT_EQ(MustLoad("neupims").npu.op_overlap, OpOverlap::kConcurrentUnits);
  j["npu"]["op_overlap"] = "serial";
  cfg = ParseDeviceConfig(j.dump(), "test.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->npu.op_overlap, OpOverlap::kSerial);
  EXPECT_EQ(MustLoad("npu-only").npu.attention_mapping, AttentionMapping::kBandwidthBound);
  j["npu"]["attention_mapping"] = "serial_gemv";
  cfg = ParseDeviceConfig(j.dump(), "test.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->npu.attention_mapping, AttentionMapping::kSerialGemv);
  EXPECT_TRUE(MustLoad("neupims").tp_all_reduce);
  j["tp_all_reduce"] = false;
  cfg = ParseDeviceConfig(j.dump(), "test.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_FALSE(cfg->tp_all_reduce);
  j["npu"]["gemm_timing"] = "onnxim";
  EXPECT_THAT(ParseStatus(j).message(),
              AllOf(HasSubstr("npu.gemm_timing"), HasSubstr("block_pipeline")));
}

// The reference profiles (issue 14) set every switch the reference simulator's way and keep the
// hardware of the device they derive from.
TEST(DeviceConfig, ReferenceProfilesSetTheReferenceSimulatorsSwitches) {
  for (const char* name : {"neupims-ref", "newton-ref", "npu-only-ref"}) {
    SCOPED_TRACE(name);
    const DeviceConfig ref = MustLoad(name);
    EXPECT_EQ(ref.name, name);
    EXPECT_EQ(ref.npu.gemm_timing, GemmTiming::kBlockPipeline);
    EXPECT_EQ(ref.npu.activation_traffic, ActivationTraffic::kDramRoundTrip);
    EXPECT_EQ(ref.npu.op_overlap, OpOverlap::kSerial);
    EXPECT_EQ(ref.npu.sram_bytes, int64_t{131072} * 1024);
    EXPECT_EQ(ref.hbm.refresh, RefreshPolicy::kRankStaggered);
    EXPECT_FALSE(ref.tp_all_reduce);
    EXPECT_TRUE(ref.stage_barriers);
  }
  EXPECT_FALSE(MustLoad("neupims").stage_barriers);
  EXPECT_EQ(MustLoad("newton-ref").hbm.pim.issue.scope, PimIssueScope::kChip);
  EXPECT_EQ(MustLoad("newton-ref").hbm.pim.issue.instructions_per_ns, 1.0);
  EXPECT_EQ(MustLoad("neupims-ref").hbm.pim.issue.scope, PimIssueScope::kUnlimited);
  EXPECT_EQ(MustLoad("npu-only-ref").npu.attention_mapping, AttentionMapping::kSerialGemv);
  EXPECT_EQ(MustLoad("newton-ref").hbm.pim.command_set, MustLoad("newton").hbm.pim.command_set);
  EXPECT_EQ(MustLoad("newton-ref").hbm.pim.row_buffers, RowBufferMode::kSingle);
  EXPECT_EQ(MustLoad("neupims-ref").hbm.pim.row_buffers, RowBufferMode::kDual);
  EXPECT_FALSE(MustLoad("npu-only-ref").hbm.pim.enabled);
  for (const char* name : {"neupims-ref", "newton-ref"}) {
    SCOPED_TRACE(name);
    const PimTiming& t = MustLoad(name).hbm.pim.timing;
    EXPECT_EQ(t.row_close, PimRowClose::kPerBankPrecharge);
    EXPECT_EQ(t.gwrite, PimGwriteTiming::kOrdinaryAccess);
    EXPECT_EQ(t.gwrite_access_bytes, 32);
    EXPECT_EQ(t.refresh_guard, PimRefreshGuard::kWaitForRefresh);
  }
  EXPECT_EQ(MustLoad("neupims-ref").hbm.pim.timing.gemv, PimGemvTiming::kFusedCommand);
  EXPECT_TRUE(MustLoad("neupims-ref").hbm.pim.timing.gemv_releases_row);
  EXPECT_EQ(MustLoad("newton-ref").hbm.pim.timing.gemv, PimGemvTiming::kColumnSteps);
}

TEST(DeviceConfig, MissingVectorOpIsAnErrorNamingFileAndPath) {
  nlohmann::json j = NeuPimsJson();
  j["npu"]["vector_ops"].erase("gelu");
  const absl::Status s = ParseStatus(j);
  EXPECT_THAT(s.message(), HasSubstr("test.json: missing required field 'npu.vector_ops.gelu'"));
}

TEST(DeviceConfig, WrongTypeIsAnErrorNamingFileAndPath) {
  nlohmann::json j = NeuPimsJson();
  j["hbm"]["organization"]["channels"] = "32";
  const absl::Status s = ParseStatus(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("test.json: field 'hbm.organization.channels'"),
                                 HasSubstr("expected an integer"), HasSubstr("got \"32\"")));
}

TEST(DeviceConfig, OutOfRangeTimingNamesTheBoundAndTheValue) {
  nlohmann::json j = NeuPimsJson();
  j["hbm"]["timing_cycles"]["tRCD"] = -3;
  const absl::Status s = ParseStatus(j);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("test.json: field 'hbm.timing_cycles.tRCD'"),
                                 HasSubstr(">= 1"), HasSubstr("got -3")));
}

TEST(DeviceConfig, RowBufferTypoListsTheAllowedValues) {
  nlohmann::json j = NeuPimsJson();
  j["pim"]["row_buffers"] = "duel";
  const absl::Status s = ParseStatus(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("test.json: field 'pim.row_buffers': expected one of "
                                     "{single, dual}, got \"duel\""));
}

TEST(DeviceConfig, PageNotAMultipleOfTheBurstIsACrossFieldError) {
  nlohmann::json j = NeuPimsJson();
  j["hbm"]["organization"]["page_bytes"] = 1000;
  const absl::Status s = ParseStatus(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("test.json"), HasSubstr("hbm.organization.page_bytes"),
                                 HasSubstr("burst_bytes")));
}

TEST(DeviceConfig, RefreshIntervalNotAboveRefreshTimeIsACrossFieldError) {
  nlohmann::json j = NeuPimsJson();
  j["hbm"]["timing_cycles"]["tREFI"] = 260;
  const absl::Status s = ParseStatus(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("test.json"), HasSubstr("hbm.timing_cycles.tREFI")));
}

// JEDEC HBM2: the same-bank-group (long) spacing is never shorter than the other-group (short)
// one; a config with them swapped is a typo, refused naming both fields.
TEST(DeviceConfig, ShortTimingAboveItsLongTwinIsACrossFieldError) {
  for (const auto& [shorter, longer] :
       {std::pair{"tCCD_S", "tCCD_L"}, std::pair{"tRRD_S", "tRRD_L"},
        std::pair{"tWTR_S", "tWTR_L"}}) {
    SCOPED_TRACE(shorter);
    nlohmann::json j = NeuPimsJson();
    const int long_value = j["hbm"]["timing_cycles"][longer].get<int>();
    j["hbm"]["timing_cycles"][shorter] = long_value + 1;
    const absl::Status s = ParseStatus(j);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(),
                AllOf(HasSubstr("test.json"), HasSubstr(absl::StrCat("hbm.timing_cycles.", longer)),
                      HasSubstr(shorter)));
    j["hbm"]["timing_cycles"][shorter] = long_value;  // equal is allowed
    EXPECT_TRUE(ParseStatus(j).ok()) << ParseStatus(j);
  }
}

// A PIM tile never straddles a refresh, so a tREFI with no room for the longest tile (NeuPIMs:
// 260 + 1 + 215 = 476) is refused at load time; the command-level controller would otherwise
// refresh early before every tile and never finish.
TEST(DeviceConfig, RefreshIntervalWithNoRoomForAPimTileIsACrossFieldError) {
  nlohmann::json j = NeuPimsJson();
  j["hbm"]["timing_cycles"]["tREFI"] = 475;
  const absl::Status s = ParseStatus(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("test.json"), HasSubstr("hbm.timing_cycles.tREFI"),
                                 HasSubstr("longest PIM tile (215 cycles)")));
  j["hbm"]["timing_cycles"]["tREFI"] = 476;
  EXPECT_TRUE(ParseStatus(j).ok());
  j["pim"]["enabled"] = false;  // without PIM only tREFI > tRFC matters
  j["hbm"]["timing_cycles"]["tREFI"] = 300;
  EXPECT_TRUE(ParseStatus(j).ok());
}

TEST(DeviceConfig, TooSmallNpuScratchpadIsACrossFieldError) {
  nlohmann::json j = NeuPimsJson();
  j["npu"]["sram_bytes"] = 1 << 19;  // the weight tiles alone need 2 x 512 KiB
  const absl::Status s = ParseStatus(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("test.json"), HasSubstr("npu.sram_bytes")));
}

TEST(DeviceConfig, SeveralErrorsAreAllReported) {
  nlohmann::json j = NeuPimsJson();
  j["hbm"]["timing_cycles"]["tRDC"] = 14;
  j["hbm"]["organization"]["channels"] = "32";
  j["pim"]["command_set"] = "newtonn";
  const absl::Status s = ParseStatus(j);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("unknown field 'hbm.timing_cycles.tRDC'"),
                                 HasSubstr("field 'hbm.organization.channels'"),
                                 HasSubstr("field 'pim.command_set'")));
}

TEST(DeviceConfig, InvalidJsonNamesTheSource) {
  const absl::Status s = ParseDeviceConfig("{\"name\": ", "test.json").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("test.json"));
}

TEST(DeviceConfig, LoadFromAFilePathNamesThePathInErrors) {
  nlohmann::json j = NeuPimsJson();
  j["hbm"]["timing_cycles"]["tRDC"] = 14;
  const std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) / "device_config_test_typo.json";
  std::ofstream(path) << j.dump(2);
  absl::StatusOr<DeviceConfig> cfg = LoadDeviceConfig(path.string());
  std::filesystem::remove(path);
  ASSERT_FALSE(cfg.ok());
  EXPECT_THAT(cfg.status().message(),
              HasSubstr(path.string() + ": unknown field 'hbm.timing_cycles.tRDC'"));
}

}  // namespace
}  // namespace neupims::hw
