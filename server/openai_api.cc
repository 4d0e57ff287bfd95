#include "server/openai_api.h"

#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/request_field.h"
#include "common/status_macros.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "prometheus/text_serializer.h"
#include "server/generate_request.h"
#include "server/request_scan.h"
#include "server/start_thread.h"
#include "server/status_map.h"

namespace neupims::server {
namespace {

using nlohmann::json;

constexpr char kJson[] = "application/json";
// OpenAI's legacy completions default; chat defaults to the rest of the context.
constexpr int64_t kDefaultCompletionTokens = 16;
// Fast pacing: tokens a stream's thread lets accumulate before it is woken (HttpRequestState).
constexpr size_t kFastWakeBatch = 32;
constexpr absl::Duration kFastWakeInterval = absl::Milliseconds(20);
// A whole (not streamed) response: how often its thread checks whether the client hung up.
constexpr absl::Duration kHangUpCheckInterval = absl::Milliseconds(50);

// ---- Errors ----------------------------------------------------------------------------------

// A request error with the OpenAI "param" it concerns (empty: none).
struct ApiError {
  absl::Status status;
  std::string param;
};

ApiError BadField(std::string param, absl::string_view message) {
  return {absl::InvalidArgumentError(absl::StrCat(param, ": ", message)), std::move(param)};
}

// `http_status` 0: the status's own (status_map.h); else this one, which `code` repeats.
json ErrorJson(const ApiError& e, int http_status = 0) {
  const HttpError h = ToHttpError(e.status);
  json err = {{"message", std::string(e.status.message())},
              {"type", h.type},
              {"param", e.param.empty() ? json(nullptr) : json(e.param)},
              {"code", http_status != 0 ? http_status : h.http_status}};
  return json{{"error", std::move(err)}};
}

// `text` with every whole-word `from` (not part of a longer name such as max_prompt_tokens)
// replaced by `to`.
std::string ReplaceWord(absl::string_view text, absl::string_view from, absl::string_view to) {
  const auto is_word = [](char c) { return absl::ascii_isalnum(c) || c == '_'; };
  std::string out;
  size_t start = 0;
  for (size_t at = text.find(from); at != absl::string_view::npos; at = text.find(from, at + 1)) {
    const size_t end = at + from.size();
    if ((at > 0 && is_word(text[at - 1])) || (end < text.size() && is_word(text[end]))) continue;
    absl::StrAppend(&out, text.substr(start, at - start), to);
    start = end;
  }
  absl::StrAppend(&out, text.substr(start));
  return out;
}

// A refusal of the one request check (Engine::CheckRequest and the token ids, which name the
// engine's fields, the gRPC proto's) as this API's error: the field it concerns
// (common/request_field.h) becomes the one this client sent, in `param` and in the message.
ApiError EngineError(const absl::Status& s, absl::string_view prompt_field,
                     absl::string_view max_tokens_field, bool max_tokens_sent) {
  if (absl::IsNotFound(s)) return {s, "model"};  // NOT_FOUND from generate_request.h: the model
  const std::string field = RequestFieldOf(s);
  std::string message = ReplaceWord(ReplaceWord(s.message(), kMaxNewTokensField, max_tokens_field),
                                    kPromptTokensField, prompt_field);
  std::string param;
  if (field == kPromptTokensField) param = std::string(prompt_field);
  if (field == kMaxNewTokensField) {
    param = std::string(max_tokens_field);
    if (!max_tokens_sent)
      absl::StrAppend(&message, " (", param, " not sent: the server's default)");
  }
  absl::Status mapped(s.code(), message);
  s.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    mapped.SetPayload(url, payload);  // keeps kRequestTooLargePayload: 413
  });
  return {std::move(mapped), std::move(param)};
}

void SendError(const ApiError& e, httplib::Response& res, int http_status = 0) {
  res.status = http_status != 0 ? http_status : ToHttpError(e.status).http_status;
  res.set_content(ErrorJson(e, http_status).dump(), kJson);
}

// A refusal of the API: counted in neupims:request_errors_total by its status's code name (the
// one place an HTTP refusal is counted; null `metrics`: not counted) and answered as SendError.
void Refuse(ServerMetrics* metrics, const ApiError& e, httplib::Response& res,
            int http_status = 0) {
  if (metrics != nullptr) metrics->OnRequestError(absl::StatusCodeToString(e.status.code()));
  SendError(e, res, http_status);
}

// ---- Requests --------------------------------------------------------------------------------

enum class Api { kCompletions, kChat };

struct ParsedRequest {
  GenerateInput input;
  bool stream = false;
  bool include_usage = false;
  // This API's names of the engine's request fields (EngineError): "prompt" or "messages", and
  // "max_tokens" or "max_completion_tokens" (the one sent, else the API's own; not sent: a
  // default the server chose).
  std::string prompt_field;
  std::string max_tokens_field;
  bool max_tokens_sent = false;
};

// Reads an optional field of the expected JSON type; a wrong type is an error naming it.
template <typename T>
std::optional<ApiError> Read(const json& body, const char* key, std::optional<T>* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  bool ok = false;
  if constexpr (std::is_same_v<T, bool>) {
    ok = it->is_boolean();
  } else if constexpr (std::is_same_v<T, std::string>) {
    ok = it->is_string();
  } else if constexpr (std::is_integral_v<T>) {
    ok = it->is_number_integer();
  } else {
    ok = it->is_number();
  }
  if (!ok) return BadField(key, absl::StrCat("has the wrong type (", it->type_name(), ")"));
  *out = it->get<T>();
  return std::nullopt;
}

// `prompt`: a string, a list of token ids (as vLLM accepts), or a list of one of either.
std::optional<ApiError> ReadPrompt(const json& body, Prompt* prompt) {
  auto it = body.find("prompt");
  if (it == body.end()) return BadField("prompt", "is required");
  const json* p = &*it;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) {
    p = &(*p)[0];  // a batch of one prompt
  }
  if (p->is_string()) {
    *prompt = p->get<std::string>();
    return std::nullopt;
  }
  if (p->is_array()) {
    std::vector<int64_t> ids;
    ids.reserve(p->size());
    for (const json& id : *p) {
      if (!id.is_number_integer()) {
        return BadField("prompt", "must be a string or a list of token ids (one prompt only)");
      }
      ids.push_back(id.get<int64_t>());
    }
    *prompt = std::move(ids);
    return std::nullopt;
  }
  return BadField("prompt", "must be a string or a list of token ids");
}

// OpenAI's message roles ("function" is its deprecated form of "tool").
bool IsChatRole(absl::string_view role) {
  for (absl::string_view known : {"system", "developer", "user", "assistant", "tool", "function"}) {
    if (role == known) return true;
  }
  return false;
}

// The documented chat template (docs/api.md): every message as "<|role|>\n" + its content +
// "\n", then "<|assistant|>\n" for the reply. A content may be a string or a list of text parts.
std::optional<ApiError> FlattenMessages(const json& body, std::string* text) {
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty()) {
    return BadField("messages", "must be a non-empty list of {role, content}");
  }
  for (const json& m : *it) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return BadField("messages", "every message needs a string role");
    }
    const std::string& role = m["role"].get_ref<const std::string&>();
    if (!IsChatRole(role)) {
      return BadField("messages", absl::StrCat("unknown role '", role,
                                               "' (roles: system, developer, user, assistant, "
                                               "tool, function)"));
    }
    absl::StrAppend(text, "<|", role, "|>\n");
    const json content = m.value("content", json(nullptr));
    if (content.is_null() && role != "assistant") {
      // Only an assistant message may lack a content (it made tool calls instead).
      return BadField("messages", absl::StrCat("a '", role, "' message needs a content"));
    }
    if (content.is_string()) {
      absl::StrAppend(text, content.get<std::string>());
    } else if (content.is_array()) {
      for (const json& part : content) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part["text"].is_string()) {
          return BadField("messages", "content parts must be {\"type\": \"text\", \"text\": ...}");
        }
        absl::StrAppend(text, part["text"].get<std::string>());
      }
    } else if (!content.is_null()) {
      return BadField("messages", "a content must be a string or a list of text parts");
    }
    absl::StrAppend(text, "\n");
  }
  absl::StrAppend(text, "<|assistant|>\n");
  return std::nullopt;
}

// An optional number within OpenAI's documented range for it.
std::optional<ApiError> CheckRange(const json& body, const char* key, double lo, double hi) {
  std::optional<double> v;
  if (auto e = Read(body, key, &v)) return e;
  if (v.has_value() && !(*v >= lo && *v <= hi)) {
    return BadField(key, absl::StrCat("must be in [", lo, ", ", hi, "], got ", *v));
  }
  return std::nullopt;
}

// An optional field of a JSON type other than Read's (`stop`, `logit_bias`).
std::optional<ApiError> CheckStop(const json& body) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null() || it->is_string()) return std::nullopt;
  if (it->is_array() &&
      std::all_of(it->begin(), it->end(), [](const json& s) { return s.is_string(); })) {
    return std::nullopt;
  }
  return BadField("stop", "must be a string or a list of strings");
}

// Something the synthetic tokens cannot give: refused rather than answered without it.
ApiError Unavailable(const char* key) {
  return BadField(key,
                  "is not available: generated tokens are synthetic, no probabilities or "
                  "alternatives are computed (docs/api.md)");
}

// The sampling fields have no effect, since no real token is computed (tokenizer.h), but are
// checked as OpenAI checks them (type and range), so that a client's mistake is not silently
// accepted; log probabilities, an echoed prompt and best_of > 1 are refused (Unavailable).
std::optional<ApiError> CheckSamplingFields(Api api, const json& body) {
  std::optional<std::string> user;
  std::optional<int64_t> best_of, top_logprobs, completion_logprobs;
  std::optional<bool> chat_logprobs, echo;
  for (auto e :
       {CheckRange(body, "temperature", 0, 2), CheckRange(body, "top_p", 0, 1),
        CheckRange(body, "presence_penalty", -2, 2), CheckRange(body, "frequency_penalty", -2, 2),
        CheckStop(body), Read(body, "user", &user), Read(body, "best_of", &best_of),
        Read(body, "top_logprobs", &top_logprobs), Read(body, "echo", &echo),
        api == Api::kChat ? Read(body, "logprobs", &chat_logprobs)
                          : Read(body, "logprobs", &completion_logprobs)}) {
    if (e.has_value()) return e;
  }
  if (auto it = body.find("logit_bias"); it != body.end() && !it->is_null() && !it->is_object()) {
    return BadField("logit_bias", "must be an object of token id -> bias");
  }
  if (best_of.has_value() && *best_of < 1) return BadField("best_of", "must be >= 1");
  if (best_of.value_or(1) > 1) return BadField("best_of", "only best_of = 1 is supported");
  if (chat_logprobs.value_or(false) || completion_logprobs.has_value()) {
    return Unavailable("logprobs");
  }
  if (top_logprobs.value_or(0) != 0) return Unavailable("top_logprobs");
  if (echo.value_or(false)) return Unavailable("echo");
  return std::nullopt;
}

