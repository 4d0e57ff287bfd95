#include "models/model_config.h"

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/builtin_configs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace neupims::models {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

ModelConfig MustLoad(absl::string_view name) {
  absl::StatusOr<ModelConfig> cfg = LoadModelConfig(name);
  EXPECT_TRUE(cfg.ok()) << cfg.status();
  return cfg.ok() ? *cfg : ModelConfig{};
}

// The built-in gpt3-7b model as a mutable JSON tree.
nlohmann::json Gpt3_7bJson() {
  std::optional<absl::string_view> text = BuiltinConfigText("models/gpt3-7b.json");
  EXPECT_TRUE(text.has_value());
  const absl::string_view t = text.value_or("{}");
  return nlohmann::json::parse(t.begin(), t.end());
}

// The error of parsing `j` as "test.json" (OK if it parses).
absl::Status ParseStatus(const nlohmann::json& j) {
  return ParseModelConfig(j.dump(), "test.json").status();
}

TEST(ModelConfig, EveryBuiltinModelLoadsUnderItsOwnName) {
  EXPECT_THAT(BuiltinModelNames(),
              UnorderedElementsAre("gpt3-7b", "gpt3-13b", "gpt3-30b", "gpt3-175b", "llama2-7b",
                                   "llama2-70b", "phi-2"));
  for (const std::string& name : BuiltinModelNames()) {
    SCOPED_TRACE(name);
    absl::StatusOr<ModelConfig> cfg = LoadModelConfig(name);
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    EXPECT_EQ(cfg->name, name);
    EXPECT_FALSE(cfg->description.empty());
    EXPECT_TRUE(ValidateParallelism(*cfg, {.tp = cfg->default_tp, .pp = cfg->default_pp}).ok());
  }
}

TEST(ModelConfig, Gpt3VariantsMatchNeuPimsTable3) {
  struct Row {
    const char* name;
    int layers, heads, hidden, tp, pp;
  };
  for (const Row& r :
       {Row{"gpt3-7b", 32, 32, 4096, 4, 1}, Row{"gpt3-13b", 40, 40, 5120, 4, 1},
        Row{"gpt3-30b", 48, 56, 7168, 4, 2}, Row{"gpt3-175b", 96, 96, 12288, 8, 4}}) {
    SCOPED_TRACE(r.name);
    const ModelConfig m = MustLoad(r.name);
    EXPECT_EQ(m.layers, r.layers);
    EXPECT_EQ(m.heads, r.heads);
    EXPECT_EQ(m.kv_heads, r.heads);
    EXPECT_EQ(m.hidden, r.hidden);
    EXPECT_EQ(m.ffn_hidden, 4 * r.hidden);
    EXPECT_EQ(m.ffn, FfnType::kGelu);
    EXPECT_EQ(m.vocab, 50257);
    EXPECT_EQ(m.element_bytes, 2);
    EXPECT_EQ(m.max_seq_len, 2048);
    EXPECT_EQ(m.default_tp, r.tp);
    EXPECT_EQ(m.default_pp, r.pp);
    EXPECT_TRUE(m.tied_embeddings);
  }
}

TEST(ModelConfig, Llama2_70bUsesGroupedQueryAttentionAndSwiGlu) {
  const ModelConfig m = MustLoad("llama2-70b");
  EXPECT_EQ(m.layers, 80);
  EXPECT_EQ(m.heads, 64);
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_EQ(m.hidden, 8192);
  EXPECT_EQ(m.head_dim(), 128);
  EXPECT_EQ(m.ffn_hidden, 28672);
  EXPECT_EQ(m.ffn, FfnType::kSwiGlu);
  EXPECT_EQ(m.vocab, 32000);
  EXPECT_EQ(m.max_seq_len, 4096);
  EXPECT_EQ(m.default_tp, 8);
  EXPECT_EQ(m.default_pp, 1);
  EXPECT_FALSE(m.tied_embeddings);
}

// Counted: weight matrices only (per layer Q, K, V, O = 4 h^2 and the GELU MLP = 8 h^2, i.e.
// 12 h^2), plus one vocab x hidden matrix (GPT3 ties the LM head to the token embedding).
// Biases, layernorm gains and position embeddings are not counted.
TEST(ModelConfig, Gpt3_7bHasAbout6Point7BillionParameters) {
  const ModelConfig m = MustLoad("gpt3-7b");
  const int64_t h = 4096;
  EXPECT_EQ(m.LayerParameters(), 12 * h * h);
  EXPECT_EQ(m.Parameters(), 32 * 12 * h * h + 50257 * h);  // 6.648e9
  EXPECT_NEAR(static_cast<double>(m.Parameters()), 6.7e9, 0.1e9);
}

TEST(ModelConfig, Gpt3_175bHasAbout175BillionParameters) {
  const ModelConfig m = MustLoad("gpt3-175b");
  const int64_t h = 12288;
  EXPECT_EQ(m.Parameters(), 96 * 12 * h * h + 50257 * h);  // 1.7456e11
  EXPECT_NEAR(static_cast<double>(m.Parameters()), 1.75e11, 0.01e11);
}

TEST(ModelConfig, Llama2ParameterCountsMatchTheirNames) {
  // 7B: 32 x (4 h^2 + 3 h f) + 2 (untied) x 32000 h = 6.738e9 (HF reports 6,738,415,616
  // including the 2 x 4096 x 65 norm gains, which are not counted here).
  const ModelConfig m7 = MustLoad("llama2-7b");
  EXPECT_EQ(m7.Parameters(),
            32 * (4 * int64_t{4096} * 4096 + 3 * int64_t{4096} * 11008) + 2 * 32000 * 4096);
  EXPECT_NEAR(static_cast<double>(m7.Parameters()), 6.738e9, 0.001e9);
  // 70B: Q and O are 8192 x 8192, K and V 8192 x 1024 (8 KV heads x 128).
  const ModelConfig m70 = MustLoad("llama2-70b");
  const int64_t h = 8192;
  EXPECT_EQ(m70.LayerParameters(), 2 * h * h + 2 * h * 1024 + 3 * h * 28672);
  EXPECT_NEAR(static_cast<double>(m70.Parameters()), 6.898e10, 0.01e10);
}

TEST(ModelConfig, KvBytesPerTokenCountsKeysAndValuesOfEveryLayer) {
  // 80 layers x (K + V) x 8 KV heads x 128 x 2 B.
  EXPECT_EQ(MustLoad("llama2-70b").KvBytesPerToken(), 80 * 2 * 8 * 128 * 2);
  EXPECT_EQ(MustLoad("llama2-70b").KvBytesPerToken(), 327680);
  // GPT3-7B: 32 x 2 x 4096 x 2 B = 512 KiB.
  EXPECT_EQ(MustLoad("gpt3-7b").KvBytesPerToken(), 32 * 2 * 4096 * 2);
}

TEST(ModelConfig, KvBytesPerTokenOfADeviceSplitsLayersByPpAndKvHeadsByTp) {
  const ModelConfig m = MustLoad("llama2-70b");
  // 80 / 4 layers x (K + V) x 8 / 2 KV heads x 128 x 2 B.
  EXPECT_EQ(KvBytesPerToken(m, {.tp = 2, .pp = 4}), 20 * 2 * 4 * 128 * 2);
  EXPECT_EQ(KvBytesPerToken(m, {}), m.KvBytesPerToken());
}

TEST(ModelConfig, ValidateParallelismAcceptsTable3Splits) {
  const ModelConfig m = MustLoad("gpt3-7b");
  EXPECT_TRUE(ValidateParallelism(m, {.tp = 1, .pp = 1}).ok());
  EXPECT_TRUE(ValidateParallelism(m, {.tp = 4, .pp = 1}).ok());
  EXPECT_TRUE(ValidateParallelism(m, {.tp = 8, .pp = 4}).ok());
}

TEST(ModelConfig, ValidateParallelismRejectsTpThatDoesNotDivideTheHeads) {
  const absl::Status s = ValidateParallelism(MustLoad("gpt3-7b"), {.tp = 3, .pp = 1});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("gpt3-7b"), HasSubstr("tp = 3"),
                                 HasSubstr("does not divide heads (32)")));
}

