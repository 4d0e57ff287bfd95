// The soak's HTTP front end (`soak --front-end http`, issue 18): each client thread keeps one
// connection to the OpenAI-compatible API and makes random calls: streamed and whole
// completions and chat completions, streams it hangs up on after a few tokens, streamed
// completions it aborts by their id over gRPC, and invalid requests. Every response is checked
// against the API's shape (docs/api.md): a stream is token chunks, one finish chunk, the usage
// chunk whose completion_tokens is the number of token chunks, then `data: [DONE]`; a refusal
// is an error object.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "bench/soak.h"
#include "grpcpp/grpcpp.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tools/loadgen/loadgen.h"
#include "tools/loadgen/openai_client.h"

namespace neupims::soak {
namespace {

using json = nlohmann::json;

// The status code a refusal's HTTP status stands for, as neupims:request_errors_total labels it.
// The inverse of server::ToHttpError for the codes the soak's requests can meet; 400 also
// covers FAILED_PRECONDITION and ALREADY_EXISTS there, which these requests never cause, so a
// 400 for one of them shows as a mismatch by code in the checks.
std::string CodeOfHttpStatus(int status) {
  switch (status) {
    case 400:
    case 413:
      return "INVALID_ARGUMENT";
    case 401:
      return "UNAUTHENTICATED";
    case 404:
      return "NOT_FOUND";
    case 429:
      return "RESOURCE_EXHAUSTED";
    case 503:
      return "UNAVAILABLE";
    case 504:
      return "DEADLINE_EXCEEDED";
    case 500:
      return "INTERNAL";
    default:
      return absl::StrCat("HTTP_", status);
  }
}

// A Server-Sent Events stream of completion (or chat completion) chunks, fed as it arrives
// (split into events by the load generator's SSE parser).
class SseStream {
 public:
  explicit SseStream(bool chat) : chat_(chat) {}

  void Feed(const char* data, size_t n) {
    parser_.Feed(data, n, [this](const std::string& event) { Event(event); });
  }
  int64_t tokens() const { return tokens_; }
  bool done() const { return done_; }
  const std::string& id() const { return id_; }
  const std::string& finish() const { return finish_; }
  // Empty if the stream had the API's shape, else what broke it.
  std::string Problem() const {
    if (!problem_.empty()) return problem_;
    if (!done_) return "no data: [DONE]";
    if (finish_.empty()) return "no finish chunk";
    if (!usage_tokens_.has_value()) return "no usage chunk";
    if (*usage_tokens_ != tokens_) {
      return absl::StrCat("usage.completion_tokens ", *usage_tokens_, " but ", tokens_,
                          " token chunks");
    }
    return "";
  }

 private:
  // One event's data.
  void Event(const std::string& event) {
    if (!problem_.empty()) return;
    if (done_) {
      problem_ = "an event after data: [DONE]";
      return;
    }
    if (event == "[DONE]") {
      done_ = true;
      return;
    }
    const json chunk = json::parse(event, nullptr, false);
    if (!chunk.is_object()) {
      problem_ = "a chunk that is not a JSON object";
      return;
    }
    if (chunk.contains("error")) {
      problem_ = absl::StrCat("an error event: ", chunk["error"].dump());
      return;
    }
    if (id_.empty() && chunk.value("id", "") != "") id_ = chunk["id"].get<std::string>();
    const json& choices = chunk.value("choices", json::array());
    if (choices.empty()) {  // the usage chunk, after the finish chunk
      if (finish_.empty() || !chunk.contains("usage") || !chunk["usage"].is_object()) {
        problem_ = "a chunk without choices that is not the usage after the finish";
        return;
      }
      usage_tokens_ = chunk["usage"].value("completion_tokens", int64_t{-1});
      return;
    }
    const json& choice = choices[0];
    if (!finish_.empty()) {
      problem_ = "a choice after the finish chunk";
      return;
    }
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
      finish_ = choice["finish_reason"].get<std::string>();
      return;
    }
    // A token chunk; a chat stream opens with the assistant's role (and empty content), which
    // is not a token.
    if (chat_) {
      const json& delta = choice.value("delta", json::object());
      if (delta.contains("content") && delta["content"].is_string() && !delta.contains("role")) {
        ++tokens_;
      }
    } else {
      ++tokens_;
    }
  }