// A completion length the client set must be positive; it is named as the client sent it.
std::optional<ApiError> CheckLength(const char* key, const std::optional<int64_t>& v) {
  if (v.has_value() && *v < 1) return BadField(key, absl::StrCat("must be >= 1, got ", *v));
  return std::nullopt;
}

// Translates the fields this server honours, after CheckSamplingFields.
std::optional<ApiError> ParseBody(Api api, const json& body, const ServedEngine& served,
                                  const ByteTokenizer& tokenizer, uint64_t default_seed,
                                  ParsedRequest* out) {
  if (!body.is_object()) return BadField("body", "must be a JSON object");
  std::optional<std::string> model;
  std::optional<bool> stream, ignore_eos;
  std::optional<int64_t> n, max_tokens, max_completion_tokens, seed;
  for (auto e :
       {Read(body, "model", &model), Read(body, "stream", &stream),
        Read(body, "ignore_eos", &ignore_eos), Read(body, "n", &n),
        Read(body, "max_tokens", &max_tokens),
        Read(body, "max_completion_tokens", &max_completion_tokens), Read(body, "seed", &seed)}) {
    if (e.has_value()) return e;
  }
  if (n.value_or(1) != 1) return BadField("n", "only n = 1 is supported");
  for (auto e : {CheckSamplingFields(api, body), CheckLength("max_tokens", max_tokens),
                 CheckLength("max_completion_tokens", max_completion_tokens)}) {
    if (e.has_value()) return e;
  }
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object()) return BadField("stream_options", "must be an object");
    if (!stream.value_or(false)) {
      return BadField("stream_options", "is only allowed when stream is true");
    }
    std::optional<bool> usage;
    if (auto e = Read(*so, "include_usage", &usage)) return e;
    out->include_usage = usage.value_or(false);
  }
  GenerateInput& in = out->input;
  if (api == Api::kChat) {
    std::string text;
    if (auto e = FlattenMessages(body, &text)) return e;
    in.prompt = std::move(text);
  } else if (auto e = ReadPrompt(body, &in.prompt)) {
    return e;
  }
  std::optional<int64_t> limit =
      max_completion_tokens.has_value() ? max_completion_tokens : max_tokens;
  if (!limit.has_value() && api == Api::kChat) {
    const std::string& text = std::get<std::string>(in.prompt);
    const int64_t prompt_tokens = static_cast<int64_t>(tokenizer.Encode(text).size());
    limit = std::max<int64_t>(1, served.model.max_seq_len - prompt_tokens);
  }
  out->prompt_field = api == Api::kChat ? "messages" : "prompt";
  out->max_tokens_sent = max_completion_tokens.has_value() || max_tokens.has_value();
  out->max_tokens_field =
      max_completion_tokens.has_value() || (!max_tokens.has_value() && api == Api::kChat)
          ? "max_completion_tokens"
          : "max_tokens";
  in.model = model.value_or("");
  in.max_new_tokens = limit.value_or(kDefaultCompletionTokens);
  in.ignore_eos = ignore_eos.value_or(false);
  in.seed = seed.has_value() ? static_cast<uint64_t>(*seed) : default_seed;
  out->stream = stream.value_or(false);
  return std::nullopt;
}

// ---- Responses -------------------------------------------------------------------------------

const char* FinishName(Finish f) {
  switch (f) {
    case Finish::kLength:
      return "length";
    case Finish::kStop:
      return "stop";
    case Finish::kAborted:
      return "abort";  // as vLLM reports it
    case Finish::kRejected:
      return "rejected";
  }
  return "stop";
}

// Appends `text` as the inside of a JSON string.
void AppendJsonEscaped(absl::string_view text, std::string* out) {
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(ch);
    } else if (c < 0x20 || c >= 0x80) {
      // Bytes of the byte-level tokenizer stand alone: >= 0x80 is not UTF-8 by itself, so it is
      // sent as the code point of the same value.
      absl::StrAppendFormat(out, "\\u%04x", c);
    } else {
      out->push_back(ch);
    }
  }
}

json Usage(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

// The simulated hardware's view of the request (an extension field; OpenAI clients ignore it).
json SimulatedTimes(const Completion& c) {
  return {{"queue_time_s", c.queue_time_s},
          {"ttft_s", c.ttft_s},
          {"tpot_s", c.tpot_s},
          {"e2e_latency_s", c.e2e_latency_s},
          {"pim_channel", c.pim_channel},
          {"preemptions", c.preemptions},
          {"error", c.error}};
}

// Per-response constants: the id, object names and the fixed JSON around each token's text.
struct ResponseShape {
  Api api = Api::kCompletions;
  std::string id, model;
  int64_t created = 0;
  bool usage_null = false;  // include_usage: every chunk carries "usage": null

  json Header(bool chunk) const {
    const char* object = api == Api::kChat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                           : "text_completion";
    return {{"id", id}, {"object", object}, {"created", created}, {"model", model}};
  }
};

// Formats a stream's SSE events: one chunk per token, as OpenAI and vLLM stream them.
class SseWriter {
 public:
  explicit SseWriter(const ResponseShape& shape) : shape_(shape) {
    std::string head = shape.Header(true).dump();
    head.pop_back();  // the closing brace: choices follow
    prefix_ = absl::StrCat("data: ", head, ",\"choices\":[{\"index\":0,",
                           shape.api == Api::kChat ? "\"delta\":{\"content\":\"" : "\"text\":\"");
    suffix_ = absl::StrCat(shape.api == Api::kChat ? "\"}" : "\"",
                           ",\"logprobs\":null,\"finish_reason\":null}]",
                           shape.usage_null ? ",\"usage\":null" : "", "}\n\n");
  }

  // Chat streams open with the assistant's role, as OpenAI's do.
  void AppendRole(std::string* out) const {
    json chunk = shape_.Header(true);
    chunk["choices"] = json::array({{{"index", 0},
                                     {"delta", {{"role", "assistant"}, {"content", ""}}},
                                     {"logprobs", nullptr},
                                     {"finish_reason", nullptr}}});
    if (shape_.usage_null) chunk["usage"] = nullptr;
    AppendEvent(chunk, out);
  }

  void AppendToken(absl::string_view text, std::string* out) const {
    out->append(prefix_);
    AppendJsonEscaped(text, out);
    out->append(suffix_);
  }

  // The chunk with the finish reason, the usage chunk when asked for, and [DONE].
  void AppendEnd(const Completion& c, int64_t streamed, bool include_usage,
                 std::string* out) const {
    json chunk = shape_.Header(true);
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", FinishName(c.reason)}};
    if (shape_.api == Api::kChat) {
      choice["delta"] = json::object();
    } else {
      choice["text"] = "";
    }
    chunk["choices"] = json::array({std::move(choice)});
    if (shape_.usage_null) chunk["usage"] = nullptr;
    chunk["neupims"] = SimulatedTimes(c);
    AppendEvent(chunk, out);
    if (include_usage) {
      json usage = shape_.Header(true);
      usage["choices"] = json::array();
      usage["usage"] = Usage(c.prompt_tokens, streamed);
      AppendEvent(usage, out);
    }
    out->append("data: [DONE]\n\n");
  }

 private:
  static void AppendEvent(const json& j, std::string* out) {
    absl::StrAppend(out, "data: ", j.dump(), "\n\n");
  }

  const ResponseShape& shape_;
  std::string prefix_, suffix_;
};

json FullResponse(const ResponseShape& shape, const std::string& text, const Completion& c,
                  int64_t completion_tokens) {
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", FinishName(c.reason)}};
  if (shape.api == Api::kChat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  json j = shape.Header(false);
  j["choices"] = json::array({std::move(choice)});
  j["usage"] = Usage(c.prompt_tokens, completion_tokens);
  j["neupims"] = SimulatedTimes(c);
  return j;
}

// ---- One request's output ----------------------------------------------------------------------

// Filled by the engine thread (token ids only: formatting happens on the connection's thread, so
// the engine thread, which every request shares, does as little as possible per token).
//
// Waking a connection's thread costs the engine thread a futex call and both a context switch,
// per write. In fast pacing (simulated time only; wall-clock latency means nothing there) a
// stream therefore wakes for its first token and then only once `wake_batch` tokens are waiting,
// the request is complete or 2 ms have passed: fewer, larger writes of the same per-token SSE
// events, as gRPC coalesces the tokens that arrive while a write is in flight. absl::Mutex
// evaluates the condition in the engine thread at unlock and wakes no one while it is false.
// In realtime pacing `wake_batch` is 1: every token is written when it is due.
//
// Slow clients: a stream's thread blocks in its socket write while the client does not read, and
// the engine thread keeps appending. Tokens pending (waiting here plus those of the write in
// progress) beyond `max_buffer` (--max-stream-buffer, as for gRPC streams; 0: unbounded) end the
// stream: the state drops its tokens, takes no more, and `on_overflow` runs (on the engine
// thread: it counts the overflow and aborts the request, which frees its KV blocks); the
// stream's thread then writes an error event if its write ever returns.
class HttpRequestState : public RequestSink {
 public:
  HttpRequestState(size_t wake_batch, int64_t max_buffer,
                   std::function<void(const absl::Status&)> on_overflow)
      : wake_batch_(wake_batch), max_buffer_(max_buffer), on_overflow_(std::move(on_overflow)) {}

  void OnTokens(const std::vector<GeneratedToken>& tokens) override {
    absl::Status overflow;
    {
      absl::MutexLock l(&mu_);
      if (!overflow_.ok()) return;
      for (const GeneratedToken& t : tokens) ids_.push_back(t.id);
      const int64_t pending = static_cast<int64_t>(ids_.size()) + writing_;
      if (max_buffer_ <= 0 || pending <= max_buffer_) return;
      overflow_ = absl::ResourceExhaustedError(absl::StrCat(
          "the client is not reading: ", pending, " tokens pending, over the stream buffer of ",
          max_buffer_, " (--max-stream-buffer)"));
      overflow = overflow_;
      ids_.clear();
    }
    on_overflow_(overflow);
  }
  void OnComplete(const Completion& c) override {
    absl::MutexLock l(&mu_);
    if (overflow_.ok()) completion_ = c;  // else: the abort the overflow asked for
  }

  // Waits for output, then moves it into `ids` (appended) and `completion` (once complete); the
  // ids count as pending until WriteDone. Returns the overflow's error once the stream overflowed.
  absl::Status Take(std::vector<int64_t>* ids, std::optional<Completion>* completion) {
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !ids_.empty() || completion_.has_value() || !overflow_.ok();
    };
    auto batch_ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return ids_.size() >= wake_batch_ || completion_.has_value() || !overflow_.ok();
    };
    absl::MutexLock l(&mu_);
    if (wake_batch_ > 1 && started_) {
      mu_.AwaitWithTimeout(absl::Condition(&batch_ready), kFastWakeInterval);
    }
    mu_.Await(absl::Condition(&ready));
    if (!overflow_.ok()) return overflow_;
    started_ = true;
    writing_ = static_cast<int64_t>(ids_.size());
    ids->insert(ids->end(), ids_.begin(), ids_.end());
    ids_.clear();
    if (completion_.has_value()) *completion = std::move(completion_);
    return absl::OkStatus();
  }
  // Waits up to `timeout` for the completion; true once it has come (Take then returns it).
  bool AwaitCompletion(absl::Duration timeout) {
    auto complete = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return completion_.has_value() || !overflow_.ok();
    };
    absl::MutexLock l(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&complete), timeout);
  }
  // The write of what Take returned has finished (the client took it, or it failed).
  void WriteDone() {
    absl::MutexLock l(&mu_);
    writing_ = 0;
  }

 private:
  const size_t wake_batch_;
  const int64_t max_buffer_;
  const std::function<void(const absl::Status&)> on_overflow_;
  absl::Mutex mu_;
  std::vector<int64_t> ids_ ABSL_GUARDED_BY(mu_);
  int64_t writing_ ABSL_GUARDED_BY(mu_) = 0;  // tokens of the write in progress
  std::optional<Completion> completion_ ABSL_GUARDED_BY(mu_);
  absl::Status overflow_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;  // the first output was taken
};

