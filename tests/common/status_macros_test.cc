#include "common/status_macros.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace neupims {
namespace {

// Returns `status` through RETURN_IF_ERROR; sets *reached if execution continued past it.
absl::Status PassThrough(absl::Status status, bool* reached) {
  RETURN_IF_ERROR(status);
  *reached = true;
  return absl::OkStatus();
}

TEST(ReturnIfError, ReturnsTheErrorAndStopsTheFunction) {
  bool reached = false;
  const absl::Status s = PassThrough(absl::NotFoundError("no such thing"), &reached);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "no such thing");
  EXPECT_FALSE(reached);
}

TEST(ReturnIfError, ContinuesOnOk) {
  bool reached = false;
  EXPECT_TRUE(PassThrough(absl::OkStatus(), &reached).ok());
  EXPECT_TRUE(reached);
}

TEST(ReturnIfError, EvaluatesTheExpressionExactlyOnce) {
  int calls = 0;
  auto f = [&]() -> absl::Status {
    auto count = [&] {
      ++calls;
      return absl::OkStatus();
    };
    RETURN_IF_ERROR(count());
    return absl::OkStatus();
  };
  EXPECT_TRUE(f().ok());
  EXPECT_EQ(calls, 1);
}

TEST(ReturnIfError, WorksTwiceInOneFunctionAndAsAnUnbracedIfBody) {
  auto f = [](bool first_ok, bool second_ok) -> absl::Status {
    if (!first_ok) RETURN_IF_ERROR(absl::InternalError("first"));
    RETURN_IF_ERROR(second_ok ? absl::OkStatus() : absl::InternalError("second"));
    return absl::OkStatus();
  };
  EXPECT_TRUE(f(true, true).ok());
  EXPECT_EQ(f(false, true).message(), "first");
  EXPECT_EQ(f(true, false).message(), "second");
}

TEST(ReturnIfError, PropagatesIntoAStatusOrReturningFunction) {
  auto f = []() -> absl::StatusOr<int> {
    RETURN_IF_ERROR(absl::OutOfRangeError("too far"));
    return 1;
  };
  const absl::StatusOr<int> r = f();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange);
}

absl::StatusOr<int> Value(int v) { return v; }
absl::StatusOr<int> Failure(absl::string_view message) {
  return absl::InvalidArgumentError(message);
}

TEST(AssignOrReturn, DeclaresTheVariableOnSuccess) {
  auto f = []() -> absl::StatusOr<int> {
    ASSIGN_OR_RETURN(auto x, Value(20));
    return x + 1;
  };
  const absl::StatusOr<int> r = f();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, 21);
}

TEST(AssignOrReturn, AssignsAnExistingVariableOnSuccess) {
  auto f = []() -> absl::StatusOr<int> {
    int x = -1;
    ASSIGN_OR_RETURN(x, Value(5));
    return x;
  };
  const absl::StatusOr<int> r = f();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, 5);
}

TEST(AssignOrReturn, ReturnsTheErrorAndLeavesTheVariableUntouched) {
  int x = -1;
  bool reached = false;
  auto f = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(x, Failure("bad value"));
    reached = true;
    return absl::OkStatus();
  };
  const absl::Status s = f();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "bad value");
  EXPECT_EQ(x, -1);
  EXPECT_FALSE(reached);
}

TEST(AssignOrReturn, ConvertsTheErrorToTheEnclosingStatusOrType) {
  auto f = []() -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(auto x, Failure("nope"));
    return std::to_string(x);
  };
  const absl::StatusOr<std::string> r = f();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "nope");
}

TEST(AssignOrReturn, WorksTwiceInOneFunctionWithUniqueTemporaries) {
  auto f = [](bool second_ok) -> absl::StatusOr<int> {
    ASSIGN_OR_RETURN(auto a, Value(2));
    ASSIGN_OR_RETURN(auto b, second_ok ? Value(3) : Failure("second"));
    return a * b;
  };
  const absl::StatusOr<int> ok = f(true);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, 6);
  EXPECT_EQ(f(false).status().message(), "second");
}

TEST(AssignOrReturn, MovesAMoveOnlyValue) {
  auto make = []() -> absl::StatusOr<std::unique_ptr<int>> { return std::make_unique<int>(9); };
  auto f = [&]() -> absl::StatusOr<int> {
    ASSIGN_OR_RETURN(std::unique_ptr<int> p, make());
    return *p;
  };
  const absl::StatusOr<int> r = f();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, 9);
}

TEST(AssignOrReturn, EvaluatesTheExpressionExactlyOnce) {
  int calls = 0;
  auto f = [&]() -> absl::Status {
    auto count = [&]() -> absl::StatusOr<int> { return ++calls; };
    ASSIGN_OR_RETURN(int v, count());
    EXPECT_EQ(v, 1);
    return absl::OkStatus();
  };
  EXPECT_TRUE(f().ok());
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace neupims
