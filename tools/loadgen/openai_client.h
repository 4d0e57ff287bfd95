// neupims-bench's OpenAI backend (--backend openai): the same workloads as the gRPC backend,
// sent as streamed POST /v1/completions to an OpenAI-compatible HTTP server (`neupims serve
// --http-port`, or any server that speaks the API, such as vLLM).
//
// Each request is a blocking cpp-httplib call on a thread of an OpenAiClientPool (one keep-alive
// connection per thread; threads are added when none is idle, so there are as many as requests
// in flight). The prompt is sent as token ids of the workload's exact length (as vLLM accepts),
// with max_tokens, ignore_eos, a per-request seed and stream_options.include_usage. Every SSE
// chunk with text is one token (as vLLM's benchmark counts them); the final chunks give the
// finish reason, the usage and, from neupims, the simulated times (the "neupims" extension).
// Server samples come from GET /metrics (the neupims gauges, per-channel KV usage and the hardware
// view; none from other servers).
#ifndef NEUPIMS_TOOLS_LOADGEN_OPENAI_CLIENT_H_
#define NEUPIMS_TOOLS_LOADGEN_OPENAI_CLIENT_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "tools/loadgen/loadgen.h"
#include "tools/loadgen/results.h"

namespace httplib {
class Client;
}

namespace neupims::loadgen {

// "http[s]://host:port[/prefix]": where to connect and the path before /v1/... ("/v1" at the end of
// the prefix is accepted and not doubled).
struct BaseUrl {
  std::string scheme_host_port;  // "http://127.0.0.1:8000"
  std::string prefix;            // "" or "/some/prefix"
  std::string auth_token;        // sent as `Authorization: Bearer` on every request; "": none
  TlsClientOptions tls;          // https: CA to verify the server with, client cert / key
};
absl::StatusOr<BaseUrl> ParseBaseUrl(absl::string_view text);
// A client of `url` with its TLS settings (https) and bearer token; a client certificate only
// when `url.tls` has one.
std::unique_ptr<httplib::Client> MakeClient(const BaseUrl& url);
// "" when `host_port` ("host", "host:port", "[v6]:port") has no port or a port in [1, 65535];
// else why not. --base-url and --metrics are checked with it before anything connects.
std::string HostPortProblem(absl::string_view host_port);

// GET /v1/models (retried until `timeout_s`): the served model and its context length, plus the
// neupims extension fields when the server is neupims. Unavailable naming the URL otherwise.
absl::StatusOr<ServerDescription> DescribeOpenAiServer(const BaseUrl& url, double timeout_s);

// The exposition text of the API's GET /metrics, over its TLS and with its token (a secured
// server serves its metrics only there). Unavailable naming the URL if it does not answer 200
// within `timeout_s`.
absl::StatusOr<std::string> FetchApiMetrics(const BaseUrl& url, double timeout_s);
// Samples the neupims gauges from GET /metrics: load, KV usage overall and per PIM channel, and
// the hardware view (metrics_scrape.h); nullopt if unreachable or not neupims.
std::optional<ServerSample> SampleOpenAiMetrics(const BaseUrl& url, double t_s);
// The load and KV part of that from an exposition text; nullopt without any neupims gauge.
std::optional<ServerSample> ParseServerSample(const std::string& exposition, double t_s);

// Splits a Server-Sent Events byte stream into events and hands each event's data (its "data:"
// lines joined by '\n') to a callback. As the SSE spec has it, lines end in CRLF, LF or CR (a CR
// at the end of one read may be followed by the LF of the next) and an empty line ends an event;
// comments (":") and other fields are skipped, and an event without data is not handed on.
class SseParser {
 public:
  template <typename F>
  void Feed(const char* data, size_t n, F&& on_event) {
    const char* p = data;
    const char* end = data + n;
    if (skip_lf_ && p < end) {
      skip_lf_ = false;
      if (*p == '\n') ++p;
    }
    while (p < end) {
      const char* eol = std::find_if(p, end, [](char c) { return c == '\r' || c == '\n'; });
      line_.append(p, eol);
      if (eol == end) return;
      p = eol + 1;
      if (*eol == '\r') {
        if (p == end) {
          skip_lf_ = true;
        } else if (*p == '\n') {
          ++p;
        }
      }
      EndLine(on_event);
    }
  }

 private:
  template <typename F>
  void EndLine(F& on_event) {
    if (line_.empty()) {
      if (!data_.empty()) on_event(data_);
      data_.clear();
      has_data_ = false;
      return;
    }
    absl::string_view line(line_);
    if (absl::ConsumePrefix(&line, "data:")) {
      absl::ConsumePrefix(&line, " ");
      if (has_data_) data_ += '\n';
      data_.append(line.data(), line.size());
      has_data_ = true;
    }
    line_.clear();
  }

  std::string line_;  // the line being read
  std::string data_;  // the event's data so far
  bool has_data_ = false;
  bool skip_lf_ = false;  // the last read ended with CR: a leading LF belongs to it
};

// One streamed completion request as the load generator sends it.
struct OpenAiRequest {
  std::string model;  // empty: left out (the server's)
  int64_t prompt_tokens = 1;
  int64_t max_tokens = 1;
  bool ignore_eos = true;
  uint64_t seed = 0;
  double timeout_s = 0;  // <= 0: none
};

// Sends `req` on `client` and fills `out` as the gRPC backend does (client view from the SSE
// chunks' arrival times on `now`, hardware view from the "neupims" extension). `tokens` counts
// tokens as they arrive (progress).
void RunOpenAiRequest(httplib::Client& client, const BaseUrl& url, const OpenAiRequest& req,
                      const std::function<double()>& now, std::atomic<int64_t>* tokens,
                      RequestResult* out);

// Threads for blocking HTTP calls, each with its own keep-alive client. Run() hands a job to an
// idle thread or starts a new one; the destructor waits for every job.
class OpenAiClientPool {
 public:
  explicit OpenAiClientPool(BaseUrl url) : url_(std::move(url)) {}
  ~OpenAiClientPool();
  void Run(std::function<void(httplib::Client&)> job);

 private:
  void Worker();

  BaseUrl url_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void(httplib::Client&)>> jobs_;  // guarded by mu_, as are the next two
  size_t idle_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace neupims::loadgen

#endif  // NEUPIMS_TOOLS_LOADGEN_OPENAI_CLIENT_H_