// How often a connection's waits check whether the server has stopped (and, idle, whether a
// queued connection needs its thread).
constexpr std::chrono::milliseconds kStopCheckInterval{10};

// What an HTTP connection (plain or TLS) may spend on delivering one request (HttpOptions::
// request_read_timeout) and on its head. cpp-httplib's read timeout applies to each read alone and
// its head has no size limit (each line is limited to 8 KiB, their number is not), so a client
// that trickles a byte a second (slowloris) held a thread for good and one that sent headers
// without end grew the server by about 60 MB a second. The budget is kept per thread: a
// connection is served by one thread from its accept to its close.
struct RequestBudget {
  static constexpr size_t kMaxHeadBytes = size_t{1} << 20;  // request line and headers
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  bool reading = false;  // a request (head or body) is being read: the deadline applies
  bool in_head = false;  // its head has not been routed yet: head bytes are counted
  size_t head_bytes = 0;
  // Why the connection failed its budget (it is then closed after the error response);
  // kStopped: the server stopped while the request was being delivered.
  enum class Exceeded { kNo, kDeadline, kHeadBytes, kStopped } exceeded = Exceeded::kNo;
  // The 408 or 431 was made (and counted) once: a write of it that failed is not answered again.
  bool refused = false;
};

// The connection this thread serves (BudgetedServer serves a connection on one thread from its
// accept to its close): its socket and its current request's budget.
struct Connection {
  int socket = -1;
  RequestBudget budget;
  // The response being written ends the connection (what follows on it is not a request).
  bool close_after_response = false;
};
thread_local Connection* tl_connection = nullptr;

// Tells whether the client of a request whose handler is running has hung up, for a whole
// response, which writes nothing before its end (a stream learns it from a failed write).
// httplib 0.11 hands a handler no socket: it is the one of the connection this thread serves. A
// peer that shut down its side (FIN: POLLRDHUP) or reset the connection has gone, as uvicorn, and
// so vLLM, read it; a client that sends a further request on the connection meanwhile has not.
class ClientWatch {
 public:
  explicit ClientWatch(const httplib::Request& /*req*/)
      : fd_(tl_connection != nullptr ? tl_connection->socket : -1) {}

  bool HungUp() const {
    if (fd_ < 0) return false;  // not known: cannot tell
    pollfd p{fd_, POLLRDHUP, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
  }

 private:
  const int fd_;
};

// Tells the client that the connection ends after `res`, and ends it.
void CloseAfter(httplib::Response& res) {
  res.set_header("Connection", "close");
  if (tl_connection != nullptr) tl_connection->close_after_response = true;
}

// When the connection's request broke its budget, answers with the status that says so (408,
// 431, or 503 when the server stopped; counted in `metrics`; the connection is closed after it)
// and returns true.
bool BudgetExceeded(httplib::Response& res, std::chrono::milliseconds request_read_timeout,
                    ServerMetrics* metrics) {
  if (tl_connection == nullptr) return false;
  const RequestBudget::Exceeded exceeded = tl_connection->budget.exceeded;
  if (exceeded == RequestBudget::Exceeded::kNo) return false;
  tl_connection->budget.refused = true;
  if (exceeded == RequestBudget::Exceeded::kDeadline) {
    Refuse(metrics,
           {absl::DeadlineExceededError(absl::StrCat("the request was not delivered within ",
                                                     request_read_timeout.count(),
                                                     " ms (the HTTP request read timeout)")),
            ""},
           res, 408);
  } else if (exceeded == RequestBudget::Exceeded::kStopped) {
    Refuse(metrics,
           {absl::UnavailableError("the server is stopping: the rest of the request was not read"),
            ""},
           res, 503);
  } else {
    Refuse(metrics,
           {absl::InvalidArgumentError(absl::StrCat("the request line and headers are over ",
                                                    RequestBudget::kMaxHeadBytes, " bytes")),
            ""},
           res, 431);
  }
  CloseAfter(res);
  return true;
}

// The connection is ready for its next request: its head and body must come within `timeout`.
void AwaitRequest(std::chrono::milliseconds timeout) {
  if (tl_connection == nullptr) return;
  tl_connection->budget = RequestBudget{
      .deadline = std::chrono::steady_clock::now() + timeout, .reading = true, .in_head = true};
  tl_connection->close_after_response = false;
}
// The head was read (the request is being routed): head bytes are no longer counted.
void HeadRead() {
  if (tl_connection != nullptr) tl_connection->budget.in_head = false;
}
// Whether the request being answered was refused before routing (its head was never complete).
bool RefusedBeforeRouting() { return tl_connection != nullptr && tl_connection->budget.in_head; }
// The whole request was read: the handler may take as long as it needs.
void RequestRead() {
  if (tl_connection != nullptr) tl_connection->budget.reading = false;
}

// A connection's stream, plain or TLS, that enforces the RequestBudget (otherwise as httplib's
// own: a read waits at most the read timeout, a write the write timeout; a 4 KiB read buffer,
// since httplib reads a head a byte at a time). A TLS connection's socket is non-blocking, so
// that no SSL_read waits past the deadline for the rest of a record trickled a byte at a time;
// its head bytes are counted decrypted.
class BudgetedSocketStream : public httplib::Stream {
 public:
  // `ssl`: the connection's TLS session (its handshake done), null for plain HTTP; `listener`:
  // the server's listening socket, invalid once the server stops.
  BudgetedSocketStream(int sock, SSL* ssl, RequestBudget* budget,
                       const std::atomic<socket_t>* listener,
                       std::chrono::milliseconds read_timeout,
                       std::chrono::milliseconds write_timeout)
      : sock_(sock),
        ssl_(ssl),
        budget_(budget),
        listener_(listener),
        read_timeout_(read_timeout),
        write_timeout_(write_timeout) {}

  // A read's size, and the most GatherRequest holds for a request (head and body) before it
  // hands the request over: a parked connection keeps its bytes in memory.
  static constexpr size_t kReadBytes = 4096;
  static constexpr size_t kMaxGatheredBytes = size_t{64} << 10;

  bool is_readable() const override { return Readable(read_timeout_); }
  // Whether a byte can be read without waiting longer than `timeout`.
  bool Readable(std::chrono::milliseconds timeout) const {
    return begin_ < buf_.size() || (ssl_ != nullptr && SSL_pending(ssl_) > 0) ||
           Poll(POLLIN, timeout);
  }
  bool is_writable() const override { return Poll(POLLOUT, write_timeout_); }
  ssize_t read(char* ptr, size_t size) override {
    if (budget_->exceeded == RequestBudget::Exceeded::kHeadBytes) return -1;
    if (begin_ == buf_.size()) {
      buf_.clear();
      begin_ = 0;
      const ssize_t n = Fill();
      if (n <= 0 || !CountHeadBytes(static_cast<size_t>(n))) return n <= 0 ? n : -1;
    }
    const size_t n = std::min(size, buf_.size() - begin_);
    std::memcpy(ptr, buf_.data() + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }
  // What GatherRequest found: the request can be handed to httplib (kReady), or the client's
  // next bytes are awaited (kWaitRead; a TLS session may also wait to write, kWaitWrite).
  enum class Gathered { kReady, kWaitRead, kWaitWrite };
  // Reads, without waiting, what the client has sent of the request that starts at the next
  // unread byte, until `scan` says httplib can be given it (RequestScan), the client must send
  // more, or the stream ended or failed (kReady: httplib's own read then meets the end, and the
  // head-size limit is applied as by read()). Buffered bytes are kept for read().
  Gathered GatherRequest(RequestScan& scan) {
    if (begin_ > 0) {
      buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(begin_));
      begin_ = 0;
    }
    while (!scan.Ready(absl::string_view(buf_.data(), buf_.size()))) {
      const size_t old = buf_.size();
      // Grown by a read at a time (a vector's reserve takes what it is asked), not doubled: a
      // parked connection holds this buffer, at most its request and one read.
      if (buf_.capacity() < old + kReadBytes) buf_.reserve(old + kReadBytes);
      buf_.resize(old + kReadBytes);
      short wait = 0;
      const ssize_t n = ReadNow(buf_.data() + old, &wait);
      buf_.resize(old + static_cast<size_t>(std::max<ssize_t>(n, 0)));
      if (n > 0) {
        if (!CountHeadBytes(static_cast<size_t>(n))) return Gathered::kReady;
        continue;
      }
      if (wait == POLLIN) return Gathered::kWaitRead;
      if (wait == POLLOUT) return Gathered::kWaitWrite;
      return Gathered::kReady;
    }
    return Gathered::kReady;
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (ssl_ == nullptr) {
      if (!is_writable()) return -1;
      const ssize_t n = TEMP_FAILURE_RETRY(::send(sock_, ptr, size, MSG_NOSIGNAL));
      if (n > 0) wrote_ = true;
      return n;
    }
    if (size == 0) return 0;
    const int len = static_cast<int>(std::min<size_t>(size, 1 << 30));
    for (;;) {  // a write that would block is retried with the same arguments, as OpenSSL asks
      const int n = SSL_write(ssl_, ptr, len);
      if (n > 0) {
        wrote_ = true;
        return n;
      }
      const int err = SSL_get_error(ssl_, n);
      if (err != SSL_ERROR_WANT_WRITE && err != SSL_ERROR_WANT_READ) return -1;
      if (!Poll(err == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN, write_timeout_)) return -1;
    }
  }
  // Whether anything was written since the last call (a request's response, or part of it).
  bool TakeWrote() { return std::exchange(wrote_, false); }
  // The memory the buffer holds (what a parked connection keeps).
  size_t buffer_bytes() const { return buf_.capacity(); }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(&getpeername, &ip, &port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(&getsockname, &ip, &port);
  }
  int socket() const override { return sock_; }

