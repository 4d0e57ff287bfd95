#include "common/config_reader.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_split.h"
#include "common/file_io.h"
#include "common/json_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace neupims {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// Parses `text` under the source name "cfg.json"; null (with a test failure) if it is invalid.
std::unique_ptr<ConfigDocument> Parse(absl::string_view text) {
  absl::StatusOr<std::unique_ptr<ConfigDocument>> doc =
      ConfigDocument::FromString(text, "cfg.json");
  EXPECT_TRUE(doc.ok()) << doc.status();
  return doc.ok() ? std::move(*doc) : nullptr;
}

// Number of errors in a document status (one per line).
size_t ErrorCount(const absl::Status& status) {
  if (status.ok()) return 0;
  return std::vector<std::string>(absl::StrSplit(status.message(), '\n')).size();
}

TEST(ConfigReader, ReadsRequiredIntDoubleBoolStringAndEnum) {
  auto doc = Parse(R"({"i": 42, "d": 2.5, "b": true, "s": "hello", "e": "dual"})");
  ASSERT_NE(doc, nullptr);
  ConfigObject root = doc->Root();
  EXPECT_EQ(root.Int("i"), 42);
  EXPECT_DOUBLE_EQ(root.Double("d"), 2.5);
  EXPECT_TRUE(root.Bool("b"));
  EXPECT_EQ(root.String("s"), "hello");
  EXPECT_EQ(root.Enum("e", {"single", "dual"}), "dual");
  root.Finish();
  EXPECT_TRUE(doc->status().ok()) << doc->status();
}

TEST(ConfigReader, DoubleAcceptsAnIntegerLiteral) {
  auto doc = Parse(R"({"d": 3})");
  ASSERT_NE(doc, nullptr);
  EXPECT_DOUBLE_EQ(doc->Root().Double("d"), 3.0);
  EXPECT_TRUE(doc->status().ok()) << doc->status();
}

TEST(ConfigReader, OptionalFieldsReturnFallbackWhenAbsentWithoutError) {
  auto doc = Parse(R"({})");
  ASSERT_NE(doc, nullptr);
  ConfigObject root = doc->Root();
  EXPECT_EQ(root.OptionalInt("i", 7), 7);
  EXPECT_DOUBLE_EQ(root.OptionalDouble("d", 1.5), 1.5);
  EXPECT_TRUE(root.OptionalBool("b", true));
  EXPECT_EQ(root.OptionalString("s", "fallback"), "fallback");
  EXPECT_EQ(root.OptionalEnum("e", "single", {"single", "dual"}), "single");
  root.Finish();
  EXPECT_TRUE(doc->status().ok()) << doc->status();
}

TEST(ConfigReader, OptionalFieldsReturnThePresentValue) {
  auto doc = Parse(R"({"i": 3, "d": 0.25, "b": false, "s": "x", "e": "dual"})");
  ASSERT_NE(doc, nullptr);
  ConfigObject root = doc->Root();
  EXPECT_EQ(root.OptionalInt("i", 7), 3);
  EXPECT_DOUBLE_EQ(root.OptionalDouble("d", 1.5), 0.25);
  EXPECT_FALSE(root.OptionalBool("b", true));
  EXPECT_EQ(root.OptionalString("s", "fallback"), "x");
  EXPECT_EQ(root.OptionalEnum("e", "single", {"single", "dual"}), "dual");
  root.Finish();
  EXPECT_TRUE(doc->status().ok()) << doc->status();
}

