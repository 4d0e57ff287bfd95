#include "common/enum_names.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

enum class Fruit { kApple, kPear, kPlum };
constexpr EnumName<Fruit> kFruits[] = {
    {"apple", Fruit::kApple},
    {"pear", Fruit::kPear},
    {"plum", Fruit::kPlum},
    {"malus", Fruit::kApple},  // an alias
};
constexpr EnumNames<Fruit> kFruitNames("fruit", kFruits);

TEST(EnumNames, EveryNameParsesAndPrintsBack) {
  for (const std::string& name : kFruitNames.Names()) {
    absl::StatusOr<Fruit> v = kFruitNames.Parse(name);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(kFruitNames.ToString(*v), name);
  }
}

TEST(EnumNames, AliasesParseButPrintAndListTheCanonicalName) {
  absl::StatusOr<Fruit> v = kFruitNames.Parse("malus");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, Fruit::kApple);
  EXPECT_STREQ(kFruitNames.ToString(Fruit::kApple), "apple");
  EXPECT_THAT(kFruitNames.Names(), ElementsAre("apple", "pear", "plum"));
}

TEST(EnumNames, UnknownNameIsInvalidArgumentListingTheChoices) {
  for (const char* name : {"", "Apple", "apple ", "fig"}) {
    absl::StatusOr<Fruit> v = kFruitNames.Parse(name);
    ASSERT_FALSE(v.ok()) << name;
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(v.status().message()),
              std::string("unknown fruit '") + name + "' (choices: apple, pear, plum)");
  }
}

}  // namespace
}  // namespace neupims