 private:
  // Counts `n` bytes just read towards the head's limit while the head is read; false (and the
  // budget marked) past it.
  bool CountHeadBytes(size_t n) {
    if (!budget_->reading || !budget_->in_head) return true;
    budget_->head_bytes += n;
    if (budget_->head_bytes <= RequestBudget::kMaxHeadBytes) return true;
    budget_->exceeded = RequestBudget::Exceeded::kHeadBytes;
    return false;
  }
  // Reads what comes next into buf_ (empty), waiting at most the read timeout for each byte of
  // the socket and never past the request's deadline: the bytes read, 0 at the end of the
  // stream, -1 on an error or a timeout (budget_->exceeded says if it was the deadline).
  ssize_t Fill() {
    buf_.resize(kReadBytes);
    const ssize_t n = FillInto(buf_.data());
    buf_.resize(static_cast<size_t>(std::max<ssize_t>(n, 0)));
    return n;
  }
  ssize_t FillInto(char* out) {
    short events = POLLIN;
    for (;;) {
      if (ssl_ == nullptr || SSL_pending(ssl_) == 0 || events != POLLIN) {
        std::chrono::milliseconds wait = read_timeout_;
        if (budget_->reading) {
          // Rounded up: a poll cut short of the deadline would fail the read without saying why.
          const auto left = std::chrono::ceil<std::chrono::milliseconds>(
              budget_->deadline - std::chrono::steady_clock::now());
          if (left.count() <= 0) {
            budget_->exceeded = RequestBudget::Exceeded::kDeadline;
            return -1;
          }
          wait = std::min(wait, left);
        }
        if (!(budget_->reading ? PollWhileRunning(events, wait) : Poll(events, wait))) {
          // Nothing came: the read timeout, or the request's deadline if that came first, or the
          // server stopped.
          if (budget_->reading && *listener_ == INVALID_SOCKET) {
            budget_->exceeded = RequestBudget::Exceeded::kStopped;
          } else if (budget_->reading && std::chrono::steady_clock::now() >= budget_->deadline) {
            budget_->exceeded = RequestBudget::Exceeded::kDeadline;
          }
          return -1;
        }
      }
      // A poll that said readable may still find nothing (or, over TLS, part of a record):
      // then wait again, for what ReadNow says.
      const ssize_t n = ReadNow(out, &events);
      if (n >= 0 || events == 0) return n;
    }
  }
  // Reads up to kReadBytes that have come, without waiting: the bytes read, 0 at the end of the
  // stream (over TLS, the client's close_notify), -1 otherwise, with `*wait` the poll event it
  // would have to wait for (POLLIN, or POLLOUT for a TLS session that must write), 0 on an error.
  ssize_t ReadNow(char* out, short* wait) {
    *wait = 0;
    if (ssl_ == nullptr) {
      const ssize_t n = TEMP_FAILURE_RETRY(::recv(sock_, out, kReadBytes, MSG_DONTWAIT));
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) *wait = POLLIN;
      return n;
    }
    const int n = SSL_read(ssl_, out, static_cast<int>(kReadBytes));
    if (n > 0) return n;
    const int err = SSL_get_error(ssl_, n);
    if (err == SSL_ERROR_ZERO_RETURN) return 0;
    if (err == SSL_ERROR_WANT_READ) *wait = POLLIN;
    if (err == SSL_ERROR_WANT_WRITE) *wait = POLLOUT;
    return -1;
  }
  bool Poll(short events, std::chrono::milliseconds timeout) const {
    pollfd p{sock_, events, 0};
    return TEMP_FAILURE_RETRY(::poll(&p, 1, static_cast<int>(timeout.count()))) > 0;
  }
  // As Poll, in short steps and only while the server runs: a stop does not wait for a request
  // trickled within every timeout, nor for the rest of one still coming (its client is told 503).
  bool PollWhileRunning(short events, std::chrono::milliseconds timeout) const {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (*listener_ != INVALID_SOCKET) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (Poll(events, std::clamp(left, std::chrono::milliseconds(0), kStopCheckInterval))) {
        return true;
      }
      if (left <= kStopCheckInterval) return false;
    }
    return false;
  }
  void Address(int (*get)(int, sockaddr*, socklen_t*), std::string* ip, int* port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (get(sock_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
    char host[NI_MAXHOST];
    char serv[NI_MAXSERV];
    if (getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
      *ip = host;
      *port = std::atoi(serv);
    }
  }

  const int sock_;
  SSL* const ssl_;
  RequestBudget* budget_;
  const std::atomic<socket_t>* const listener_;
  const std::chrono::milliseconds read_timeout_;
  const std::chrono::milliseconds write_timeout_;
  // Bytes read and not yet taken by read(), from begin_; GatherRequest appends to them.
  std::vector<char> buf_;
  size_t begin_ = 0;
  bool wrote_ = false;
};

// The connections' threads. httplib's own ThreadPool starts its threads in its constructor on the
// listener thread: when the system refuses one, std::thread throws there and, with the threads
// already started still joinable, the process ends in std::terminate. This pool is started in
// OpenAiHttpServer::Start (before anything is bound) and hands a refusal back as a Status, after
// joining the threads it did start. Same queue discipline as httplib's (FIFO, drain on shutdown).
//
// It also keeps the connections parked by BudgetedServer: a connection waiting for its client
// before its first request (for its first bytes, the rest of a TLS handshake, or the first
// request after it), while another connection waits for a thread, gives its thread up and is
// watched by one thread (one epoll set for all of them) until the client's bytes arrive, then
// queued again as a job; at its deadline it is closed. So before its first request a connection
// holds a thread only while its client is sending, as in an event-driven server (nginx, uvicorn):
// silent or stalled connections do not keep every other client waiting for their timeout.
class HttpThreadPool : public httplib::TaskQueue {
 public:
  // `n` threads; the parked connections hold at most `max_parked_bytes` (Park).
  static absl::StatusOr<std::unique_ptr<HttpThreadPool>> Start(size_t n, size_t max_parked_bytes) {
    std::unique_ptr<HttpThreadPool> pool(new HttpThreadPool(max_parked_bytes));
    if (::pipe2(pool->wake_, O_NONBLOCK | O_CLOEXEC) != 0) {
      const int error = errno;
      pool->wake_[0] = pool->wake_[1] = -1;
      return absl::UnavailableError(absl::StrCat(
          "cannot make the HTTP connection watcher's wake-up pipe: ", std::strerror(error)));
    }
    pool->epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    epoll_event wake{.events = EPOLLIN, .data = {.fd = pool->wake_[0]}};
    if (pool->epoll_ < 0 || ::epoll_ctl(pool->epoll_, EPOLL_CTL_ADD, pool->wake_[0], &wake) != 0) {
      return absl::UnavailableError(absl::StrCat(
          "cannot make the HTTP connection watcher's epoll set: ", std::strerror(errno)));
    }
    for (size_t i = 0; i < n; ++i) {
      absl::StatusOr<std::thread> t = StartThread(absl::StrCat("HTTP thread ", i + 1, " of ", n),
                                                  [p = pool.get()] { p->Work(); });
      if (!t.ok()) {
        return absl::Status(t.status().code(),
                            absl::StrCat("--http-threads (config \"http_threads\") ", n, ": ",
                                         t.status().message()));
      }
      pool->threads_.push_back(*std::move(t));
    }
    ASSIGN_OR_RETURN(pool->watcher_, StartThread("the HTTP API's connection watcher",
                                                 [p = pool.get()] { p->Watch(); }));
    return pool;
  }
  ~HttpThreadPool() override {
    shutdown();
    for (const int fd : {wake_[0], wake_[1], epoll_}) {
      if (fd >= 0) ::close(fd);
    }
  }

  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }
  // Called by a thread whose connection is idle between requests: true when a connection waits
  // for a thread and neither a free thread (waiting for a job, or woken for one and not yet
  // running it) nor another idle thread that already left its connection will take it; the
  // caller then closes its own and takes it. Idle keep-alive connections on every thread would
  // otherwise keep new clients waiting up to the keep-alive timeout (nginx and Apache's event
  // MPM also close idle keep-alive connections first when connections are short).
  bool YieldToQueued() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!Pressed()) return false;
    ++yielding_;
    tl_yielding_ = true;
    return true;
  }
  // How long a resumed connection's job waited in the queue for a thread: time the server, not
  // the client, took, so the caller adds it to the client's deadline.
  using Resume = std::function<void(std::chrono::steady_clock::duration queued_for)>;
  // Called by a thread whose connection waits for its client (`sock`, the client's next bytes
  // due by `deadline`): before its first request, or in the middle of a request (`mid_request`).
  // When a connection waits for a thread that no free or yielding thread will take, the watcher
  // takes `sock` over and the caller's thread is free. `make_resume()`, called only then, gives
  // the job queued once the socket is readable (data, end of stream or error). At the deadline,
  // or when the pool shuts down first, the watcher closes a connection that has no request yet
  // (and destroys the job); one in the middle of a request has its job queued then too, which
  // answers the client (408 at the deadline, 503 at a stop) as a thread that had waited would.
  // False (nothing taken) when no connection waits or the pool is shutting down.
  // `held_bytes`: the memory the connection keeps while parked (its request's bytes so far); the
  // parked connections keep at most max_parked_bytes_ together (past it, a connection waits on
  // its thread, as before parking).
  template <typename MakeResume>
  bool Park(int sock, std::chrono::steady_clock::time_point deadline, bool mid_request,
            size_t held_bytes, const MakeResume& make_resume) {
    bool soonest = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (shutdown_ || !Pressed() || parked_bytes_ + held_bytes > max_parked_bytes_) return false;
      // Watched once: the watcher takes the registration out when it resumes or closes it.
      epoll_event watch{.events = EPOLLIN | EPOLLRDHUP, .data = {.fd = sock}};
      if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, sock, &watch) != 0) return false;  // waits itself
      parked_.emplace(sock, Parked{deadline, mid_request, held_bytes, Resume(make_resume())});
      parked_bytes_ += held_bytes;
      deadlines_.emplace(deadline, sock);
      soonest = deadlines_.begin()->second == sock;
      // Counted as YieldToQueued counts: this thread is on its way to the queued connection, so
      // no other thread gives its connection up for the same one.
      ++yielding_;
      tl_yielding_ = true;
    }
    if (soonest) Wake();  // the watcher's wait ends earlier now
    return true;
  }
  // Closes the parked connections (queues the jobs of those in the middle of a request), runs
  // the queued jobs, then joins every thread. Idempotent (httplib calls it, then deletes).
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      shutdown_ = true;
    }
    Wake();
    if (watcher_.joinable()) watcher_.join();
    {
      // From here no job is queued: a thread that finds the queue empty may leave.
      std::lock_guard<std::mutex> lock(mu_);
      watched_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  struct Parked {
    std::chrono::steady_clock::time_point deadline;
    bool mid_request;   // its job is queued at the deadline and at a stop, not dropped
    size_t held_bytes;  // counted in parked_bytes_
    Resume resume;
  };

  explicit HttpThreadPool(size_t max_parked_bytes) : max_parked_bytes_(max_parked_bytes) {}
  // A connection waits for a thread that neither a free thread (waiting for a job, or woken
  // for one and not yet running it) nor one that left its idle connection will take.
  bool Pressed() const { return jobs_.size() > yielding_ + waiting_; }
  void Wake() {
    if (wake_[1] < 0) return;
    const char byte = 0;
    (void)!::write(wake_[1], &byte, 1);  // a full pipe already wakes the watcher
  }
  static void CloseConnection(int sock) {
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
  }
  // The watcher: waits on the epoll set (the wake-up pipe and every parked socket) until the
  // soonest deadline; sockets that became readable are queued as jobs, those past their
  // deadline closed. Each wake-up costs the events it returns and the deadlines that passed,
  // not a pass over every parked connection (a `poll` over 8,000 parked connections took about
  // 3.6 ms a wake-up, so parked clients that sent their requests one after another waited past
  // their deadlines). Once shutdown() has begun nothing more is queued (a job queued after the
  // last thread left would keep its socket open): the loop ends and closes every parked socket,
  // readable or not, except those in the middle of a request, whose jobs are queued (the pool's
  // threads stay until the watcher has ended: shutdown()).
  void Watch() {
    constexpr int kEvents = 256;
    std::array<epoll_event, kEvents> events;
    std::vector<int> expired;
    for (;;) {
      int timeout_ms = -1;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (shutdown_) break;
        if (!deadlines_.empty()) {
          const auto left = std::chrono::ceil<std::chrono::milliseconds>(
              deadlines_.begin()->first - std::chrono::steady_clock::now());
          timeout_ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
        }
      }
      const int n = TEMP_FAILURE_RETRY(::epoll_wait(epoll_, events.data(), kEvents, timeout_ms));
      const auto now = std::chrono::steady_clock::now();
      size_t resumed = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (int i = 0; i < n; ++i) {
          const int fd = events[i].data.fd;
          if (fd == wake_[0]) {
            char drain[64];
            while (::read(wake_[0], drain, sizeof drain) > 0) {
            }
            continue;
          }
          if (shutdown_) continue;
          auto it = parked_.find(fd);
          if (it == parked_.end()) continue;
          (void)::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
          deadlines_.erase({it->second.deadline, fd});
          QueueResume(std::move(it->second.resume), now);
          Unpark(it);
          ++resumed;
        }
        // With a full batch of events, sockets that are readable may not have been returned
        // yet: the next wait returns at once with them, and only then are deadlines applied,
        // so that a client that sent its bytes in time is not closed.
        while (n < kEvents && !deadlines_.empty() && deadlines_.begin()->first <= now) {
          const int fd = deadlines_.begin()->second;
          deadlines_.erase(deadlines_.begin());
          // Out of the set before the close (a close takes it out only if no other descriptor
          // refers to the socket).
          (void)::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
          auto it = parked_.find(fd);
          if (it->second.mid_request) {
            QueueResume(std::move(it->second.resume), now);
            ++resumed;
          } else {
            expired.push_back(fd);
          }
          Unpark(it);
        }
      }
      for (size_t i = 0; i < resumed; ++i) cv_.notify_one();
      for (const int sock : expired) CloseConnection(sock);
      expired.clear();
    }
    // Shutting down: the parked connections are closed, as a stop closes a connection still
    // waiting for its first request; one in the middle of a request is resumed, to be told 503.
    absl::flat_hash_map<int, Parked> left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      left.swap(parked_);
      deadlines_.clear();
      parked_bytes_ = 0;
      const auto now = std::chrono::steady_clock::now();
      for (auto& [sock, parked] : left) {
        if (parked.mid_request) QueueResume(std::move(parked.resume), now);
      }
    }
    for (const auto& [sock, parked] : left) {
      if (!parked.mid_request) CloseConnection(sock);
    }
  }
  // Forgets a parked connection (mu_ held).
  void Unpark(absl::flat_hash_map<int, Parked>::iterator it) {
    parked_bytes_ -= it->second.held_bytes;
    parked_.erase(it);
  }
  // Queues a parked connection's job (mu_ held), told how long it waited for a thread.
  void QueueResume(Resume resume, std::chrono::steady_clock::time_point now) {
    jobs_.push_back([resume = std::move(resume), queued_at = now] {
      resume(std::chrono::steady_clock::now() - queued_at);
    });
  }
  void Work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (std::exchange(tl_yielding_, false)) --yielding_;  // this thread takes a job now
        ++waiting_;
        cv_.wait(lock, [this] { return watched_ || !jobs_.empty(); });
        --waiting_;
        if (jobs_.empty()) return;  // shut down, and the watcher queues no more
        fn = std::move(jobs_.front());
        jobs_.pop_front();
      }
      fn();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool shutdown_ = false;
  bool watched_ = false;  // shut down, and the watcher has ended (it queues jobs until then)
  size_t waiting_ = 0;    // threads in Work's wait: each takes a job that enqueue() notifies
  // Threads that left their connection for a queued one (an idle one closed, YieldToQueued; a
  // silent new one parked, Park) and have not taken a job yet.
  size_t yielding_ = 0;
  static thread_local bool tl_yielding_;  // this thread is one of them
  // The connections the watcher holds, by socket, and their deadlines in order.
  absl::flat_hash_map<int, Parked> parked_;
  size_t parked_bytes_ = 0;  // their held_bytes
  const size_t max_parked_bytes_;
  std::set<std::pair<std::chrono::steady_clock::time_point, int>> deadlines_;
  int wake_[2] = {-1, -1};  // the watcher's wake-up pipe (read end, write end)
  int epoll_ = -1;          // the watcher's epoll set: the pipe's read end and the parked sockets
  std::vector<std::thread> threads_;
  std::thread watcher_;
};
thread_local bool HttpThreadPool::tl_yielding_ = false;