TEST(ConfigReader, OptionalFieldPresentWithWrongTypeIsAnError) {
  auto doc = Parse(R"({"i": "three"})");
  ASSERT_NE(doc, nullptr);
  doc->Root().OptionalInt("i", 7);
  EXPECT_EQ(doc->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(doc->status().message(),
              HasSubstr("cfg.json: field 'i': expected an integer, got \"three\""));
}

TEST(ConfigReader, OptionalIntOutOfRangeIsAnError) {
  auto doc = Parse(R"({"i": 0})");
  ASSERT_NE(doc, nullptr);
  doc->Root().OptionalInt("i", 7, {.min = 1});
  EXPECT_THAT(doc->status().message(), HasSubstr("field 'i': expected an integer >= 1, got 0"));
}

TEST(ConfigReader, IntBelowMinimumErrorMentionsTheBoundAndTheValue) {
  auto doc = Parse(R"({"a": {"b": -3}})");
  ASSERT_NE(doc, nullptr);
  ConfigObject a = doc->Root().Child("a");
  a.Int("b", {.min = 1});
  EXPECT_EQ(doc->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(doc->status().message(), "cfg.json: field 'a.b': expected an integer >= 1, got -3");
}

TEST(ConfigReader, IntAboveMaximumErrorMentionsBothBoundsAndTheValue) {
  auto doc = Parse(R"({"n": 11})");
  ASSERT_NE(doc, nullptr);
  doc->Root().Int("n", {.min = 1, .max = 10});
  EXPECT_THAT(doc->status().message(),
              HasSubstr("field 'n': expected an integer >= 1 <= 10, got 11"));
}

TEST(ConfigReader, IntAtTheBoundsIsAccepted) {
  auto doc = Parse(R"({"lo": 1, "hi": 10})");
  ASSERT_NE(doc, nullptr);
  ConfigObject root = doc->Root();
  EXPECT_EQ(root.Int("lo", {.min = 1, .max = 10}), 1);
  EXPECT_EQ(root.Int("hi", {.min = 1, .max = 10}), 10);
  EXPECT_TRUE(doc->status().ok()) << doc->status();
}

TEST(ConfigReader, DoubleOutOfRangeErrorMentionsTheBoundsAndTheValue) {
  auto doc = Parse(R"({"x": 1.5})");
  ASSERT_NE(doc, nullptr);
  doc->Root().Double("x", {.min = 0, .max = 1});
  EXPECT_THAT(doc->status().message(),
              HasSubstr("cfg.json: field 'x': expected a number >= 0 <= 1, got 1.5"));
}

TEST(ConfigReader, MissingRequiredFieldIsAnErrorNamingFileAndPath) {
  auto doc = Parse(R"({"a": {}})");
  ASSERT_NE(doc, nullptr);
  ConfigObject a = doc->Root().Child("a");
  EXPECT_EQ(a.Int("b"), 0);
  EXPECT_EQ(doc->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(doc->status().message(), "cfg.json: missing required field 'a.b'");
}

TEST(ConfigReader, EveryRequiredAccessorReportsAMissingField) {
  auto doc = Parse(R"({})");
  ASSERT_NE(doc, nullptr);
  ConfigObject root = doc->Root();
  root.Int("i");
  root.Double("d");
  root.Bool("b");
  root.String("s");
  root.Enum("e", {"x", "y"});
  root.Child("c");
  const std::string message(doc->status().message());
  for (const char* key : {"i", "d", "b", "s", "e", "c"}) {
    EXPECT_THAT(message, HasSubstr(std::string("missing required field '") + key + "'"));
  }
  EXPECT_EQ(ErrorCount(doc->status()), 6u) << message;
}

TEST(ConfigReader, UnknownFieldIsAnErrorNamingFileAndPath) {
  auto doc = Parse(R"({"a": {"b": 1, "c": 2}})");
  ASSERT_NE(doc, nullptr);
  ConfigObject root = doc->Root();
  ConfigObject a = root.Child("a");
  a.Int("b");
  a.Finish();
  root.Finish();
  EXPECT_EQ(doc->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(doc->status().message(), "cfg.json: unknown field 'a.c'");
}

TEST(ConfigReader, FieldReadByAnOptionalAccessorIsNotUnknown) {
  auto doc = Parse(R"({"x": 1})");
  ASSERT_NE(doc, nullptr);
  ConfigObject root = doc->Root();
  root.OptionalInt("x", 0);
  root.Finish();
  EXPECT_TRUE(doc->status().ok()) << doc->status();
}

TEST(ConfigReader, ChildWithWrongTypeIsOneErrorAndYieldsAnEmptyView) {
  auto doc = Parse(R"({"a": 5})");
  ASSERT_NE(doc, nullptr);
  ConfigObject root = doc->Root();
  ConfigObject a = root.Child("a");
  EXPECT_EQ(a.path(), "a");
  EXPECT_FALSE(a.Has("b"));
  EXPECT_THAT(a.Keys(), IsEmpty());
  // Reads inside the invalid child are not reported again: the parent already was.
  EXPECT_EQ(a.Int("b"), 0);
  a.Finish();
  root.Finish();
  EXPECT_EQ(doc->status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(doc->status().message(), "cfg.json: field 'a': expected an object, got 5");
}

TEST(ConfigReader, NestedChildPathsAreDotted) {
  auto doc = Parse(R"({"a": {"b": {"c": "oops"}}})");
  ASSERT_NE(doc, nullptr);
  ConfigObject c = doc->Root().Child("a").Child("b");
  EXPECT_EQ(c.path(), "a.b");
  c.Int("c");
  EXPECT_THAT(doc->status().message(), HasSubstr("cfg.json: field 'a.b.c': expected an integer"));
}

TEST(ConfigReader, WrongTypesAreErrorsNamingTheExpectedType) {
  auto doc = Parse(R"({"b": 1, "s": 2, "d": "x", "i": true})");
  ASSERT_NE(doc, nullptr);
  ConfigObject root = doc->Root();
  root.Bool("b");
  root.String("s");
  root.Double("d");
  root.Int("i");
  const std::string message(doc->status().message());
  EXPECT_THAT(message, HasSubstr("field 'b': expected true or false, got 1"));
  EXPECT_THAT(message, HasSubstr("field 's': expected a string, got 2"));
  EXPECT_THAT(message, HasSubstr("field 'd': expected a number, got \"x\""));
  EXPECT_THAT(message, HasSubstr("field 'i': expected an integer, got true"));
}

TEST(ConfigReader, EnumTypoListsTheAllowedValues) {
  auto doc = Parse(R"({"mode": "duel"})");
  ASSERT_NE(doc, nullptr);
  doc->Root().Enum("mode", {"single", "dual"});
  EXPECT_EQ(doc->status().message(),
            "cfg.json: field 'mode': expected one of {single, dual}, got \"duel\"");
}

TEST(ConfigReader, InvalidJsonTextIsAnErrorNamingTheSource) {
  absl::StatusOr<std::unique_ptr<ConfigDocument>> doc =
      ConfigDocument::FromString(R"({"a": 1,)", "broken.json");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(doc.status().message(), HasSubstr("broken.json: invalid JSON"));
}

TEST(ConfigReader, JsonCommentsAreRejected) {
  absl::StatusOr<std::unique_ptr<ConfigDocument>> doc =
      ConfigDocument::FromString("{\"a\": 1 // note\n}", "commented.json");
  ASSERT_FALSE(doc.ok());
  EXPECT_THAT(doc.status().message(), HasSubstr("commented.json: invalid JSON"));
}

TEST(ConfigReader, TopLevelNonObjectIsAnErrorNamingTheSource) {
  absl::StatusOr<std::unique_ptr<ConfigDocument>> doc =
      ConfigDocument::FromString("[1, 2]", "array.json");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(doc.status().message(), HasSubstr("array.json: expected a JSON object at top level"));
}

TEST(ConfigReader, SeveralErrorsAreAllReported) {
  auto doc = Parse(R"({"a": {"n": -1, "typo": 1}, "mode": "x", "flag": "yes"})");
  ASSERT_NE(doc, nullptr);
  ConfigObject root = doc->Root();
  ConfigObject a = root.Child("a");
  a.Int("n", {.min = 0});
  a.String("missing");
  a.Finish();
  root.Enum("mode", {"p", "q"});
  root.Bool("flag");
  root.Finish();
  const absl::Status status = doc->status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  const std::string message(status.message());
  EXPECT_THAT(message, HasSubstr("cfg.json: field 'a.n': expected an integer >= 0, got -1"));
  EXPECT_THAT(message, HasSubstr("cfg.json: missing required field 'a.missing'"));
  EXPECT_THAT(message, HasSubstr("cfg.json: unknown field 'a.typo'"));
  EXPECT_THAT(message, HasSubstr("cfg.json: field 'mode': expected one of {p, q}, got \"x\""));
  EXPECT_THAT(message, HasSubstr("cfg.json: field 'flag': expected true or false, got \"yes\""));
  EXPECT_EQ(ErrorCount(status), 5u) << message;
}

TEST(ConfigReader, IntRejectsANonIntegerFloat) {
  auto doc = Parse(R"({"n": 4.5})");
  ASSERT_NE(doc, nullptr);
  doc->Root().Int("n");
  EXPECT_EQ(doc->status().message(), "cfg.json: field 'n': expected an integer, got 4.5");
}

TEST(ConfigReader, IntAcceptsAnIntegralFloat) {
  auto doc = Parse(R"({"n": 4.0, "big": 1e3})");
  ASSERT_NE(doc, nullptr);
  EXPECT_EQ(doc->Root().Int("n"), 4);
  EXPECT_EQ(doc->Root().Int("big"), 1000);
  EXPECT_TRUE(doc->status().ok()) << doc->status();
}

TEST(ConfigReader, IntRejectsAFloatOutsideTheInt64Range) {
  auto doc = Parse(R"({"n": 1e30})");
  ASSERT_NE(doc, nullptr);
  doc->Root().Int("n");
  EXPECT_THAT(doc->status().message(), HasSubstr("field 'n': expected an integer"));
}

// An unsigned JSON integer above INT64_MAX must be rejected, never wrapped to a negative value.
TEST(ConfigReader, IntAboveInt64MaxIsAnErrorNotAWrappedValue) {
  auto doc = Parse(R"({"n": 9223372036854775808})");
  ASSERT_NE(doc, nullptr);
  const int64_t n = doc->Root().Int("n");
  EXPECT_FALSE(doc->status().ok()) << "Int returned " << n;
  EXPECT_THAT(doc->status().message(), HasSubstr("field 'n': expected an integer"));
}

TEST(ConfigReader, KeysListsEveryFieldOfTheObject) {
  auto doc = Parse(R"({"zeta": 1, "alpha": 2, "mid": {"x": 3}})");
  ASSERT_NE(doc, nullptr);
  EXPECT_THAT(doc->Root().Keys(), UnorderedElementsAre("zeta", "alpha", "mid"));
}

// Keys() keeps document order (the document is an nlohmann::ordered_json), not sorted order.
TEST(ConfigReader, KeysAreInDocumentOrder) {
  auto doc = Parse(R"({"zeta": 1, "alpha": 2, "mid": {"x": 3}})");
  ASSERT_NE(doc, nullptr);
  EXPECT_THAT(doc->Root().Keys(), ElementsAre("zeta", "alpha", "mid"));
}

TEST(ConfigReader, KeysDoNotConsumeFields) {
  auto doc = Parse(R"({"a": 1})");
  ASSERT_NE(doc, nullptr);
  ConfigObject root = doc->Root();
  EXPECT_THAT(root.Keys(), ElementsAre("a"));
  root.Finish();
  EXPECT_THAT(doc->status().message(), HasSubstr("unknown field 'a'"));
}

TEST(ConfigReader, CallerErrorNamesFileAndDottedPath) {
  auto doc = Parse(R"({"a": {"b": 3}})");
  ASSERT_NE(doc, nullptr);
  ConfigObject a = doc->Root().Child("a");
  a.Int("b");
  a.Error("b", "must be even");
  EXPECT_EQ(doc->status().message(), "cfg.json: field 'a.b': must be even");
}

TEST(ConfigReader, StatusIsOkWhenEveryFieldIsReadCorrectly) {
  auto doc = Parse(R"({"a": {"b": 1}, "c": "x"})");
  ASSERT_NE(doc, nullptr);
  EXPECT_EQ(doc->source(), "cfg.json");
  ConfigObject root = doc->Root();
  EXPECT_EQ(root.path(), "");
  EXPECT_TRUE(root.Has("a"));
  EXPECT_FALSE(root.Has("b"));
  ConfigObject a = root.Child("a");
  a.Int("b");
  a.Finish();
  root.String("c");
  root.Finish();
  EXPECT_TRUE(doc->status().ok()) << doc->status();
}

TEST(ConfigReader, FromFileReadsTheFileAndNamesItAsTheSource) {
  const std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) / "config_reader_test_from_file.json";
  ASSERT_TRUE(WriteFile(path.string(), R"({"n": "not a number"})").ok());
  absl::StatusOr<std::unique_ptr<ConfigDocument>> doc = ConfigDocument::FromFile(path.string());
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ((*doc)->source(), path.string());
  (*doc)->Root().Int("n");
  EXPECT_THAT((*doc)->status().message(), HasSubstr(path.string() + ": field 'n'"));
  std::filesystem::remove(path);
}

TEST(ConfigReader, FromFileOfAMissingFileIsNotFoundNamingThePath) {
  const std::string path = ::testing::TempDir() + "/config_reader_test_does_not_exist.json";
  absl::StatusOr<std::unique_ptr<ConfigDocument>> doc = ConfigDocument::FromFile(path);
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(doc.status().message(), HasSubstr(path));
}

TEST(ConfigReaderArrays, ReadsIntAndStringListsAndObjectElements) {
  auto doc = Parse(R"({"shape": [3, 224, 224], "names": ["a", "b"],
                       "layers": [{"k": 1}, {"k": 2}]})");
  ASSERT_NE(doc, nullptr);
  ConfigObject root = doc->Root();
  EXPECT_THAT(root.IntList("shape", {.min = 1}), ElementsAre(3, 224, 224));
  EXPECT_THAT(root.StringList("names"), ElementsAre("a", "b"));
  std::vector<ConfigObject> layers = root.Objects("layers");
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers[0].Int("k"), 1);
  EXPECT_EQ(layers[1].Int("k"), 2);
  EXPECT_EQ(layers[1].path(), "layers[1]");
  for (ConfigObject& layer : layers) layer.Finish();
  root.Finish();
  EXPECT_TRUE(doc->status().ok()) << doc->status();
}

TEST(ConfigReaderArrays, ErrorsNameTheElementIndex) {
  auto doc = Parse(R"({"shape": [3, 0], "names": ["a", 7], "layers": [{"k": 1, "typo": 2}, 5],
                       "scalar": 4})");
  ASSERT_NE(doc, nullptr);
  ConfigObject root = doc->Root();
  root.IntList("shape", {.min = 1});
  root.StringList("names");
  std::vector<ConfigObject> layers = root.Objects("layers");
  ASSERT_EQ(layers.size(), 2u);
  layers[0].Int("k");
  for (ConfigObject& layer : layers) layer.Finish();
  root.IntList("scalar");
  root.Finish();
  const std::string message(doc->status().message());
  EXPECT_THAT(message, HasSubstr("field 'shape[1]': expected an integer >= 1, got 0"));
  EXPECT_THAT(message, HasSubstr("field 'names[1]': expected a string, got 7"));
  EXPECT_THAT(message, HasSubstr("unknown field 'layers[0].typo'"));
  EXPECT_THAT(message, HasSubstr("field 'layers[1]': expected an object, got 5"));
  EXPECT_THAT(message, HasSubstr("field 'scalar': expected an array, got 4"));
  EXPECT_EQ(ErrorCount(doc->status()), 5u);
}

TEST(ConfigReaderArrays, ObjectsWithALabelKeyNameElementsByLabel) {
  auto doc = Parse(R"({"layers": [{"name": "conv1", "k": 0}, {"k": 0}]})");
  ASSERT_NE(doc, nullptr);
  std::vector<ConfigObject> layers = doc->Root().Objects("layers", "name");
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers[0].path(), "layers[conv1]");
  EXPECT_EQ(layers[1].path(), "layers[1]");  // no label: the index
  layers[0].Int("k", {.min = 1});
  EXPECT_THAT(doc->status().message(), HasSubstr("field 'layers[conv1].k': expected an integer"));
}

