#include "tools/workload/range_flag.h"

#include <cstdint>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Parses `--x <value>` through one option checked by `check`; "" when accepted, else the error.
template <typename T>
std::string Parse(CLI::Validator check, const std::string& value, T* out) {
  CLI::App app;
  app.add_option("--x", *out)->check(check);
  std::vector<std::string> args = {value, "--x"};  // CLI11 takes them in reverse
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

// CLI11's PositiveNumber and NonNegativeNumber let NaN through and print their bound as a
// 309-digit number; ours refuse NaN and infinities and say what is allowed in a few words.
TEST(RangeFlag, PositiveRefusesZeroNanAndInfinityInShortWords) {
  double x = 0;
  for (const char* bad : {"0", "-1", "nan", "inf", "-inf"}) {
    const std::string error = Parse(Positive(), bad, &x);
    EXPECT_THAT(error, HasSubstr("must be > 0")) << bad;
    EXPECT_THAT(error, Not(HasSubstr("1797693"))) << bad;
  }
  EXPECT_EQ(Parse(Positive(), "1e-9", &x), "");
  EXPECT_EQ(x, 1e-9);
}

TEST(RangeFlag, NonNegativeAcceptsZeroAndRefusesNegativesAndNan) {
  int64_t n = 7;
  EXPECT_EQ(Parse(NonNegative(), "0", &n), "");
  EXPECT_EQ(n, 0);
  for (const char* bad : {"-1", "nan", "inf"}) {
    const std::string error = Parse(NonNegative(), bad, &n);
    EXPECT_THAT(error, HasSubstr("must be >= 0")) << bad;
    EXPECT_THAT(error, Not(HasSubstr("1797693"))) << bad;
  }
}

// A uint64 flag parsed by CLI11 alone took -1 and 2^64 (and beyond) as 2^64 - 1 in silence.
TEST(RangeFlag, Uint64RefusesNegativesAndValuesBeyondTwoToThe64) {
  uint64_t seed = 0;
  for (const char* bad : {"-1", "18446744073709551616", "99999999999999999999999", "1.5", "x"}) {
    EXPECT_THAT(Parse(Uint64(), bad, &seed), HasSubstr("is not an integer in [0, 2^64 - 1]"))
        << bad;
  }
  EXPECT_EQ(Parse(Uint64(), "18446744073709551615", &seed), "");
  EXPECT_EQ(seed, UINT64_MAX);
  EXPECT_EQ(Parse(Uint64(), "0", &seed), "");
  EXPECT_EQ(seed, 0u);
}

}  // namespace
}  // namespace neupims