struct SslCtxFree {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxFree>;
// A connection's TLS state: shared, as a parked connection's resume (a copyable std::function)
// holds it until the connection's next step runs on some thread.
using SharedSsl = std::shared_ptr<SSL>;

// The HTTP API's server, plain or TLS, its connections read through BudgetedSocketStream, so
// that both have the request budget and the idle-connection handling. Its keep-alive loop is
// httplib's (Server::process_and_close_socket, and SSLServer's, which cannot be called from
// here): wait up to the keep-alive timeout for a request, as long as the server runs, then
// process it. TLS is done here rather than by httplib's SSLServer, whose blocking SSL_read
// would wait for a record trickled a byte at a time past any deadline.
class BudgetedServer : public httplib::Server {
 public:
  // `pool` (which runs the connections) must outlive the server's connections; `tls`: the TLS
  // context of an HTTPS server, null for plain HTTP.
  // `metrics` (may be null) counts the refusals the server answers itself.
  BudgetedServer(std::chrono::milliseconds request_read_timeout, HttpThreadPool* pool,
                 SslCtxPtr tls, ServerMetrics* metrics)
      : request_read_timeout_(request_read_timeout),
        pool_(pool),
        tls_(std::move(tls)),
        metrics_(metrics) {}

  // httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, fixed when Debian built the
  // library): a burst of new connections (hundreds of streams opened at once) would overflow it
  // and the kernel would drop SYNs, which clients retry only after a second. listen() again on
  // the bound socket raises the backlog (the kernel caps it at net.core.somaxconn).
  bool RaiseBacklog(int backlog) { return ::listen(svr_sock_, backlog) == 0; }
  // Closes a bound socket nobody listens on yet (httplib's stop() does nothing before its accept
  // loop runs): a start that fails after the bind must not keep the port.
  void CloseUnlistened() {
    const socket_t sock = svr_sock_.exchange(INVALID_SOCKET);
    if (sock != INVALID_SOCKET) ::close(sock);
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    // The wait for a new connection's first bytes: up to the keep-alive timeout for a request
    // on a plain connection, the request read timeout for a TLS client's handshake.
    const auto first_bytes_timeout =
        tls_ == nullptr ? std::chrono::milliseconds(std::chrono::seconds(keep_alive_timeout_sec_))
                        : request_read_timeout_;
    return ServeConnection(sock, std::chrono::steady_clock::now() + first_bytes_timeout);
  }
  // A connection from the moment a thread takes it (or takes it back from the watcher, with its
  // first bytes' deadline moved by the time its job waited for a thread) to its close. Each
  // wait for the client before its first request (its first bytes, the rest of its TLS
  // handshake, its first request after the handshake) gives the thread up to a connection
  // queued for one: the socket is parked with the pool's watcher (HttpThreadPool::Park), which
  // queues the connection's next step once the client's bytes arrive. So a thread is held by a
  // connection only while its client sends, or while it waits between requests (an idle
  // keep-alive connection, which is given up in turn: NextRequestArrives).
  bool ServeConnection(socket_t sock, std::chrono::steady_clock::time_point first_bytes_deadline) {
    const Wait first =
        AwaitOrPark(sock, first_bytes_deadline, /*mid_request=*/false, /*held_bytes=*/0, [&] {
          return
              [this, sock, first_bytes_deadline](std::chrono::steady_clock::duration queued_for) {
                ServeConnection(sock, first_bytes_deadline + queued_for);
              };
        });
    if (first == Wait::kParked) return true;  // the pool's watcher holds the socket now
    if (first == Wait::kNone) {
      // Nothing came before the deadline or the server stopped: closed, as before a request.
      CloseSocket(sock);
      return true;
    }
    if (tls_ == nullptr) return ServeAndClose(sock, nullptr);
    SharedSsl ssl(SSL_new(tls_.get()), SSL_free);
    if (ssl == nullptr || SSL_set_fd(ssl.get(), sock) != 1 ||
        ::fcntl(sock, F_SETFL, ::fcntl(sock, F_GETFL) | O_NONBLOCK) != 0) {
      return CloseFailedTls(sock);
    }
    return ContinueHandshake(sock, std::move(ssl), first_bytes_deadline);
  }
  // The TLS handshake, on the non-blocking socket, from where it stopped, by `deadline` (the
  // request read timeout of the client's time, from when a thread first took the connection,
  // less any wait for a thread: a client that trickles its handshake is a slowloris too) and
  // while the server runs (stop() does not wait for a client that stops sending). Then the
  // connection's requests.
  bool ContinueHandshake(socket_t sock, SharedSsl ssl,
                         std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      const int r = SSL_accept(ssl.get());
      if (r == 1) return AwaitFirstRequest(sock, std::move(ssl));
      const int err = SSL_get_error(ssl.get(), r);
      Wait wait = Wait::kNone;
      if (err == SSL_ERROR_WANT_READ) {
        wait = AwaitOrPark(sock, deadline, /*mid_request=*/false, /*held_bytes=*/0, [&] {
          return [this, sock, ssl, deadline](std::chrono::steady_clock::duration queued_for) {
            ContinueHandshake(sock, ssl, deadline + queued_for);
          };
        });
      } else if (err == SSL_ERROR_WANT_WRITE) {
        // The client does not read its handshake: not parked (the watcher waits for input).
        wait = AwaitWhileRunning(sock, POLLOUT, deadline) ? Wait::kArrived : Wait::kNone;
      }
      if (wait == Wait::kParked) return true;
      if (wait == Wait::kNone) return CloseFailedTls(sock);
    }
  }
  // After the handshake: the wait for the first request, up to the keep-alive timeout (as
  // httplib's loop waits for any request), parked like the waits before.
  bool AwaitFirstRequest(socket_t sock, SharedSsl ssl) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(keep_alive_timeout_sec_);
    // Bytes OpenSSL has already read from the socket are not seen by a poll.
    const Wait wait =
        SSL_has_pending(ssl.get()) == 1
            ? Wait::kArrived
            : AwaitOrPark(sock, deadline, /*mid_request=*/false, /*held_bytes=*/0, [&] {
                return [this, sock, ssl](std::chrono::steady_clock::duration) {
                  ServeAndClose(sock, ssl);
                };
              });
    if (wait == Wait::kParked) return true;
    if (wait == Wait::kNone) {
      // Closed without close_notify, as the watcher closes a parked one at the same deadline
      // (one behaviour wherever the connection waited) and as an idle connection given up for a
      // queued one is (ServeAndClose).
      CloseSocket(sock);
      return true;
    }
    return ServeAndClose(sock, std::move(ssl));
  }
  enum class Wait { kArrived, kParked, kNone };
  // A connection while its requests are served: on the heap, so that one parked in the middle of
  // a request (its bytes so far in its stream's buffer) goes on from there on whichever thread
  // takes it back.
  struct Live {
    Connection connection;
    SharedSsl ssl;  // null for plain HTTP
    std::unique_ptr<BudgetedSocketStream> strm;
    std::optional<RequestScan> scan;  // the request being gathered, until httplib is given it
    size_t left = 0;                  // requests it may still make (httplib's keep-alive count)
    bool yielded = false;             // it was given up, idle, for a queued connection
  };
  enum class Served { kOk, kFailed, kParked };

  // The connection's requests (over `ssl` for TLS, null for plain HTTP), then its close.
  bool ServeAndClose(socket_t sock, SharedSsl ssl) {
    using std::chrono::microseconds;
    using std::chrono::milliseconds;
    using std::chrono::seconds;
    auto live = std::make_shared<Live>();
    live->connection.socket = sock;
    live->ssl = std::move(ssl);
    live->strm = std::make_unique<BudgetedSocketStream>(
        sock, live->ssl.get(), &live->connection.budget, &svr_sock_,
        std::chrono::duration_cast<milliseconds>(seconds(read_timeout_sec_) +
                                                 microseconds(read_timeout_usec_)),
        std::chrono::duration_cast<milliseconds>(seconds(write_timeout_sec_) +
                                                 microseconds(write_timeout_usec_)));
    live->left = keep_alive_max_count_;
    return ServeLive(std::move(live));
  }
  // Serves `live` from where it stopped (a new connection, or one that was parked in the middle
  // of a request), then closes it, unless it is parked again.
  bool ServeLive(std::shared_ptr<Live> live) {
    tl_connection = &live->connection;
    const Served served = Serve(live);
    tl_connection = nullptr;
    // OpenSSL keeps its errors per thread, and SSL_get_error reads them: what a broken
    // connection left must not make this thread's next connection fail.
    if (live->ssl != nullptr) ERR_clear_error();
    if (served == Served::kParked) return true;  // the pool's watcher holds it now
    // close_notify (not waiting for the client's), except on an idle connection given up for
    // a queued one: a client that finds close_notify unread on its idle connection takes it as
    // still open, sends its next request and fails (httplib's SSLClient does), where a bare end
    // of stream makes it reconnect.
    if (live->ssl != nullptr && served == Served::kOk && !live->yielded) {
      (void)SSL_shutdown(live->ssl.get());
      ERR_clear_error();
    }
    CloseSocket(live->connection.socket);
    return served == Served::kOk;
  }
  // A TLS connection whose set-up or handshake failed or timed out (or the server stopped).
  static bool CloseFailedTls(socket_t sock) {
    ERR_clear_error();  // as in ServeLive
    CloseSocket(sock);
    return false;
  }
  static void CloseSocket(socket_t sock) {
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
  }
  // The connection's requests, as httplib's loop: at most keep_alive_max_count_, the last told
  // Connection: close. Each request is gathered (GatherOrPark) before httplib reads it.
  Served Serve(const std::shared_ptr<Live>& live) {
    BudgetedSocketStream& strm = *live->strm;
    const RequestBudget& budget = live->connection.budget;
    SSL* const ssl = live->ssl.get();
    const auto setup = [ssl](httplib::Request& req) { req.ssl = ssl; };
    bool ok = true;
    while (ok && live->left > 0) {
      if (!live->scan.has_value()) {
        const bool idle = live->left < keep_alive_max_count_;
        if (!NextRequestArrives(strm, idle, &live->yielded)) break;
        AwaitRequest(request_read_timeout_);
        live->scan.emplace(BudgetedSocketStream::kMaxGatheredBytes, payload_max_length_);
      }
      if (GatherOrPark(live) == Wait::kParked) return Served::kParked;
      live->scan.reset();
      bool closed = false;
      ok = process_request(strm, /*close_connection=*/live->left-- == 1, closed, setup);
      // What follows a request that broke its budget is not a request.
      if (budget.exceeded != RequestBudget::Exceeded::kNo) {
        // Not when the error handler answered and its write failed: the client is gone, and the
        // refusal was counted once already.
        if (!strm.TakeWrote() && !budget.refused) AnswerBudgetExceeded(strm);
        break;
      }
      if (closed || live->connection.close_after_response) break;
      (void)strm.TakeWrote();
    }
    return ok ? Served::kOk : Served::kFailed;
  }
  // Reads the request that is arriving on `live` until httplib can be given it (RequestScan),
  // waiting for the client's bytes within the request's deadline. While it waits, a connection
  // queued for a thread takes this one: `live` is parked with the pool's watcher and goes on
  // (ServeLive) when the bytes come, or at the deadline or a stop, to be answered 408 or 503
  // (kParked). So a client that trickles its request (slowloris) holds a thread only while its
  // bytes are read. kArrived: hand the request to httplib (all of it came; or the deadline
  // passed or the server stopped, which httplib's read then meets).
  Wait GatherOrPark(const std::shared_ptr<Live>& live) {
    const int sock = live->connection.socket;
    for (;;) {
      const auto gathered = live->strm->GatherRequest(*live->scan);
      if (gathered == BudgetedSocketStream::Gathered::kReady) return Wait::kArrived;
      const auto deadline = live->connection.budget.deadline;
      Wait wait = Wait::kNone;
      if (gathered == BudgetedSocketStream::Gathered::kWaitWrite) {
        // A TLS session that must write first: its client is not waiting for a request's
        // answer, so it is not parked (the watcher waits for input).
        wait = AwaitWhileRunning(sock, POLLOUT, deadline) ? Wait::kArrived : Wait::kNone;
      } else {
        wait = AwaitOrPark(sock, deadline, /*mid_request=*/true, live->strm->buffer_bytes(), [&] {
          return [this, live](std::chrono::steady_clock::duration queued_for) {
            live->connection.budget.deadline += queued_for;
            ServeLive(live);
          };
        });
      }
      if (wait == Wait::kParked) return Wait::kParked;
      if (wait == Wait::kNone) return Wait::kArrived;
    }
  }
  // Waits for `events` on `sock` until `deadline`, in short steps so that stop() (which
  // invalidates the listening socket) ends the wait; false if it timed out or the server stopped.
  bool AwaitWhileRunning(int sock, short events,
                         std::chrono::steady_clock::time_point deadline) const {
    while (svr_sock_ != INVALID_SOCKET) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{sock, events, 0};
      const int n = TEMP_FAILURE_RETRY(
          ::poll(&p, 1, static_cast<int>(std::min(left, kStopCheckInterval).count())));
      if (n != 0) return n > 0;
    }
    return false;
  }
  // Waits for the client's next bytes on `sock` (data, the end of the stream or an error)
  // until `deadline`, in short steps so that stop() ends the wait. While it waits, a connection
  // queued for a thread takes this one: the socket is parked with the pool's watcher, which
  // queues `make_resume()` (the connection's next step, made only if it is parked) once the
  // bytes arrive (and, `mid_request`, at the deadline or a stop: HttpThreadPool::Park, which
  // also counts the `held_bytes` a parked connection keeps).
  template <typename MakeResume>
  Wait AwaitOrPark(int sock, std::chrono::steady_clock::time_point deadline, bool mid_request,
                   size_t held_bytes, const MakeResume& make_resume) {
    while (svr_sock_ != INVALID_SOCKET) {
      const auto now = std::chrono::steady_clock::now();
      pollfd p{sock, POLLIN, 0};
      if (TEMP_FAILURE_RETRY(::poll(&p, 1, 0)) != 0) return Wait::kArrived;
      if (now >= deadline) return Wait::kNone;
      if (pool_->Park(sock, deadline, mid_request, held_bytes, make_resume)) return Wait::kParked;
      const auto step = std::min(std::chrono::ceil<std::chrono::milliseconds>(deadline - now),
                                 kStopCheckInterval);
      if (TEMP_FAILURE_RETRY(::poll(&p, 1, static_cast<int>(step.count()))) != 0) {
        return Wait::kArrived;
      }
    }
    return Wait::kNone;
  }
  // httplib gives up on a request line that never ends (over its deadline or 1 MiB) without a
  // response: the client is told why here, as the error handler tells it for a head or body.
  void AnswerBudgetExceeded(BudgetedSocketStream& strm) const {
    httplib::Response res;
    if (!BudgetExceeded(res, request_read_timeout_, metrics_)) return;
    const std::string response = absl::StrCat(
        "HTTP/1.1 ", res.status,
        res.status == 408   ? " Request Timeout"
        : res.status == 503 ? " Service Unavailable"
                            : " Request Header Fields Too Large",
        "\r\nContent-Type: ", res.get_header_value("Content-Type"),
        "\r\nContent-Length: ", res.body.size(), "\r\nConnection: close\r\n\r\n", res.body);
    (void)strm.write(response.data(), response.size());  // the connection is closed either way
  }
  // Polls in short steps so that stop() (which invalidates the listening socket) ends the wait,
  // and so does a connection waiting for a thread when this one is `idle` (it has served a
  // request: a new connection's first request is not given up for another's; `yielded` says so).
  bool NextRequestArrives(const BudgetedSocketStream& strm, bool idle, bool* yielded) const {
    const auto end =
        std::chrono::steady_clock::now() + std::chrono::seconds(keep_alive_timeout_sec_);
    while (svr_sock_ != INVALID_SOCKET) {
      if (strm.Readable(kStopCheckInterval)) return true;
      if (std::chrono::steady_clock::now() >= end) return false;
      if (idle && pool_->YieldToQueued()) {
        *yielded = true;
        return false;
      }
    }
    return false;
  }

  const std::chrono::milliseconds request_read_timeout_;
  HttpThreadPool* const pool_;
  const SslCtxPtr tls_;
  ServerMetrics* const metrics_;
};