  const bool chat_;
  loadgen::SseParser parser_;
  std::string problem_;
  std::string id_;
  std::string finish_;
  std::optional<int64_t> usage_tokens_;
  int64_t tokens_ = 0;
  bool done_ = false;
};

class HttpClient : public SoakClient {
 public:
  HttpClient(const HttpTarget& target, int index, uint64_t seed, std::atomic<int64_t>* next,
             int64_t total, std::atomic<int64_t>* done)
      : target_(target),
        http_(loadgen::MakeClient(target.url)),
        rng_(seed * 1000003 + static_cast<uint64_t>(index)),
        next_(next),
        total_(total),
        done_(done) {
    http_->set_keep_alive(true);
    http_->set_read_timeout(60, 0);
    http_->set_write_timeout(60, 0);
  }

  void Run() override {
    while (next_->fetch_add(1) < total_) {
      const double u = Uniform();
      if (u < 0.40) {
        Stream(/*chat=*/false, Between(1, 48), std::nullopt, false);
      } else if (u < 0.52) {
        Whole(/*chat=*/false);
      } else if (u < 0.60) {
        Stream(/*chat=*/true, Between(1, 48), std::nullopt, false);
      } else if (u < 0.64) {
        Whole(/*chat=*/true);
      } else if (u < 0.78) {
        Stream(/*chat=*/Uniform() < 0.5, 256, Between(1, 3), false);  // hangs up
      } else if (u < 0.88) {
        // Long enough to be live when the first chunk arrives (fast pacing writes a stream every
        // 32 tokens or 20 ms).
        Stream(/*chat=*/false, 1024, std::nullopt, /*abort=*/target_.grpc != nullptr);
      } else {
        Invalid();
      }
      ++counts_.sent;
      done_->fetch_add(1);
    }
  }
  const Counts& counts() const override { return counts_; }

 private:
  double Uniform() { return std::uniform_real_distribution<double>(0, 1)(rng_); }
  int64_t Between(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  // A request body: a prompt of 1-32 words (or one user message), `max_tokens` new tokens.
  json Body(bool chat, int64_t max_tokens, bool ignore_eos) {
    std::string text;
    for (int64_t w = Between(1, 32); w > 0; --w) absl::StrAppend(&text, "soak ");
    json body = {{"max_tokens", max_tokens}, {"ignore_eos", ignore_eos}};
    if (chat) {
      body["messages"] = json::array({{{"role", "user"}, {"content", text}}});
    } else {
      body["prompt"] = text;
    }
    return body;
  }
  std::string Path(bool chat) const {
    return absl::StrCat(target_.url.prefix, chat ? "/v1/chat/completions" : "/v1/completions");
  }

  // A streamed call. `hang_up_after`: close the connection once that many tokens arrived (the
  // server aborts the request at its next write, or it has ended meanwhile). `abort`: after the
  // first token, Abort the request over gRPC by the stream's id.
  void Stream(bool chat, int64_t max_tokens, std::optional<int64_t> hang_up_after, bool abort) {
    json body = Body(chat, max_tokens, hang_up_after.has_value() || abort || Uniform() < 0.5);
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    SseStream sse(chat);
    int status = 0;
    std::string error_body;
    bool aborted_rpc = false;
    httplib::Request req;
    req.method = "POST";
    req.path = Path(chat);
    req.set_header("Content-Type", "application/json");
    req.body = body.dump();
    req.response_handler = [&status](const httplib::Response& r) {
      status = r.status;
      return true;
    };
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      if (status != 200) {
        error_body.append(data, n);
        return true;
      }
      sse.Feed(data, n);
      if (abort && !aborted_rpc && sse.tokens() > 0 && !sse.id().empty()) {
        aborted_rpc = true;
        AbortById(sse.id());
      }
      return !(hang_up_after.has_value() && sse.tokens() >= *hang_up_after && !sse.done());
    };
    const httplib::Result r = http_->send(req);
    if (!r && r.error() == httplib::Error::Canceled) {
      ++counts_.cancelled;  // this client hung up
      return;
    }
    if (!r) {
      counts_.Malformed(absl::StrCat("no response (", httplib::to_string(r.error()), ")"));
      return;
    }
    if (status != 200) {
      Refused(status, error_body);
      return;
    }
    if (const std::string problem = sse.Problem(); !problem.empty()) {
      counts_.Malformed(problem);
      return;
    }
    Finished(sse.finish());
  }