// Strict parse (issue 17, bugs 1 and 9): duplicate keys and numbers beyond a double are
// refused with the source and the key path, never thrown.
absl::Status ParseError(absl::string_view text) {
  absl::StatusOr<std::unique_ptr<ConfigDocument>> doc =
      ConfigDocument::FromString(text, "dev.json");
  return doc.status();
}

TEST(ConfigReader, RefusesADuplicateKeyNamingTheFileAndKeyPath) {
  const absl::Status top = ParseError(R"({"channels": 32, "channels": 1})");
  EXPECT_EQ(top.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(top.message(), HasSubstr("dev.json: duplicate key 'channels'"));
  const absl::Status nested = ParseError(R"({"hbm": {"a": 1, "b": {"c": 1, "c": 2}}})");
  EXPECT_THAT(nested.message(), HasSubstr("duplicate key 'hbm.b.c'"));
  const absl::Status in_array = ParseError(R"({"l": [{"k": 1}, {"k": 1, "k": 2}]})");
  EXPECT_THAT(in_array.message(), HasSubstr("duplicate key 'l[1].k'"));
}

TEST(ConfigReader, SameKeyInDifferentObjectsIsNotADuplicate) {
  auto doc = Parse(R"({"a": {"k": 1}, "b": {"k": 2}, "k": [{"k": 3}, {"k": 4}]})");
  EXPECT_NE(doc, nullptr);
}

TEST(ConfigReader, RefusesANumberTooLargeForADoubleWithTheField) {
  const absl::Status status = ParseError(R"({"frequency_mhz": 1e400})");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("dev.json: number out of range at field "
                                          "'frequency_mhz'"));
  EXPECT_THAT(ParseError(R"({"x": [1, -1e999]})").message(), HasSubstr("'x[1]'"));
  EXPECT_FALSE(ParseError("1e400").ok());
}