// The methods httplib routes (others it refuses with 400 after routing: TRACE, CONNECT).
bool IsServedMethod(absl::string_view method) {
  for (absl::string_view m : {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}) {
    if (method == m) return true;
  }
  return false;
}

// The values of a request's Authorization headers (httplib compares header names
// case-insensitively).
std::vector<std::string> AuthorizationValues(const httplib::Request& req) {
  std::vector<std::string> values;
  const size_t n = req.get_header_value_count("Authorization");
  for (size_t i = 0; i < n; ++i) values.push_back(req.get_header_value("Authorization", i));
  return values;
}

}  // namespace

struct OpenAiHttpServer::Impl {
  HttpOptions options;
  EngineRunner* runner = nullptr;
  ServerMetrics* metrics = nullptr;
  std::shared_ptr<prometheus::Registry> registry;
  std::shared_ptr<const ServedEngine> served;
  int64_t started_unix_s = 0;
  std::atomic<uint64_t> next_id{0};
  std::unique_ptr<BudgetedServer> http;
  std::thread listener;
  bool stopped = false;
  std::unique_ptr<const Cors> cors;

  // `pool` runs the connections (and yields idle ones to queued ones).
  absl::Status Create(HttpThreadPool* pool);
  void Routes();
  // A CORS preflight from an allowed origin: answers it (204) and returns true.
  bool Preflight(const httplib::Request& req, httplib::Response& res) const;
  // The bearer-token check before routing; true when the request may go on.
  bool Authorized(const httplib::Request& req, httplib::Response& res) const;
  // Reads a generation request's body into `body`, up to `options.max_body_bytes`; false when
  // it has answered instead: 415 for a form-data body, 413 naming the limit, 400 for a body that
  // cannot be read.
  bool ReadBody(const httplib::Request& req, const httplib::ContentReader& content,
                std::string* body, httplib::Response& res) const;
  void Generate(Api api, const httplib::Request& req, const std::string& raw_body,
                httplib::Response& res);
  void Stream(const ParsedRequest& p, ResponseShape shape, std::shared_ptr<HttpRequestState> state,
              const std::string& request_id, httplib::Response& res);
  // Registers a refusal (405 and the Allow header) for every other method on `pattern`.
  void AllowOnly(const std::string& pattern, const std::string& allowed);
  json ModelJson() const;
  void Models(httplib::Response& res) const;
  void Model(const std::string& id, httplib::Response& res) const;
};

