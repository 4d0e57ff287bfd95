#include "hw/link/link.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims::hw::link {
namespace {

using ::testing::HasSubstr;

// 12,845,056 bytes: VGG's first convolution output (64 x 224 x 224 FP32).
constexpr int64_t kBytes = 12'845'056;

TEST(LinkTest, Pcie5MatchesDonnaTableI) {
  absl::StatusOr<Link> l = BuiltinMedium("pcie5");
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_NEAR(l->TimeS(kBytes) * 1e3, 0.2007, 0.0001);
  EXPECT_NEAR(l->EnergyJ(kBytes) * 1e3, 0.668, 0.001);
}

TEST(LinkTest, LowBandwidthWirelessMatchesDonnaTableI) {
  absl::StatusOr<Link> l = BuiltinMedium("lb-wcc");
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_NEAR(l->TimeS(kBytes), 3.670, 0.001);
  EXPECT_NEAR(l->EnergyJ(kBytes), 5138, 1);
}

TEST(LinkTest, HighBandwidthWirelessIsOneGigabytePerSecond) {
  absl::StatusOr<Link> l = BuiltinMedium("hb-wcc");
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_DOUBLE_EQ(l->TimeS(1'000'000'000), 1.0);
  EXPECT_NEAR(l->EnergyJ(1), 8 * 0.1e-6, 1e-15);
}

TEST(LinkTest, LatencyIsAddedOncePerTransfer) {
  const Link l{.medium = "eth", .bytes_per_s = 1e6, .joules_per_bit = 0, .latency_s = 1e-3};
  EXPECT_DOUBLE_EQ(l.TimeS(1000), 2e-3);
}

TEST(LinkTest, UnknownMediumListsTheBuiltins) {
  absl::StatusOr<Link> l = BuiltinMedium("wifi");
  ASSERT_FALSE(l.ok());
  EXPECT_THAT(l.status().message(), HasSubstr("pcie5, hb-wcc, lb-wcc"));
}

TEST(LinkTest, NonPositiveBandwidthIsRefused) {
  EXPECT_FALSE(ValidateLink({.medium = "x", .bytes_per_s = 0}, "links[0]").ok());
  absl::Status s = ValidateLink({.medium = "x", .bytes_per_s = -5}, "links[0]");
  EXPECT_THAT(s.message(), HasSubstr("links[0]"));
  EXPECT_THAT(s.message(), HasSubstr("bandwidth"));
  EXPECT_FALSE(ValidateLink({.medium = "x", .bytes_per_s = 1, .joules_per_bit = -1}, "l").ok());
}

}  // namespace
}  // namespace neupims::hw::link
