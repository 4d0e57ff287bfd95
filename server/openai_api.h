// OpenAiHttpServer: the OpenAI-compatible HTTP/1.1 API (cpp-httplib), next to gRPC in the same
// process and over the same EngineRunner (docs/api.md).
//
// Endpoints: POST /v1/completions and /v1/chat/completions (stream or not; Server-Sent Events
// `data: {...}` chunks closed by `data: [DONE]`), GET /v1/models and /v1/models/{model}, GET
// /health (200 serving, 503 draining) and GET /metrics (the Prometheus registry's exposition
// text, as on the metrics port). Another method on one of these paths is 405 with `Allow`.
//
// Requests take the same path as gRPC's (generate_request.h: SubmitGenerate), so validation is
// the engine's one check and errors are absl::Status mapped to HTTP in status_map.h, reported as
// OpenAI's error object {"error": {"message", "type", "param", "code"}}.
//
// Threads: httplib serves each connection on a thread of its pool (`threads`), so that many
// streams can be open at once. A connection idle between requests gives its thread up to a
// connection waiting for one (it is closed; its client reconnects). A stream's thread waits for its
// request's output, which the engine thread hands over as token ids (RequestSink); the stream's
// thread formats and writes the SSE chunks, everything that arrived since its last write in one
// write. A write that fails (the client went away) aborts the request in the engine, which frees
// its KV blocks, as a gRPC cancel does. Without output there is nothing to write, so a client that
// leaves while its request is still queued is noticed at the request's first token.
//
// Security (security.h): with TLS the API is served over HTTPS (mutual TLS with a client CA);
// with a token every route but /health answers 401, an OpenAI error object and
// `WWW-Authenticate: Bearer`, unless the request carries `Authorization: Bearer <token>`.
// /metrics is protected too: Prometheus sends the token from its scrape config.
//
// CORS (cors.h), when origins are allowed: a preflight (OPTIONS with Origin and
// Access-Control-Request-Method) from an allowed origin, on any path, is 204 with the
// Access-Control-Allow-* headers, before the token check (browsers send preflights without
// Authorization; the real request still needs the token). Every response to an allowed origin
// carries Access-Control-Allow-Origin and Vary: Origin: errors, 401s and SSE streams too.
#ifndef NEUPIMS_SERVER_OPENAI_API_H_
#define NEUPIMS_SERVER_OPENAI_API_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/registry.h"
#include "server/cors.h"
#include "server/engine_runner.h"
#include "server/metrics.h"
#include "server/security.h"

namespace neupims::server {

struct HttpOptions {
  std::string bind_address = "127.0.0.1";
  int port = 8000;    // 0: pick a free port (OpenAiHttpServer::port())
  int threads = 512;  // connections served at once (each open stream holds one)
  int64_t max_body_bytes = int64_t{4} << 20;  // larger request bodies: 413
  // Tokens an SSE stream may hold that its client has not taken (ServerOptions::max_stream_buffer,
  // the same bound as gRPC's); 0: unbounded.
  int64_t max_stream_buffer = 4096;
  // The longest one socket write may wait for a client that does not read (cpp-httplib fails the
  // write then, and the stream's request is aborted): a dead or stalled client holds an HTTP
  // thread at most this long per write. cpp-httplib's own default, set here on purpose.
  std::chrono::milliseconds write_timeout{5000};
  // The longest a connection may take to deliver a request, head and body, from its first byte
  // (before it, a connection waits at most the 5 s keep-alive timeout, then is closed; over TLS
  // the handshake has this long too). cpp-httplib's read timeout (5 s) applies to each read
  // alone, so a client that trickles a byte a second (slowloris) would hold a thread for good;
  // past this it is answered 408 and the connection is closed. HTTP and HTTPS alike.
  std::chrono::milliseconds request_read_timeout{10000};
  // What the connections parked in the middle of a request (their client's next bytes awaited
  // without a thread) may hold together of their requests' bytes: 256 MiB, about 3,800 requests
  // of the 64 KiB a connection gathers at most. Past it a connection waits on its thread.
  size_t max_parked_bytes = size_t{256} << 20;
  // SO_SNDBUF of every connection (the kernel doubles it); 0: the kernel's autotuning, which on
  // a loopback or LAN connection lets a client that does not read hold up to tcp_wmem's maximum
  // (4 MiB by default: every token of any request) in the kernel, out of --max-stream-buffer's
  // reach. 64 KiB holds about 750 SSE token events and still fills a 10 Gb/s link at 100 us RTT.
  int send_buffer_bytes = 64 << 10;
  std::string version;
  // TLS and the bearer token; null: plain HTTP, no token.
  std::shared_ptr<const Security> security;
  // Which other origins' browser pages may call the API (cors.h); default: none.
  CorsOptions cors;
};

class OpenAiHttpServer {
 public:
  // Binds and serves on its own threads; UNAVAILABLE if the address cannot be bound (INTERNAL if
  // the TLS context cannot be set up). `metrics`
  // and `registry` may be null (no error counts; /metrics answers 404).
  static absl::StatusOr<std::unique_ptr<OpenAiHttpServer>> Start(
      const HttpOptions& options, EngineRunner* runner, ServerMetrics* metrics,
      std::shared_ptr<prometheus::Registry> registry);
  ~OpenAiHttpServer();

  int port() const { return port_; }
  // Stops listening and waits for the connections' threads. Streams still open must have been
  // ended first (EngineRunner::Stop completes every request). Idempotent.
  void Stop();

 private:
  struct Impl;
  OpenAiHttpServer();
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace neupims::server

#endif  // NEUPIMS_SERVER_OPENAI_API_H_