// A plain or a TLS server, as the options ask.
absl::Status OpenAiHttpServer::Impl::Create(HttpThreadPool* pool) {
  const Security* security = options.security.get();
  SslCtxPtr tls;
  if (security != nullptr && security->tls()) {
    tls.reset(SSL_CTX_new(TLS_server_method()));
    if (tls == nullptr || !security->ConfigureServerContext(tls.get())) {
      return absl::InternalError("cannot set up the HTTP API's TLS context (OpenSSL)");
    }
  }
  http =
      std::make_unique<BudgetedServer>(options.request_read_timeout, pool, std::move(tls), metrics);
  return absl::OkStatus();
}

bool OpenAiHttpServer::Impl::Authorized(const httplib::Request& req, httplib::Response& res) const {
  if (options.security == nullptr || req.path == "/health") return true;
  const std::vector<std::string> values = AuthorizationValues(req);
  const absl::Status s = options.security->CheckAuthorization({values.begin(), values.end()});
  if (s.ok()) return true;
  Refuse(metrics, {s, ""}, res);
  // RFC 6750: a missing token gets the bare challenge, a wrong one says invalid_token.
  res.set_header("WWW-Authenticate", values.empty()
                                         ? "Bearer realm=\"neupims\""
                                         : "Bearer realm=\"neupims\", error=\"invalid_token\"");
  // The check runs before httplib reads the body, which is left unread: the connection cannot
  // carry another request.
  res.set_header("Connection", "close");
  return false;
}

bool OpenAiHttpServer::Impl::Preflight(const httplib::Request& req, httplib::Response& res) const {
  if (req.method != "OPTIONS" || !req.has_header("Access-Control-Request-Method")) return false;
  if (cors->ResponseHeaders(req.get_header_value("Origin")).empty()) return false;
  res.status = 204;
  for (const auto& [name, value] :
       cors->PreflightHeaders(req.get_header_value("Access-Control-Request-Headers"))) {
    res.set_header(name, value);
  }
  return true;  // the post-routing handler adds Access-Control-Allow-Origin
}

void OpenAiHttpServer::Impl::Routes() {
  http->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    HeadRead();
    // A body is read by ReadBody (generation routes) or by httplib before the handler; until then
    // the request's deadline still runs.
    if (!req.has_header("Transfer-Encoding") &&
        req.get_header_value<uint64_t>("Content-Length") == 0) {
      RequestRead();
    }
    return Preflight(req, res) || !Authorized(req, res)
               ? httplib::Server::HandlerResponse::Handled
               : httplib::Server::HandlerResponse::Unhandled;
  });
  // httplib calls this for every response it writes (refusals before routing, 401s, errors and
  // streams included), just before the headers go out.
  if (cors->enabled()) {
    http->set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      for (const auto& [name, value] : cors->ResponseHeaders(req.get_header_value("Origin"))) {
        res.set_header(name, value);
      }
    });
  }
  // With a content reader: httplib's own body reading refuses an
  // application/x-www-form-urlencoded body over 8 KiB with a bare 413 (its form limit, fixed when
  // Debian built the library), and reads a chunked body whatever its size. ReadBody applies the
  // server's one limit to every body instead.
  for (const auto& [path, api] : {std::pair{"/v1/completions", Api::kCompletions},
                                  std::pair{"/v1/chat/completions", Api::kChat}}) {
    http->Post(path, [this, api = api](const httplib::Request& req, httplib::Response& res,
                                       const httplib::ContentReader& content) {
      std::string body;
      if (ReadBody(req, content, &body, res)) Generate(api, req, body, res);
    });
  }
  http->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) { Models(res); });
  http->Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    Model(req.matches[1], res);
  });
  http->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const ServerSnapshot snap = runner->Snapshot();
    if (snap.faulted) {
      SendError({absl::UnavailableError("the engine has faulted"), ""}, res);
    } else if (snap.draining) {
      SendError({absl::UnavailableError("the server is draining"), ""}, res);
    } else {
      res.status = 200;
    }
  });
  http->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    if (registry == nullptr) {
      SendError({absl::NotFoundError("no metrics registry"), ""}, res);
      return;
    }
    res.set_content(prometheus::TextSerializer().Serialize(registry->Collect()),
                    "text/plain; version=0.0.4");
  });
  AllowOnly("/v1/completions", "POST");
  AllowOnly("/v1/chat/completions", "POST");
  for (const char* path : {"/v1/models", R"(/v1/models/(.+))", "/health", "/metrics"}) {
    AllowOnly(path, "GET, HEAD");
  }
  // Unknown paths and httplib's own refusals, as OpenAI error objects, counted.
  http->set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (BudgetExceeded(res, options.request_read_timeout, metrics)) return;
    const int status = res.status;
    std::string what = absl::StrCat(req.method, " ", req.path, ": HTTP ", status);
    if (status == 400 && RefusedBeforeRouting()) {
      // httplib could not read the head: the request line or a header line is malformed or over
      // its 8 KiB line limit. What follows on the connection is not the start of a request.
      absl::StrAppend(&what, ": the request line or a header line is malformed or over 8192 bytes");
      CloseAfter(res);
    } else if (status == 400 && !IsServedMethod(req.method)) {
      absl::StrAppend(&what, ": method ", req.method,
                      " is not supported (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS are)");
    } else if (status == 413 &&
               absl::StartsWith(req.get_header_value("Content-Type"),
                                "application/x-www-form-urlencoded") &&
               req.get_header_value<uint64_t>("Content-Length") <=
                   static_cast<uint64_t>(options.max_body_bytes)) {
      // Only the generation routes read bodies themselves (ReadBody); elsewhere httplib's form
      // limit applies.
      absl::StrAppend(&what,
                      ": an application/x-www-form-urlencoded body (Content-Type) is limited "
                      "to 8192 bytes here");
    } else if (status == 413) {
      absl::StrAppend(&what, ": the request body is over the limit of ", options.max_body_bytes,
                      " bytes (--max-message-bytes)");
    }
    // httplib's own status (413, 414...) whatever the error type says; `code` repeats it.
    Refuse(metrics,
           {status == 404 ? absl::NotFoundError(what) : absl::InvalidArgumentError(what), ""}, res,
           status);
  });
  http->set_exception_handler(
      [this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        Refuse(metrics, {absl::InternalError(what), ""}, res);
      });
}

void OpenAiHttpServer::Impl::AllowOnly(const std::string& pattern, const std::string& allowed) {
  auto refuse = [allowed, metrics = metrics](const httplib::Request& req, httplib::Response& res) {
    Refuse(metrics,
           {absl::InvalidArgumentError(absl::StrCat(
                req.method, " ", req.path, ": method not allowed (allowed: ", allowed, ")")),
            ""},
           res, 405);
    res.set_header("Allow", allowed);
  };
  if (!absl::StrContains(allowed, "GET")) http->Get(pattern, refuse);  // HEAD comes with GET
  if (allowed != "POST") http->Post(pattern, refuse);
  http->Put(pattern, refuse);
  http->Patch(pattern, refuse);
  http->Delete(pattern, refuse);
  http->Options(pattern, refuse);
}

void OpenAiHttpServer::Impl::Models(httplib::Response& res) const {
  res.set_content(json{{"object", "list"}, {"data", json::array({ModelJson()})}}.dump(), kJson);
}

// GET /v1/models/{id}: OpenAI's "retrieve model".
void OpenAiHttpServer::Impl::Model(const std::string& id, httplib::Response& res) const {
  if (id != served->model.name) {
    Refuse(metrics,
           {absl::NotFoundError(absl::StrCat("model '", id, "' is not served here (serving '",
                                             served->model.name, "')")),
            "model"},
           res);
    return;
  }
  res.set_content(ModelJson().dump(), kJson);
}

json OpenAiHttpServer::Impl::ModelJson() const {
  const RunnerOptions& ro = runner->options();
  json model = {{"id", served->model.name},
                {"object", "model"},
                {"created", started_unix_s},
                {"owned_by", "neupims"},
                {"root", served->model.name},
                {"max_model_len", served->model.max_seq_len},
                {"neupims",
                 {{"version", options.version},
                  {"device", served->device.name},
                  {"mode", served->mode},
                  {"pacing", ToString(ro.pacing)},
                  {"speed", ro.speed},
                  {"tensor_parallel", served->parallelism.tp},
                  {"pipeline_parallel", served->parallelism.pp},
                  {"tokenizer", runner->tokenizer().name()}}}};
  return model;
}