TEST(ModelConfig, ValidateParallelismRejectsPpThatDoesNotDivideTheLayers) {
  const absl::Status s = ValidateParallelism(MustLoad("gpt3-7b"), {.tp = 1, .pp = 5});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("pp = 5"), HasSubstr("does not divide layers (32)")));
}

TEST(ModelConfig, ValidateParallelismRejectsTpThatDoesNotDivideTheKvHeads) {
  // LLaMA-2-70B has 64 query heads but only 8 KV heads.
  const absl::Status s = ValidateParallelism(MustLoad("llama2-70b"), {.tp = 16, .pp = 1});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("does not divide kv_heads (8)"));
}

TEST(ModelConfig, ValidateParallelismRejectsNonPositiveDegrees) {
  const ModelConfig m = MustLoad("gpt3-7b");
  EXPECT_EQ(ValidateParallelism(m, {.tp = 0, .pp = 1}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateParallelism(m, {.tp = 1, .pp = 0}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ModelConfig, ParseAcceptsTheBuiltinJsonWithoutOptionalFields) {
  nlohmann::json j = Gpt3_7bJson();
  j.erase("description");
  j.erase("tied_embeddings");
  absl::StatusOr<ModelConfig> m = ParseModelConfig(j.dump(), "test.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->description.empty());
  EXPECT_FALSE(m->tied_embeddings);
}

TEST(ModelConfig, ParseRejectsUnknownFieldNamingSourceAndField) {
  nlohmann::json j = Gpt3_7bJson();
  j["bogus"] = 1;
  const absl::Status s = ParseStatus(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("test.json"), HasSubstr("unknown field 'bogus'")));
}

TEST(ModelConfig, ParseRejectsMissingField) {
  nlohmann::json j = Gpt3_7bJson();
  j.erase("kv_heads");
  EXPECT_THAT(ParseStatus(j).message(),
              AllOf(HasSubstr("test.json"), HasSubstr("missing required field 'kv_heads'")));
}

TEST(ModelConfig, ParseRejectsUnknownFfnListingTheChoices) {
  nlohmann::json j = Gpt3_7bJson();
  j["ffn"] = "relu";
  EXPECT_THAT(ParseStatus(j).message(), AllOf(HasSubstr("test.json"), HasSubstr("field 'ffn'"),
                                              HasSubstr("gelu, swiglu"), HasSubstr("relu")));
}

TEST(ModelConfig, ParseRejectsNonPositiveSizes) {
  nlohmann::json j = Gpt3_7bJson();
  j["layers"] = 0;
  EXPECT_THAT(ParseStatus(j).message(),
              AllOf(HasSubstr("test.json"), HasSubstr("field 'layers'"), HasSubstr(">= 1")));
}

TEST(ModelConfig, ParseRejectsHeadsNotDivisibleByKvHeads) {
  nlohmann::json j = Gpt3_7bJson();
  j["kv_heads"] = 5;
  EXPECT_THAT(ParseStatus(j).message(), AllOf(HasSubstr("test.json"), HasSubstr("field 'heads'"),
                                              HasSubstr("multiple of kv_heads (5)")));
}

TEST(ModelConfig, ParseRejectsHiddenNotDivisibleByHeads) {
  nlohmann::json j = Gpt3_7bJson();
  j["hidden"] = 4100;
  EXPECT_THAT(ParseStatus(j).message(), AllOf(HasSubstr("test.json"), HasSubstr("field 'hidden'"),
                                              HasSubstr("multiple of heads (32)")));
}

TEST(ModelConfig, ParseRejectsDefaultParallelismThatDoesNotDivide) {
  nlohmann::json j = Gpt3_7bJson();
  j["default_tp"] = 3;
  j["default_pp"] = 5;
  const std::string msg(ParseStatus(j).message());
  EXPECT_THAT(msg, AllOf(HasSubstr("test.json: field 'default_tp'"),
                         HasSubstr("does not divide heads (32)")));
  EXPECT_THAT(msg, AllOf(HasSubstr("test.json: field 'default_pp'"),
                         HasSubstr("does not divide layers (32)")));
}

TEST(ModelConfig, LoadOfUnknownNameFails) { EXPECT_FALSE(LoadModelConfig("gpt5-1t").ok()); }

}  // namespace
}  // namespace neupims::models