TEST(ConfigReader, SyntaxErrorsAreStatusesNamingTheFile) {
  for (absl::string_view text : {"", "{", "{\"a\":}", "[1,]", "{\"a\":1}}", "\x80"}) {
    const absl::Status status = ParseError(text);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(status.message(), HasSubstr("dev.json: invalid JSON")) << text;
  }
}

// 100,000 nested arrays in a trace line's "id" used to crash the reader (SIGSEGV: the
// document is copied and printed recursively). No input of ours nests beyond a few levels.
TEST(ConfigReader, RefusesNestingDeeperThanTheLimitNamingTheField) {
  for (const auto& [open, close] : {std::pair{"[", "]"}, std::pair{"{\"a\":", "}"}}) {
    std::string deep = "{\"id\": ";
    for (int i = 0; i < 100'000; ++i) deep += open;
    deep += "1";
    for (int i = 0; i < 100'000; ++i) deep += close;
    deep += "}";
    nlohmann::ordered_json j;
    const absl::Status status = ParseStrictJson(deep, "t.jsonl:1", &j);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << open;
    EXPECT_THAT(status.message(), HasSubstr("t.jsonl:1: JSON nested deeper than 64 levels at "
                                            "field 'id"))
        << open;
  }
  std::string ok;  // 64 levels are fine
  for (int i = 0; i < kMaxJsonDepth; ++i) ok += "[";
  for (int i = 0; i < kMaxJsonDepth; ++i) ok += "]";
  nlohmann::ordered_json j;
  EXPECT_TRUE(ParseStrictJson(ok, "", &j).ok());
}

TEST(ConfigReader, ParseStrictJsonKeepsDocumentOrderAndValues) {
  nlohmann::ordered_json j;
  ASSERT_TRUE(
      ParseStrictJson(R"({"z": 1, "a": [true, null, 2.5, "s", 18446744073709551615]})", "", &j)
          .ok());
  EXPECT_EQ(j.dump(), R"({"z":1,"a":[true,null,2.5,"s",18446744073709551615]})");
}

TEST(ConfigReader, ReadStrictJsonFileRefusesDuplicateKeysNamingTheFile) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) / "spec.json").string();
  ASSERT_TRUE(WriteFile(path, R"({"a": 1, "a": 2})").ok());
  const absl::StatusOr<nlohmann::json> dup = ReadStrictJsonFile(path);
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dup.status().message(), HasSubstr(path + ": duplicate key 'a'"));
  ASSERT_TRUE(WriteFile(path, R"({"b": [1, 2]})").ok());
  const absl::StatusOr<nlohmann::json> ok = ReadStrictJsonFile(path);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)["b"][1], 2);
  EXPECT_TRUE(absl::IsNotFound(ReadStrictJsonFile(path + ".missing").status()));
}

TEST(ConfigReader, CatchJsonErrorsTurnsAccessorExceptionsIntoStatuses) {
  const nlohmann::json j = nlohmann::json::parse(R"({"n": "not a number"})");
  const absl::Status status = CatchJsonErrors("shard.json", [&] {
    return absl::Status(absl::StatusCode::kInternal, std::to_string(j.at("n").get<int>()));
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("shard.json: malformed: "));
  EXPECT_TRUE(CatchJsonErrors("x", [] { return absl::OkStatus(); }).ok());
  EXPECT_TRUE(absl::IsNotFound(CatchJsonErrors("x", [] { return absl::NotFoundError("kept"); })));
}

}  // namespace
}  // namespace neupims
