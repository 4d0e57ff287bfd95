// ModelConfig: a decoder-only LLM described as data (configs/models/*.json).
//
// Role: the typed form of a model file. LoadModelConfig accepts a built-in name ("gpt3-7b",
// "llama2-70b", ...) or a file path; every field is required, unknown fields are errors naming
// the file and field. Shipped: the four GPT3 variants of NeuPIMs Table 3 (with their TP/PP) and
// LLaMA-2 7B / 70B (GQA).
#ifndef NEUPIMS_MODELS_MODEL_CONFIG_H_
#define NEUPIMS_MODELS_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace neupims::models {

enum class FfnType { kGelu, kSwiGlu };  // GELU MLP (2 matrices) or SwiGLU (3 matrices)

struct ModelConfig {
  std::string name;
  int layers = 32;
  int heads = 32;          // query heads
  int kv_heads = 32;       // key/value heads (GQA: fewer)
  int hidden = 4096;       // model width d_model
  int ffn_hidden = 16384;  // FFN inner width
  FfnType ffn = FfnType::kGelu;
  int vocab = 50257;
  int element_bytes = 2;   // FP16 weights, activations and KV cache
  int max_seq_len = 2048;  // context window: prompt + generated tokens
  int default_tp = 1;      // tensor-parallel degree (NeuPIMs Table 3)
  int default_pp = 1;      // pipeline-parallel degree
  // The LM head reuses the token-embedding matrix (GPT-2/3: yes; LLaMA-2: no). Optional JSON
  // field "tied_embeddings", default false.
  bool tied_embeddings = false;
  std::string description;  // optional: where the numbers come from

  int head_dim() const { return hidden / heads; }
  // Parameters of one decoder layer and of the whole model (embeddings + LM head included).
  // Counted: the weight matrices (Q, K, V, O, the FFN matrices, the vocab x hidden token
  // embedding and the LM head, once if tied). Not counted: biases, layernorm gains and learned
  // position embeddings (GPT3-7B: < 0.2% together).
  int64_t LayerParameters() const;
  int64_t Parameters() const;
  // KV-cache bytes per token for all layers (keys + values): KvBytesPerToken(*this, {}).
  int64_t KvBytesPerToken() const;
};

// How one model is split over devices.
struct Parallelism {
  int tp = 1;  // tensor parallel: heads, FFN columns and KV heads split tp ways
  int pp = 1;  // pipeline parallel: layers split pp ways

  int devices() const { return tp * pp; }
};

// KV-cache bytes per token on one device: keys and values of its layers (layers / pp) for its
// KV heads (kv_heads / tp). The one definition: KV block sizes and KV transfers both use it.
int64_t KvBytesPerToken(const ModelConfig& m, const Parallelism& p);

absl::StatusOr<ModelConfig> LoadModelConfig(absl::string_view name_or_path);
absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json, absl::string_view source);
std::vector<std::string> BuiltinModelNames();

// Checks that `p` divides the model (heads and KV heads by tp, layers by pp, hidden/ffn by tp).
absl::Status ValidateParallelism(const ModelConfig& m, const Parallelism& p);

}  // namespace neupims::models

#endif  // NEUPIMS_MODELS_MODEL_CONFIG_H_
