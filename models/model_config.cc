#include "models/model_config.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/builtin_configs.h"
#include "common/config_reader.h"
#include "common/status_macros.h"

namespace neupims::models {

int64_t ModelConfig::LayerParameters() const {
  const int64_t h = hidden;
  const int64_t d = head_dim();
  const int64_t attention = h * (int64_t{heads} + 2 * int64_t{kv_heads}) * d  // W_q, W_k, W_v
                            + int64_t{heads} * d * h;                         // W_o
  const int64_t ffn_matrices = ffn == FfnType::kSwiGlu ? 3 : 2;               // (gate, up,) down
  return attention + ffn_matrices * h * ffn_hidden;
}

int64_t ModelConfig::Parameters() const {
  const int64_t vocab_matrices = tied_embeddings ? 1 : 2;  // token embedding (+ LM head)
  return int64_t{layers} * LayerParameters() + vocab_matrices * int64_t{vocab} * hidden;
}

int64_t ModelConfig::KvBytesPerToken() const { return models::KvBytesPerToken(*this, {}); }

int64_t KvBytesPerToken(const ModelConfig& m, const Parallelism& p) {
  return int64_t{m.layers / p.pp} * 2 * (m.kv_heads / p.tp) * m.head_dim() * m.element_bytes;
}

namespace {

// What `p` fails to divide, one entry per problem (empty when it divides the model).
std::vector<std::string> TpProblems(const ModelConfig& m, int tp) {
  std::vector<std::string> out;
  if (tp < 1) {
    out.push_back(absl::StrCat("tensor parallelism tp = ", tp, " must be >= 1"));
    return out;
  }
  auto check = [&](absl::string_view what, int value) {
    if (value % tp != 0) {
      out.push_back(absl::StrCat("tensor parallelism tp = ", tp, " does not divide ", what, " (",
                                 value, ")"));
    }
  };
  check("heads", m.heads);
  check("kv_heads", m.kv_heads);
  check("hidden", m.hidden);
  check("ffn_hidden", m.ffn_hidden);
  return out;
}

std::vector<std::string> PpProblems(const ModelConfig& m, int pp) {
  std::vector<std::string> out;
  if (pp < 1) {
    out.push_back(absl::StrCat("pipeline parallelism pp = ", pp, " must be >= 1"));
  } else if (m.layers % pp != 0) {
    out.push_back(
        absl::StrCat("pipeline parallelism pp = ", pp, " does not divide layers (", m.layers, ")"));
  }
  return out;
}

absl::StatusOr<ModelConfig> FromDocument(ConfigDocument& doc) {
  ModelConfig cfg;
  ConfigObject root = doc.Root();
  cfg.name = root.String("name");
  cfg.description = root.OptionalString("description", "");
  cfg.layers = static_cast<int>(root.Int("layers", {.min = 1, .max = 4096}));
  cfg.heads = static_cast<int>(root.Int("heads", {.min = 1, .max = 1 << 16}));
  cfg.kv_heads = static_cast<int>(root.Int("kv_heads", {.min = 1, .max = 1 << 16}));
  cfg.hidden = static_cast<int>(root.Int("hidden", {.min = 1, .max = 1 << 20}));
  cfg.ffn_hidden = static_cast<int>(root.Int("ffn_hidden", {.min = 1, .max = 1 << 22}));
  cfg.ffn = root.Enum("ffn", {"gelu", "swiglu"}) == "swiglu" ? FfnType::kSwiGlu : FfnType::kGelu;
  cfg.vocab = static_cast<int>(root.Int("vocab", {.min = 1, .max = 1 << 24}));
  cfg.element_bytes = static_cast<int>(root.Int("element_bytes", {.min = 1, .max = 8}));
  cfg.max_seq_len = static_cast<int>(root.Int("max_seq_len", {.min = 1, .max = 1 << 24}));
  cfg.default_tp = static_cast<int>(root.Int("default_tp", {.min = 1, .max = 1 << 16}));
  cfg.default_pp = static_cast<int>(root.Int("default_pp", {.min = 1, .max = 4096}));
  cfg.tied_embeddings = root.OptionalBool("tied_embeddings", false);
  root.Finish();
  RETURN_IF_ERROR(doc.status());

  // Cross-field checks, only once every field is individually valid.
  if (cfg.name.empty()) root.Error("name", "must not be empty");
  if (cfg.hidden % cfg.heads != 0) {
    root.Error("hidden",
               absl::StrCat("must be a multiple of heads (", cfg.heads, "), got ", cfg.hidden));
  }
  if (cfg.heads % cfg.kv_heads != 0) {
    root.Error("heads", absl::StrCat("must be a multiple of kv_heads (", cfg.kv_heads, "), got ",
                                     cfg.heads));
  }
  RETURN_IF_ERROR(doc.status());
  for (const std::string& problem : TpProblems(cfg, cfg.default_tp)) {
    root.Error("default_tp", problem);
  }
  for (const std::string& problem : PpProblems(cfg, cfg.default_pp)) {
    root.Error("default_pp", problem);
  }
  RETURN_IF_ERROR(doc.status());
  return cfg;
}

}  // namespace

absl::StatusOr<ModelConfig> LoadModelConfig(absl::string_view name_or_path) {
  ASSIGN_OR_RETURN(auto doc, OpenConfig("models", name_or_path));
  return FromDocument(*doc);
}

absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json, absl::string_view source) {
  ASSIGN_OR_RETURN(auto doc, ConfigDocument::FromString(json, std::string(source)));
  return FromDocument(*doc);
}

std::vector<std::string> BuiltinModelNames() { return BuiltinConfigNames("models"); }

absl::Status ValidateParallelism(const ModelConfig& m, const Parallelism& p) {
  std::vector<std::string> problems = TpProblems(m, p.tp);
  for (std::string& s : PpProblems(m, p.pp)) problems.push_back(std::move(s));
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("model '", m.name, "' (tp ", p.tp, ", pp ", p.pp,
                                                 "): ", absl::StrJoin(problems, "; ")));
}

}  // namespace neupims::models
