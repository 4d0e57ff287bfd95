// Server: the gRPC front end of the serving engine.
//
// Role: assembles EngineRunner (the engine thread), LlmServiceImpl (neupims.v1.LlmService on the
// callback API), grpc.health.v1.Health, server reflection (v1alpha), the OpenAI-compatible HTTP
// API (openai_api.h, same engine) and the Prometheus exposer (/metrics on its own port). Binds
// 127.0.0.1 by default. Optional TLS and bearer token on gRPC and HTTP (security.h).
//
// Lifecycle: Start() -> serving; Drain() turns health NOT_SERVING (HTTP /health 503), refuses new
// requests with UNAVAILABLE (HTTP 503) and waits for in-flight requests up to the drain timeout,
// then Shutdown() aborts the rest and stops gRPC. RunServerMain() does all of that on SIGTERM /
// SIGINT and returns 0.
#ifndef NEUPIMS_SERVER_SERVER_H_
#define NEUPIMS_SERVER_SERVER_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "server/cnn_runner.h"
#include "server/cors.h"
#include "server/engine_runner.h"
#include "server/openai_api.h"
#include "server/security.h"

namespace neupims::server {

// The most --http-threads / "http_threads" accepts.
inline constexpr int kMaxHttpThreads = 4096;

struct ServerOptions {
  RunnerOptions runner;
  std::string bind_address = "127.0.0.1";
  int port = 50051;                     // 0: pick a free port (see Server::port())
  int metrics_port = 9400;              // 0: pick a free port; -1: no metrics endpoint
  std::optional<int> http_port = 8000;  // OpenAI-compatible API; 0: a free port; nullopt: none
  // HTTP connections served at once: the pool's threads, all started with the server, so they
  // count against a container's process limit (--http-threads, config "http_threads").
  int http_threads = HttpOptions{}.threads;
  // Largest request accepted, in bytes: a gRPC message (RESOURCE_EXHAUSTED beyond) and an HTTP
  // body (413 beyond). The default is gRPC's own default.
  int64_t max_message_bytes = int64_t{4} << 20;
  std::chrono::milliseconds drain_timeout{30000};
  // Tokens a gRPC stream or an HTTP SSE stream may hold that its client has not taken (queued
  // behind a write that HTTP/2 flow control or a full socket holds back); beyond, the stream ends
  // (gRPC: RESOURCE_EXHAUSTED; SSE: an error event, or the connection closes) and the request is
  // aborted. 0: unbounded (the request's max_new_tokens then bounds it). The default is above
  // every shipped model's context, so it never cuts a client that reads, even in fast pacing where
  // the engine outruns every client; realtime deployments can set it much lower.
  int64_t max_stream_buffer = 4096;
  // Calls (HTTP/2 streams) one gRPC connection may have open at once, advertised to the client in
  // SETTINGS_MAX_CONCURRENT_STREAMS (--max-concurrent-streams, config "max_concurrent_streams").
  // gRPC's own default is unlimited: one connection could open thousands of calls, each holding
  // memory and an engine request (docs/reliability.md, "HTTP/2 attacks"). A gRPC client queues
  // its calls beyond the limit; a client that opens more anyway loses its connection.
  int max_concurrent_streams = 1024;
  // The longest an HTTP socket write waits for a client that does not read (HttpOptions).
  std::chrono::milliseconds http_write_timeout = HttpOptions{}.write_timeout;
  std::chrono::milliseconds http_request_read_timeout = HttpOptions{}.request_read_timeout;
  size_t http_max_parked_bytes = HttpOptions{}.max_parked_bytes;  // (HttpOptions)
  // TLS and the bearer token for gRPC and HTTP (security.h), read and checked by Start. With any
  // of them set, metrics_port must be -1: the separate metrics port (prometheus-cpp's exposer)
  // can do neither, so metrics are scraped from the HTTP API's /metrics instead.
  SecurityOptions security;
  // CORS for the HTTP API (cors.h); off by default.
  CorsOptions cors;
  // CNN models served over inference.GRPCInferenceService (KServe v2) beside the LLM, with the
  // same pacing and speed; none by default.
  CnnOptions cnn;
};

// Reads a server config file (strict JSON, every field optional; unknown fields are errors
// naming the file): {"model", "device", "mode", "tp", "pp", "max_batch", "max_prefill_tokens",
// "block_tokens", "prefill", "prefill_groups", "prefill_link_gbps", "interconnect_gbps",
// "interconnect_latency_ns", "level", "mha_estimator", "channel_policy", "sub_batch",
// "sbi_min_batch", "dual_row_buffers", "bind_address", "port", "metrics_port", "http_port" (-1:
// none), "pacing", "speed", "max_waiting", "drain_timeout_s", "mean_output_tokens",
// "max_message_bytes", "max_prompt_tokens" (0: the model's context), "max_stream_buffer",
// "max_concurrent_streams",
// "tls_cert", "tls_key", "tls_client_ca", "auth_token_file" (paths, relative to the working
// directory), "allowed_origins", "allowed_methods", "allowed_headers" (lists of strings, each
// checked as cors.h says), "allow_credentials" (a bool), "cnn_models" (a list of built-in CNN names
// or graph JSON paths), "cnn_cluster", "cnn_policy", "cnn_alpha", "cnn_max_batch",
// "cnn_input_datatype"}: every engine flag of `simulate`. Enum fields take the names of their
// option's names table; a bad name is an error naming the field and listing the choices.
absl::Status LoadServerConfig(const std::string& path, ServerOptions* options);
// The same from text already in memory; `source` is what errors call it.
absl::Status ParseServerConfig(absl::string_view text, absl::string_view source,
                               ServerOptions* options);

class Server {
 public:
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options);
  ~Server();

  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  // The OpenAI-compatible API's port; nullopt when it is off.
  std::optional<int> http_port() const { return http_port_; }
  std::string address() const;
  EngineRunner& runner() { return *runner_; }
  // The CNN models; nullptr when none are served.
  CnnRunner* cnn_runner() { return cnn_runner_.get(); }

  // Health NOT_SERVING, new requests UNAVAILABLE, wait for in-flight ones (up to the drain
  // timeout). Returns true if everything finished in time.
  bool Drain();
  // Aborts what is left and stops serving. Idempotent.
  void Shutdown();

 private:
  struct Impl;
  explicit Server(const ServerOptions& options);
  ServerOptions options_;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<EngineRunner> runner_;
  std::unique_ptr<CnnRunner> cnn_runner_;
  int port_ = 0;
  int metrics_port_ = -1;
  std::optional<int> http_port_;
};

// Runs a server until SIGTERM or SIGINT, then drains and shuts down. Prints where it listens to
// stderr. Returns the process exit code (0 after a clean drain).
int RunServerMain(const ServerOptions& options);

inline constexpr const char* kVersion = "0.1.0";

}  // namespace neupims::server

#endif  // NEUPIMS_SERVER_SERVER_H_