// Any content type but form-data is read as JSON, as it always was: `curl -d` sends JSON as
// application/x-www-form-urlencoded, at any size. A multipart/form-data body is never the JSON
// object (httplib would parse it into form fields and leave the body empty).
bool OpenAiHttpServer::Impl::ReadBody(const httplib::Request& req,
                                      const httplib::ContentReader& content, std::string* body,
                                      httplib::Response& res) const {
  const auto refuse = [&](int http_status, const absl::Status& s, std::string param) {
    Refuse(metrics, {s, std::move(param)}, res, http_status);
    // The rest of the body is left unread: the connection cannot carry another request.
    res.set_header("Connection", "close");
    return false;
  };
  if (req.is_multipart_form_data()) {
    return refuse(415,
                  absl::InvalidArgumentError(absl::StrCat(
                      "Content-Type: '", req.get_header_value("Content-Type"),
                      "' is not supported: send the request as JSON (application/json)")),
                  "Content-Type");
  }
  const size_t limit = static_cast<size_t>(options.max_body_bytes);
  bool over = false;
  const bool read = content([&](const char* data, size_t n) {
    over = body->size() + n > limit;
    if (!over) body->append(data, n);
    return !over;
  });
  RequestRead();
  if (over || res.status == 413) {  // 413: httplib saw a Content-Length over the limit
    return refuse(413,
                  absl::InvalidArgumentError(absl::StrCat("the request body is over the limit of ",
                                                          options.max_body_bytes,
                                                          " bytes (--max-message-bytes)")),
                  "");
  }
  if (!read && BudgetExceeded(res, options.request_read_timeout, metrics)) return false;
  if (!read) {
    return refuse(400, absl::InvalidArgumentError("the request body could not be read"), "");
  }
  return true;
}

void OpenAiHttpServer::Impl::Generate(Api api, const httplib::Request& req,
                                      const std::string& raw_body, httplib::Response& res) {
  const uint64_t n = next_id.fetch_add(1, std::memory_order_relaxed);
  json body = json::parse(raw_body, nullptr, /*allow_exceptions=*/false);
  ParsedRequest p;
  std::optional<ApiError> bad =
      body.is_discarded()
          ? std::optional<ApiError>(BadField("body", "is not valid JSON"))
          : ParseBody(api, body, *served, runner->tokenizer(), /*default_seed=*/n, &p);
  if (bad.has_value()) {
    Refuse(metrics, *bad, res);
    return;
  }
  ResponseShape shape;
  shape.api = api;
  shape.id =
      absl::StrFormat("%s-%x-%d", api == Api::kChat ? "chatcmpl" : "cmpl", started_unix_s, n);
  shape.model = served->model.name;
  shape.created = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  shape.usage_null = p.stream && p.include_usage;
  p.input.request_id = shape.id;
  // Only a stream has a client that can stop reading; a whole response waits for its end.
  const int64_t max_buffer = p.stream ? options.max_stream_buffer : 0;
  auto state = std::make_shared<HttpRequestState>(
      runner->options().pacing == Pacing::kFast ? kFastWakeBatch : 1, max_buffer,
      [runner = runner, metrics = metrics, id = shape.id](const absl::Status&) {
        if (metrics != nullptr) metrics->OnStreamBufferOverflow(ServerMetrics::FrontEnd::kHttp);
        runner->AbortAsync(id);
      });
  absl::StatusOr<std::string> id = SubmitGenerate(runner, metrics, p.input, state);
  if (!id.ok()) {
    SendError(EngineError(id.status(), p.prompt_field, p.max_tokens_field, p.max_tokens_sent), res);
    return;
  }
  if (p.stream) {
    Stream(p, std::move(shape), std::move(state), *id, res);
    return;
  }
  // Not streamed: the connection's thread waits for the whole completion, and aborts the
  // request if its client hangs up meanwhile (the KV blocks are freed; it counts as an abort).
  ClientWatch client(req);
  bool aborted = false;
  while (!state->AwaitCompletion(kHangUpCheckInterval)) {
    if (!aborted && client.HungUp()) {
      runner->AbortAsync(*id);
      aborted = true;
    }
  }
  const ByteTokenizer& tok = runner->tokenizer();
  std::vector<int64_t> ids;
  std::optional<Completion> done;
  (void)state->Take(&ids, &done);  // complete, and unbounded: never overflows
  if (!done->status.ok()) {        // the engine faulted
    SendError({done->status, ""}, res);
    return;
  }
  std::string text;
  for (int64_t t : ids) text += tok.Decode(t);
  res.set_content(FullResponse(shape, text, *done, static_cast<int64_t>(ids.size())).dump(), kJson);
}

void OpenAiHttpServer::Impl::Stream(const ParsedRequest& p, ResponseShape shape,
                                    std::shared_ptr<HttpRequestState> state,
                                    const std::string& request_id, httplib::Response& res) {
  // Shared by the provider (called until it finishes) and the releaser (called once at the end).
  struct StreamContext {
    ResponseShape shape;
    SseWriter writer;
    std::shared_ptr<HttpRequestState> state;
    bool include_usage = false;
    bool chat_role_sent = false;
    bool completed = false;
    int64_t streamed = 0;
    std::vector<int64_t> ids;
    std::string out;
    explicit StreamContext(ResponseShape s) : shape(std::move(s)), writer(shape) {}
  };
  auto ctx = std::make_shared<StreamContext>(std::move(shape));
  ctx->state = std::move(state);
  ctx->include_usage = p.include_usage;
  ctx->chat_role_sent = ctx->shape.api != Api::kChat;
  const ByteTokenizer* tok = &runner->tokenizer();
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [ctx, tok](size_t /*offset*/, httplib::DataSink& sink) {
        StreamContext& c = *ctx;
        c.out.clear();
        if (!c.chat_role_sent) {
          c.writer.AppendRole(&c.out);
          c.chat_role_sent = true;
        } else {
          std::optional<Completion> done;
          c.ids.clear();
          const absl::Status overflow = c.state->Take(&c.ids, &done);
          for (int64_t id : c.ids) c.writer.AppendToken(tok->Decode(id), &c.out);
          c.streamed += static_cast<int64_t>(c.ids.size());
          if (!overflow.ok()) {
            // The client stopped reading and the buffer overflowed (the request is aborted
            // already): it gets an error event if it ever reads again, and no [DONE].
            absl::StrAppend(&c.out, "data: ", ErrorJson({overflow, ""}).dump(), "\n\n");
            c.completed = true;
          } else if (done.has_value() && !done->status.ok()) {
            // The engine faulted: an error event (as OpenAI streams report errors) and no
            // [DONE], so that clients do not take the output for complete.
            absl::StrAppend(&c.out, "data: ", ErrorJson({done->status, ""}).dump(), "\n\n");
            c.completed = true;
          } else if (done.has_value()) {
            c.writer.AppendEnd(*done, c.streamed, c.include_usage, &c.out);
            c.completed = true;
          }
        }
        // A failed write means the client went away: returning false ends the response and the
        // releaser aborts the request.
        const bool written = sink.write(c.out.data(), c.out.size());
        c.state->WriteDone();
        if (!written) return false;
        if (c.completed) sink.done();
        return true;
      },
      [ctx, runner = runner, request_id](bool /*success*/) {
        // Ended before the completion: the client left; free the request's KV blocks.
        if (!ctx->completed) runner->AbortAsync(request_id);
      });
}

OpenAiHttpServer::OpenAiHttpServer() : impl_(std::make_unique<Impl>()) {}

OpenAiHttpServer::~OpenAiHttpServer() { Stop(); }

absl::StatusOr<std::unique_ptr<OpenAiHttpServer>> OpenAiHttpServer::Start(
    const HttpOptions& options, EngineRunner* runner, ServerMetrics* metrics,
    std::shared_ptr<prometheus::Registry> registry) {
  std::unique_ptr<OpenAiHttpServer> s(new OpenAiHttpServer());
  Impl& im = *s->impl_;
  im.options = options;
  im.runner = runner;
  im.metrics = metrics;
  im.registry = std::move(registry);
  im.served = runner->Snapshot().served;
  im.cors = std::make_unique<const Cors>(options.cors);
  im.started_unix_s = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  // The pool first: a start that cannot get its threads has bound nothing yet. httplib asks for
  // the queue once, on the listener thread, and owns it from then on (shutdown, delete).
  ASSIGN_OR_RETURN(std::unique_ptr<HttpThreadPool> pool,
                   HttpThreadPool::Start(static_cast<size_t>(std::max(1, options.threads)),
                                         options.max_parked_bytes));
  RETURN_IF_ERROR(im.Create(pool.get()));
  im.http->new_task_queue = [pool = std::make_shared<std::unique_ptr<HttpThreadPool>>(std::move(
                                 pool))]() -> httplib::TaskQueue* { return pool->release(); };
  im.http->set_payload_max_length(static_cast<size_t>(options.max_body_bytes));
  // SSE chunks are small: without TCP_NODELAY Nagle's algorithm would hold them back.
  im.http->set_tcp_nodelay(true);
  // httplib's default sets SO_REUSEPORT, which lets a second server bind a port already in use
  // and silently share its connections (as gRPC's default would; server.cc turns that off).
  // SO_REUSEADDR alone refuses a live port and still lets a restart bind over the connections a
  // killed server left in TIME_WAIT.
  //
  // The send buffer is set on the listening socket, whose accepted connections inherit it: it
  // bounds what the kernel holds for a client that stops reading, so --max-stream-buffer decides
  // what happens next (see send_buffer_bytes).
  im.http->set_socket_options([send_buffer = options.send_buffer_bytes](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (send_buffer > 0) setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &send_buffer, sizeof send_buffer);
  });
  im.http->set_keep_alive_max_count(1 << 20);
  im.http->set_write_timeout(options.write_timeout);
  im.Routes();
  if (options.port == 0) {
    s->port_ = im.http->bind_to_any_port(options.bind_address);
  } else if (im.http->bind_to_port(options.bind_address, options.port)) {
    s->port_ = options.port;
  } else {
    s->port_ = -1;
  }
  if (s->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve HTTP on ", options.bind_address, ":",
                                               options.port, " (in use or not permitted)"));
  }
  if (!im.http->RaiseBacklog(4096)) {
    im.http->CloseUnlistened();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.bind_address, ":",
                                               s->port_, " with a larger backlog"));
  }
  // httplib's stop() does nothing until the listener thread has entered its accept loop
  // (is_running()): a Stop right after Start would leave that thread in accept() for good, and
  // Stop's join with it (a test that stopped its server within a millisecond hung 1 run in
  // ~500). So Start returns once the loop runs (or the thread has already ended).
  auto ended = std::make_shared<std::atomic<bool>>(false);
  absl::StatusOr<std::thread> listener =
      StartThread("the HTTP API's listener thread", [http = im.http.get(), ended] {
        http->listen_after_bind();
        *ended = true;
      });
  if (!listener.ok()) {
    im.http->CloseUnlistened();
    return listener.status();
  }
  im.listener = *std::move(listener);
  while (!im.http->is_running() && !*ended) std::this_thread::yield();
  return s;
}

void OpenAiHttpServer::Stop() {
  Impl& im = *impl_;
  if (im.stopped) return;
  im.stopped = true;
  if (im.http != nullptr) im.http->stop();
  if (im.listener.joinable()) im.listener.join();
}

}  // namespace neupims::server
