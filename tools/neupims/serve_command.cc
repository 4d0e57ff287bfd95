#include "tools/neupims/serve_command.h"

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/option_ranges.h"
#include "engine/cnn/plan.h"
#include "server/server.h"
#include "tools/neupims/cli_util.h"
#include "tools/neupims/engine_flags.h"
#include "tools/neupims/enum_flag.h"
#include "tools/workload/range_flag.h"

namespace neupims::cli {
namespace {

struct ServeFlags {
  EngineFlags engine;
  std::string config;
  std::string bind = "127.0.0.1";
  int port = 50051;
  int metrics_port = 9400;
  int http_port = 8000;
  server::Pacing pacing = server::Pacing::kRealtime;
  double speed = 1.0;
  int64_t max_waiting = 4096;
  double drain_timeout_s = 30;
  double mean_output_tokens = 256;
  int64_t max_message_bytes = int64_t{4} << 20;
  int64_t max_prompt_tokens = 0;
  int64_t max_stream_buffer = server::ServerOptions{}.max_stream_buffer;
  int max_concurrent_streams = server::ServerOptions{}.max_concurrent_streams;
  int http_threads = server::ServerOptions{}.http_threads;
  server::SecurityOptions security;
  server::CorsOptions cors;
  server::CnnOptions cnn;
};

// Paths only: Server::Start reads and checks the files (security.h), whether they came from
// these flags or from the config file, so both name the same errors.
void AddSecurityFlags(CLI::App* c, server::SecurityOptions* s) {
  c->add_option("--tls-cert", s->tls_cert,
                "PEM certificate chain: serve gRPC and HTTP over TLS (needs --tls-key)");
  c->add_option("--tls-key", s->tls_key, "PEM private key of --tls-cert (unencrypted)");
  c->add_option("--tls-client-ca", s->tls_client_ca,
                "PEM CA certificate(s): mutual TLS, clients must present a certificate it signed");
  c->add_option("--auth-token-file", s->auth_token_file,
                "File whose first line is the bearer token every gRPC service but health and "
                "every HTTP route but /health require (UNAUTHENTICATED / 401 without it)");
}

// A comma-separated, repeatable list flag whose items `check` (cors.h) accepts; CLI11 names the
// flag in its error.
CLI::Option* AddCorsList(CLI::App* c, const std::string& name, std::vector<std::string>* list,
                         absl::Status (*check)(absl::string_view), const std::string& help) {
  return c->add_option(name, *list, help)
      ->check(CommaList(CLI::Validator(
          [check](std::string& item) -> std::string {
            const absl::Status s = check(item);
            return s.ok() ? "" : std::string(s.message());
          },
          "")));
}

void AddCorsFlags(CLI::App* c, server::CorsOptions* o) {
  AddCorsList(c, "--allowed-origins", &o->allowed_origins, server::CheckCorsOrigin,
              "Origins (scheme://host[:port], or *) whose browser pages may call the HTTP API "
              "(CORS); comma-separate or repeat. Default: none, no CORS headers");
  AddCorsList(c, "--allowed-methods", &o->allowed_methods, server::CheckCorsMethod,
              "CORS preflight's allowed methods (* : GET, HEAD, POST)")
      ->capture_default_str();
  AddCorsList(c, "--allowed-headers", &o->allowed_headers, server::CheckCorsHeader,
              "CORS preflight's allowed request headers (* : those the preflight asks for)")
      ->capture_default_str();
  c->add_flag("--allow-credentials", o->allow_credentials,
              "CORS: Access-Control-Allow-Credentials: true (the origin is echoed, never *)");
}

void AddCnnFlags(CLI::App* c, server::CnnOptions* o) {
  c->add_option("--cnn-model", o->models,
                "Serve this CNN (built-in name or graph JSON) over inference.GRPCInferenceService "
                "(KServe v2); repeat or comma-separate for several")
      ->check(CommaList());
  c->add_option("--cnn-cluster", o->cluster, "Cluster the CNN models are partitioned over")
      ->capture_default_str();
  AddEnumFlag(c, "--cnn-policy", engine::cnn::PlanPolicyNames(), &o->policy,
              "Partition policy of the CNN models (as neupims cnn plan --policy)");
  c->add_option("--cnn-alpha", o->alpha, "Weight of time against energy (DONNA eq. 1)")
      ->check(InRange(option_ranges::kCnnAlpha))
      ->capture_default_str();
  AddEnumFlag(c, "--cnn-input-datatype", server::CnnDatatypeNames(), &o->input_datatype,
              "Datatype of the CNN models' input tensors (the output is FP32)");
  c->add_option("--cnn-max-batch", o->max_batch, "Most images per CNN request")
      ->check(CLI::Range(option_ranges::kCnnMaxBatch.min, option_ranges::kCnnMaxBatch.max))
      ->capture_default_str();
}

}  // namespace

void RegisterServeCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* c = app.add_subcommand(
      "serve",
      "Serve neupims.v1.LlmService over gRPC (with health, reflection and Prometheus /metrics) "
      "and the OpenAI-compatible HTTP API on the simulated device; SIGTERM / SIGINT drain and "
      "stop");
  c->add_option("--config", f->config,
                "Server config JSON (docs/api.md); flags given on the command line override it");
  AddEngineFlags(c, &f->engine);
  c->add_option("--bind", f->bind, "Address to listen on")->capture_default_str();
  c->add_option("--port", f->port, "gRPC port (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  c->add_option("--metrics-port", f->metrics_port,
                "Prometheus /metrics port (0: any free port, -1: none)")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  c->add_option("--http-port", f->http_port,
                "OpenAI-compatible HTTP API port (/v1/completions, /v1/chat/completions, "
                "/v1/models, /health, /metrics; 0: any free port, -1: none)")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  AddEnumFlag(c, "--pacing", server::PacingNames(), &f->pacing,
              "realtime: simulated time follows the wall clock (x --speed); fast: as fast as "
              "possible, timestamps simulated");
  c->add_option("--speed", f->speed, "Simulated seconds per wall second in realtime pacing")
      ->check(InRange(option_ranges::kSpeed))
      ->capture_default_str();
  c->add_option("--max-waiting", f->max_waiting,
                "Admission control: requests queued for admission before RESOURCE_EXHAUSTED "
                "(0: unbounded)")
      ->check(InRange(option_ranges::kMaxWaiting))
      ->capture_default_str();
  c->add_option("--drain-timeout", f->drain_timeout_s,
                "Seconds to let in-flight requests finish on shutdown")
      ->check(InRange(option_ranges::kDrainTimeoutS))
      ->capture_default_str();
  c->add_option("--mean-output-tokens", f->mean_output_tokens,
                "Mean length of synthetic completions (requests without ignore_eos)")
      ->check(InRange(option_ranges::kMeanOutputTokens))
      ->capture_default_str();
  c->add_option("--max-message-bytes", f->max_message_bytes,
                "Largest request accepted, in bytes (gRPC message: RESOURCE_EXHAUSTED beyond; "
                "HTTP body: 413)")
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 30))
      ->capture_default_str();
  c->add_option("--max-prompt-tokens", f->max_prompt_tokens,
                "Longest prompt accepted, in tokens (INVALID_ARGUMENT / HTTP 413 beyond; 0: the "
                "model's context is the only limit)")
      ->check(InRange(option_ranges::kMaxPromptTokens))
      ->capture_default_str();
  c->add_option("--max-stream-buffer", f->max_stream_buffer,
                "Tokens a gRPC stream may hold that its client has not read; beyond, the stream "
                "ends with RESOURCE_EXHAUSTED and the request is aborted (0: unbounded)")
      ->check(InRange(option_ranges::kMaxStreamBuffer))
      ->capture_default_str();
  c->add_option("--max-concurrent-streams", f->max_concurrent_streams,
                "Calls one gRPC connection may have open at once (HTTP/2 "
                "SETTINGS_MAX_CONCURRENT_STREAMS); a client past it loses its connection")
      ->check(InRange(option_ranges::kMaxConcurrentStreams))
      ->capture_default_str();
  c->add_option("--http-threads", f->http_threads,
                "HTTP connections served at once (each open SSE stream holds one); the threads "
                "all start with the server and count against a process limit (ulimit -u)")
      ->check(CLI::Range(1, server::kMaxHttpThreads))
      ->capture_default_str();
  AddSecurityFlags(c, &f->security);
  AddCorsFlags(c, &f->cors);
  AddCnnFlags(c, &f->cnn);
  c->callback([f, c, exit_code] {
    server::ServerOptions o;
    // --max-waiting 0: unbounded.
    const std::optional<int64_t> max_waiting_flag =
        f->max_waiting > 0 ? std::optional<int64_t>(f->max_waiting) : std::nullopt;
    o.runner.engine.max_waiting = max_waiting_flag;
    if (!f->config.empty()) {
      absl::Status s = server::LoadServerConfig(f->config, &o);
      if (!s.ok()) {
        *exit_code = ReportError(s);
        return;
      }
    }
    // Command-line flags that were given override the config file.
    auto given = [&](const char* name) { return c->get_option(name)->count() > 0; };
    const engine::EngineOptions& flags = f->engine.options;
    engine::EngineOptions& e = o.runner.engine;
    if (f->config.empty()) {
      const std::optional<int64_t> max_waiting = e.max_waiting;
      e = flags;
      e.max_waiting = max_waiting;
    } else {
      if (given("--model")) e.model = flags.model;
      if (given("--mode")) e.mode = flags.mode;
      if (given("--device")) e.device = flags.device;
      if (given("--tp")) e.tp = flags.tp;
      if (given("--pp")) e.pp = flags.pp;
      if (given("--max-batch")) e.max_batch = flags.max_batch;
      if (given("--prefill")) e.prefill = flags.prefill;
      if (given("--level")) e.level = flags.level;
      if (given("--dual-row-buffers")) e.dual_row_buffers = flags.dual_row_buffers;
      if (given("--sub-batch")) e.sub_batch_interleaving = flags.sub_batch_interleaving;
      if (given("--channel-policy")) e.channel_policy = flags.channel_policy;
      if (given("--mha-estimator")) e.mha_estimator = flags.mha_estimator;
      if (given("--sbi-min-batch")) e.sbi_min_batch = flags.sbi_min_batch;
      if (given("--max-prefill-tokens")) e.max_prefill_tokens = flags.max_prefill_tokens;
      if (given("--block-tokens")) e.block_tokens = flags.block_tokens;
      if (given("--prefill-groups")) e.prefill_groups = flags.prefill_groups;
      if (given("--prefill-link-gbps")) e.prefill_link.gb_per_s = flags.prefill_link.gb_per_s;
      if (given("--interconnect-gbps")) e.interconnect.gb_per_s = flags.interconnect.gb_per_s;
      if (given("--interconnect-latency-ns")) {
        e.interconnect.latency_ns = flags.interconnect.latency_ns;
      }
    }
    if (f->config.empty() || given("--bind")) o.bind_address = f->bind;
    if (f->config.empty() || given("--port")) o.port = f->port;
    if (f->config.empty() || given("--metrics-port")) o.metrics_port = f->metrics_port;
    if (f->config.empty() || given("--http-port")) {
      o.http_port = f->http_port >= 0 ? std::optional<int>(f->http_port) : std::nullopt;
    }
    if (f->config.empty() || given("--pacing")) o.runner.pacing = f->pacing;
    if (f->config.empty() || given("--speed")) o.runner.speed = f->speed;
    if (given("--max-waiting")) e.max_waiting = max_waiting_flag;
    if (f->config.empty() || given("--drain-timeout")) {
      o.drain_timeout = std::chrono::milliseconds(static_cast<int64_t>(f->drain_timeout_s * 1000));
    }
    if (f->config.empty() || given("--max-message-bytes")) {
      o.max_message_bytes = f->max_message_bytes;
    }
    if (f->config.empty() || given("--max-prompt-tokens")) {
      e.max_prompt_tokens =
          f->max_prompt_tokens > 0 ? std::optional<int64_t>(f->max_prompt_tokens) : std::nullopt;
    }
    if (f->config.empty() || given("--max-stream-buffer")) {
      o.max_stream_buffer = f->max_stream_buffer;
    }
    if (f->config.empty() || given("--max-concurrent-streams")) {
      o.max_concurrent_streams = f->max_concurrent_streams;
    }
    if (f->config.empty() || given("--http-threads")) o.http_threads = f->http_threads;
    if (f->config.empty() || given("--mean-output-tokens")) {
      o.runner.mean_output_tokens = f->mean_output_tokens;
    }
    server::SecurityOptions& sec = o.security;
    for (auto [flag, value, field] :
         {std::tuple{"--tls-cert", &f->security.tls_cert, &sec.tls_cert},
          std::tuple{"--tls-key", &f->security.tls_key, &sec.tls_key},
          std::tuple{"--tls-client-ca", &f->security.tls_client_ca, &sec.tls_client_ca},
          std::tuple{"--auth-token-file", &f->security.auth_token_file, &sec.auth_token_file}}) {
      if (given(flag)) *field = *value;
    }
    for (auto [flag, value, field] :
         {std::tuple{"--allowed-origins", &f->cors.allowed_origins, &o.cors.allowed_origins},
          std::tuple{"--allowed-methods", &f->cors.allowed_methods, &o.cors.allowed_methods},
          std::tuple{"--allowed-headers", &f->cors.allowed_headers, &o.cors.allowed_headers}}) {
      if (f->config.empty() || given(flag)) *field = SplitCommaList(*value);
    }
    if (f->config.empty() || given("--allow-credentials")) {
      o.cors.allow_credentials = f->cors.allow_credentials;
    }
    // Without an allowed origin (flag or config) no CORS header is sent: the other CORS flags
    // would be ignored silently.
    for (const char* flag : {"--allowed-methods", "--allowed-headers", "--allow-credentials"}) {
      if (given(flag) && o.cors.allowed_origins.empty()) {
        *exit_code = ReportError(absl::InvalidArgumentError(
            absl::StrCat(flag,
                         " needs --allowed-origins (config \"allowed_origins\"): without an "
                         "allowed origin no CORS header is sent")));
        return;
      }
    }
    if (f->config.empty() || given("--cnn-model")) o.cnn.models = SplitCommaList(f->cnn.models);
    if (f->config.empty() || given("--cnn-cluster")) o.cnn.cluster = f->cnn.cluster;
    if (f->config.empty() || given("--cnn-policy")) o.cnn.policy = f->cnn.policy;
    if (f->config.empty() || given("--cnn-alpha")) o.cnn.alpha = f->cnn.alpha;
    if (f->config.empty() || given("--cnn-max-batch")) o.cnn.max_batch = f->cnn.max_batch;
    if (f->config.empty() || given("--cnn-input-datatype")) {
      o.cnn.input_datatype = f->cnn.input_datatype;
    }
    *exit_code = server::RunServerMain(o);
  });
}

}  // namespace neupims::cli