  void Whole(bool chat) {
    const json body = Body(chat, Between(1, 48), Uniform() < 0.5);
    const httplib::Result r = http_->Post(Path(chat), body.dump(), "application/json");
    if (!r) {
      counts_.Malformed(absl::StrCat("no response (", httplib::to_string(r.error()), ")"));
      return;
    }
    if (r->status != 200) {
      Refused(r->status, r->body);
      return;
    }
    const json j = json::parse(r->body, nullptr, false);
    const json choices = j.is_object() ? j.value("choices", json::array()) : json::array();
    if (choices.size() != 1 || !choices[0].contains("finish_reason") ||
        !choices[0]["finish_reason"].is_string() || !j.contains("usage") ||
        j["usage"].value("completion_tokens", int64_t{0}) < 1) {
      counts_.Malformed("a whole response without one choice, its finish reason and usage");
      return;
    }
    Finished(choices[0]["finish_reason"].get<std::string>());
  }

  // max_tokens 0 (400), an unknown model (404) or malformed JSON (400).
  void Invalid() {
    std::string body;
    const double u = Uniform();
    if (u < 1.0 / 3) {
      body = Body(false, 0, false).dump();
    } else if (u < 2.0 / 3) {
      json b = Body(false, 4, false);
      b["model"] = "no-such-model";
      body = b.dump();
    } else {
      body = R"({"prompt": "soak", "max_tokens": )";
    }
    const httplib::Result r = http_->Post(Path(false), body, "application/json");
    if (!r) {
      counts_.Malformed(absl::StrCat("no response (", httplib::to_string(r.error()), ")"));
      return;
    }
    if (r->status == 200) {
      counts_.Malformed("an invalid request was served");
      return;
    }
    Refused(r->status, r->body);
  }

  void AbortById(const std::string& id) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    loadgen::Authorize(target_.url.auth_token, &ctx);  // the server's token is one for both
    neupims::v1::AbortRequest req;
    req.set_request_id(id);
    neupims::v1::AbortResponse resp;
    (void)target_.grpc->Abort(&ctx, req, &resp);  // NOT_FOUND if it ended first: either is fine
    ++counts_.abort_rpcs;
  }

  void Refused(int status, const std::string& body) {
    const json j = json::parse(body, nullptr, false);
    if (!j.is_object() || !j.contains("error") || !j["error"].contains("message")) {
      counts_.Malformed(absl::StrCat("a ", status, " without the API's error object"));
      return;
    }
    ++counts_.refused[CodeOfHttpStatus(status)];
  }

  void Finished(const std::string& finish) {
    if (finish == "length" || finish == "stop") {
      ++counts_.completed;
    } else if (finish == "abort") {
      ++counts_.aborted;
    } else {
      counts_.Malformed(absl::StrCat("finish reason '", finish, "'"));
    }
  }

  const HttpTarget target_;
  const std::unique_ptr<httplib::Client> http_;
  std::mt19937_64 rng_;
  std::atomic<int64_t>* next_;
  int64_t total_;
  std::atomic<int64_t>* done_;
  Counts counts_;
};

}  // namespace

std::unique_ptr<SoakClient> MakeHttpClient(const HttpTarget& target, int index, uint64_t seed,
                                           std::atomic<int64_t>* next, int64_t total,
                                           std::atomic<int64_t>* done) {
  return std::make_unique<HttpClient>(target, index, seed, next, total, done);
}

}  // namespace neupims::soak
