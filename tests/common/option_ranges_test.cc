#include "common/option_ranges.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace neupims {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(OptionRanges, RefuseNanAndInfinitiesEvenWithoutBounds) {
  EXPECT_EQ(DoubleRangeProblem(std::nan(""), {}), "must be a finite number");
  EXPECT_EQ(DoubleRangeProblem(kInf, {}), "must be a finite number");
  EXPECT_EQ(DoubleRangeProblem(-kInf, {}), "must be a finite number");
  EXPECT_EQ(DoubleRangeProblem(-1e300, {}), "");
}

TEST(OptionRanges, SayWhatTheBoundsAreInShortNumbers) {
  EXPECT_EQ(DoubleRangeProblem(1e-300, option_ranges::kSpeed), "must be in [1e-06, 1e+09]");
  EXPECT_EQ(DoubleRangeProblem(std::nan(""), option_ranges::kSpeed), "must be in [1e-06, 1e+09]");
  EXPECT_EQ(DoubleRangeProblem(0, option_ranges::kBurstiness), "must be in (0, 1000]");
  EXPECT_EQ(DoubleRangeProblem(-1, DoubleRange{.min = 0}), "must be >= 0");
  EXPECT_EQ(DoubleRangeProblem(0, DoubleRange{.min = 0, .min_exclusive = true}), "must be > 0");
  EXPECT_EQ(DoubleRangeProblem(2, DoubleRange{.max = 1}), "must be <= 1");
}

TEST(OptionRanges, AcceptTheBoundsAndTheDefaults) {
  EXPECT_EQ(DoubleRangeProblem(1e-6, option_ranges::kSpeed), "");
  EXPECT_EQ(DoubleRangeProblem(1e9, option_ranges::kSpeed), "");
  EXPECT_EQ(DoubleRangeProblem(1e-3, option_ranges::kLinkGbps), "");
  EXPECT_EQ(DoubleRangeProblem(64, option_ranges::kLinkGbps), "");
  EXPECT_EQ(DoubleRangeProblem(1000, option_ranges::kLinkLatencyNs), "");
  EXPECT_EQ(DoubleRangeProblem(256, option_ranges::kMeanOutputTokens), "");
  EXPECT_EQ(DoubleRangeProblem(30, option_ranges::kDrainTimeoutS), "");
  EXPECT_EQ(DoubleRangeProblem(1, option_ranges::kBurstiness), "");
}

TEST(OptionRanges, ConfigFieldsUseTheSameRangesAndRefuseTheExclusiveBound) {
  auto doc = ConfigDocument::FromString(R"({"b": 0})", "cfg.json");
  ASSERT_TRUE(doc.ok());
  (*doc)->Root().Double("b", option_ranges::kBurstiness);
  EXPECT_NE((*doc)->status().message().find("field 'b': expected a number > 0"), std::string::npos)
      << (*doc)->status();
}

}  // namespace
}  // namespace neupims
