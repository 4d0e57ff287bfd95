#include "server/server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/config_enum.h"
#include "common/config_reader.h"
#include "common/enum_names.h"
#include "common/option_ranges.h"
#include "common/status_macros.h"
#include "engine/system_mode.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "hw/cluster/cluster.h"
#include "hw/device.h"
#include "models/cnn/graph.h"
#include "models/model_config.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"
#include "server/cnn_service.h"
#include "server/grpc_credentials.h"
#include "server/llm_service.h"
#include "server/metrics.h"
#include "server/openai_api.h"
#include "server/start_thread.h"

namespace neupims::server {
namespace {

// Threads asked for before gRPC starts (CheckThreadHeadroom): ~10 at start (its executor, timer
// manager, sync-server thread manager and event engine) plus room to grow under load (measured:
// 21 threads in a server with 8 HTTP threads).
constexpr int kGrpcThreadHeadroom = 32;

void ReadEngineOptions(ConfigObject& root, engine::EngineOptions* e) {
  e->model = root.OptionalString("model", e->model);
  if (root.Has("device")) e->device = root.OptionalString("device", "");
  ReadEnum(root, "mode", engine::SystemModeNames(), &e->mode);
  // Absent: the model's default parallelism (Table 3).
  for (auto [key, field] : {std::pair{"tp", &e->tp}, std::pair{"pp", &e->pp}}) {
    if (root.Has(key)) *field = static_cast<int>(root.Int(key, {.min = 1, .max = 64}));
  }
  e->max_batch =
      static_cast<int>(root.OptionalInt("max_batch", e->max_batch, {.min = 1, .max = 1 << 16}));
  e->sbi_min_batch = static_cast<int>(
      root.OptionalInt("sbi_min_batch", e->sbi_min_batch, {.min = 1, .max = 1 << 20}));
  e->max_prefill_tokens = root.OptionalInt("max_prefill_tokens", e->max_prefill_tokens,
                                           {.min = 1, .max = int64_t{1} << 30});
  e->block_tokens =
      static_cast<int>(root.OptionalInt("block_tokens", e->block_tokens, {.min = 1, .max = 4096}));
  e->prefill_groups = static_cast<int>(
      root.OptionalInt("prefill_groups", e->prefill_groups, {.min = 1, .max = 1024}));
  e->prefill_link.gb_per_s =
      root.OptionalDouble("prefill_link_gbps", e->prefill_link.gb_per_s, option_ranges::kLinkGbps);
  e->interconnect.gb_per_s =
      root.OptionalDouble("interconnect_gbps", e->interconnect.gb_per_s, option_ranges::kLinkGbps);
  e->interconnect.latency_ns = root.OptionalDouble(
      "interconnect_latency_ns", e->interconnect.latency_ns, option_ranges::kLinkLatencyNs);
  ReadEnum(root, "prefill", engine::PrefillPlacementNames(), &e->prefill);
  ReadEnum(root, "level", hw::DetailLevelNames(), &e->level);
  ReadEnum(root, "mha_estimator", engine::MhaEstimatorNames(), &e->mha_estimator);
  ReadOptionalEnum(root, "channel_policy", scheduler::ChannelPolicyNames(), &e->channel_policy);
  ReadOptionalEnum(root, "sub_batch", engine::SubBatchInterleavingNames(),
                   &e->sub_batch_interleaving);
  if (root.Has("dual_row_buffers")) {
    e->dual_row_buffers = root.OptionalBool("dual_row_buffers", false);
  }
  if (absl::Status s = engine::CheckDualRowBuffers(e->mode, e->dual_row_buffers); !s.ok()) {
    root.Error("dual_row_buffers", s.message());
  }
  // 0: the model's context is the only limit.
  const int64_t max_prompt = root.OptionalInt("max_prompt_tokens", e->max_prompt_tokens.value_or(0),
                                              option_ranges::kMaxPromptTokens);
  e->max_prompt_tokens = max_prompt > 0 ? std::optional<int64_t>(max_prompt) : std::nullopt;
  // 0: unbounded.
  const int64_t max_waiting =
      root.OptionalInt("max_waiting", e->max_waiting.value_or(0), option_ranges::kMaxWaiting);
  e->max_waiting = max_waiting > 0 ? std::optional<int64_t>(max_waiting) : std::nullopt;
}

// Plaintext without security options (gRPC's own insecure credentials, as before); otherwise
// TLS and / or the token check, refusals counted as request errors.
std::shared_ptr<grpc::ServerCredentials> GrpcCredentials(std::shared_ptr<const Security> security,
                                                         ServerMetrics* metrics) {
  if (!security->tls() && !security->token()) return grpc::InsecureServerCredentials();
  return MakeGrpcServerCredentials(std::move(security), [metrics] {
    if (metrics != nullptr) metrics->OnRequestError("UNAUTHENTICATED");
  });
}

// ", TLS, client certificates, bearer token" as configured, for the start-up banner.
std::string SecuritySummary(const SecurityOptions& o) {
  std::string out;
  if (o.tls()) absl::StrAppend(&out, ", TLS");
  if (!o.tls_client_ca.empty()) absl::StrAppend(&out, ", client certificates");
  if (o.token()) absl::StrAppend(&out, ", bearer token (not for health)");
  return out;
}

// The bind address's spelling: an IP address (IPv6 bare or in gRPC's brackets) or a host name
// (RFC 1123 labels). Only the spelling: reading a config file does no name lookup, which could
// wait seconds for DNS (and would make the config fuzzer's inputs slow); a well-spelt name that
// does not resolve is refused when the server starts (CheckBindAddress).
absl::Status CheckBindAddressSpelling(absl::string_view host) {
  absl::string_view bare = host;
  if (bare.size() > 2 && bare.front() == '[' && bare.back() == ']') {
    bare = bare.substr(1, bare.size() - 2);
  }
  in6_addr v6;
  if (absl::StrContains(bare, ':') && inet_pton(AF_INET6, std::string(bare).c_str(), &v6) == 1) {
    return absl::OkStatus();
  }
  absl::string_view name = absl::StripSuffix(host, ".");
  bool ok = !name.empty() && name.size() <= 253;
  for (absl::string_view label : absl::StrSplit(name, '.')) {
    if (!ok) break;
    ok = !label.empty() && label.size() <= 63 && label.front() != '-' && label.back() != '-' &&
         std::all_of(label.begin(), label.end(),
                     [](char c) { return absl::ascii_isalnum(c) || c == '-'; });
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "'", absl::CHexEscape(host),
      "' is neither an IP address nor a host name (letters, digits, '-' and '.'; default "
      "127.0.0.1)"));
}

// A model or device the file names is loaded here, so a wrong one is an error naming the file
// and the field, not the engine's later "no built-in models config" naming neither.
void CheckModelAndDevice(ConfigObject& root, const engine::EngineOptions& e) {
  if (root.Has("model")) {
    if (absl::Status s = models::LoadModelConfig(e.model).status(); !s.ok()) {
      root.Error("model", s.message());
    }
  }
  if (root.Has("device") && e.device) {
    if (absl::Status s = hw::LoadDeviceConfig(*e.device).status(); !s.ok()) {
      root.Error("device", s.message());
    }
  }
}

// As CheckModelAndDevice: the CNN graphs and the cluster the file names are loaded here, so a
// wrong one names the file and the field (the server loads them again when it starts).
void CheckCnnModelsAndCluster(ConfigObject& root, const CnnOptions& c) {
  if (root.Has("cnn_models")) {
    for (size_t i = 0; i < c.models.size(); ++i) {
      if (absl::Status s = models::cnn::LoadGraph(c.models[i]).status(); !s.ok()) {
        root.Error(absl::StrCat("cnn_models[", i, "]"), s.message());
      }
    }
  }
  if (root.Has("cnn_cluster")) {
    if (absl::Status s = hw::cluster::LoadCluster(c.cluster).status(); !s.ok()) {
      root.Error("cnn_cluster", s.message());
    }
  }
}

void ReadCnnOptions(ConfigObject& root, CnnOptions* c) {
  if (root.Has("cnn_models")) c->models = root.StringList("cnn_models");
  c->cluster = root.OptionalString("cnn_cluster", c->cluster);
  CheckCnnModelsAndCluster(root, *c);
  ReadEnum(root, "cnn_policy", engine::cnn::PlanPolicyNames(), &c->policy);
  c->alpha = root.OptionalDouble("cnn_alpha", c->alpha, option_ranges::kCnnAlpha);
  ReadEnum(root, "cnn_input_datatype", CnnDatatypeNames(), &c->input_datatype);
  c->max_batch = static_cast<int>(
      root.OptionalInt("cnn_max_batch", c->max_batch, option_ranges::kCnnMaxBatch));
}

// A CORS list (cors.h): each item checked as the flag's are, an error naming the key and the item.
void ReadCorsList(ConfigObject& root, const char* key, absl::Status (*check)(absl::string_view),
                  std::vector<std::string>* list) {
  if (!root.Has(key)) return;
  *list = root.StringList(key);
  for (size_t i = 0; i < list->size(); ++i) {
    if (absl::Status s = check((*list)[i]); !s.ok()) {
      root.Error(absl::StrCat(key, "[", i, "]"), s.message());
    }
  }
}

void ReadCorsOptions(ConfigObject& root, CorsOptions* c) {
  ReadCorsList(root, "allowed_origins", CheckCorsOrigin, &c->allowed_origins);
  ReadCorsList(root, "allowed_methods", CheckCorsMethod, &c->allowed_methods);
  ReadCorsList(root, "allowed_headers", CheckCorsHeader, &c->allowed_headers);
  c->allow_credentials = root.OptionalBool("allow_credentials", c->allow_credentials);
  // Without an allowed origin no CORS header is sent: the other keys would be ignored silently.
  if (c->allowed_origins.empty()) {
    for (const char* key : {"allowed_methods", "allowed_headers", "allow_credentials"}) {
      if (root.Has(key)) {
        root.Error(key,
                   "needs allowed_origins (--allowed-origins): without an allowed origin no "
                   "CORS header is sent");
      }
    }
  }
}

// Reads every field of a server config document into `o`.
absl::Status ReadServerConfig(ConfigDocument& doc, ServerOptions* o) {
  ConfigObject root = doc.Root();
  ReadEngineOptions(root, &o->runner.engine);
  CheckModelAndDevice(root, o->runner.engine);
  o->bind_address = root.OptionalString("bind_address", o->bind_address);
  if (root.Has("bind_address")) {
    if (absl::Status s = CheckBindAddressSpelling(o->bind_address); !s.ok()) {
      root.Error("bind_address", s.message());
    }
  }
  o->port = static_cast<int>(root.OptionalInt("port", o->port, {.min = 0, .max = 65535}));
  o->metrics_port = static_cast<int>(
      root.OptionalInt("metrics_port", o->metrics_port, {.min = -1, .max = 65535}));
  // -1: no HTTP API.
  const int64_t http_port =
      root.OptionalInt("http_port", o->http_port.value_or(-1), {.min = -1, .max = 65535});
  o->http_port = http_port >= 0 ? std::optional<int>(static_cast<int>(http_port)) : std::nullopt;
  ReadEnum(root, "pacing", PacingNames(), &o->runner.pacing);
  o->runner.speed = root.OptionalDouble("speed", o->runner.speed, option_ranges::kSpeed);
  o->runner.mean_output_tokens = root.OptionalDouble(
      "mean_output_tokens", o->runner.mean_output_tokens, option_ranges::kMeanOutputTokens);
  o->max_message_bytes = root.OptionalInt("max_message_bytes", o->max_message_bytes,
                                          {.min = 1024, .max = int64_t{1} << 30});
  o->max_stream_buffer =
      root.OptionalInt("max_stream_buffer", o->max_stream_buffer, option_ranges::kMaxStreamBuffer);
  o->max_concurrent_streams = static_cast<int>(root.OptionalInt(
      "max_concurrent_streams", o->max_concurrent_streams, option_ranges::kMaxConcurrentStreams));
  o->http_threads = static_cast<int>(
      root.OptionalInt("http_threads", o->http_threads, {.min = 1, .max = kMaxHttpThreads}));
  const double drain_s = root.OptionalDouble("drain_timeout_s", o->drain_timeout.count() / 1000.0,
                                             option_ranges::kDrainTimeoutS);
  o->drain_timeout = std::chrono::milliseconds(static_cast<int64_t>(drain_s * 1000));
  SecurityOptions& sec = o->security;
  sec.tls_cert = root.OptionalString("tls_cert", sec.tls_cert);
  sec.tls_key = root.OptionalString("tls_key", sec.tls_key);
  sec.tls_client_ca = root.OptionalString("tls_client_ca", sec.tls_client_ca);
  sec.auth_token_file = root.OptionalString("auth_token_file", sec.auth_token_file);
  ReadCorsOptions(root, &o->cors);
  ReadCnnOptions(root, &o->cnn);
  root.Finish();
  return doc.status();
}

}  // namespace

absl::Status LoadServerConfig(const std::string& path, ServerOptions* o) {
  ASSIGN_OR_RETURN(auto doc, ConfigDocument::FromFile(path));
  return ReadServerConfig(*doc, o);
}

absl::Status ParseServerConfig(absl::string_view text, absl::string_view source, ServerOptions* o) {
  ASSIGN_OR_RETURN(auto doc, ConfigDocument::FromString(text, std::string(source)));
  return ReadServerConfig(*doc, o);
}

struct Server::Impl {
  std::shared_ptr<prometheus::Registry> registry;
  std::unique_ptr<prometheus::Exposer> exposer;
  std::unique_ptr<ServerMetrics> metrics;
  std::unique_ptr<LlmServiceImpl> service;
  std::unique_ptr<InferenceServiceImpl> cnn_service;
  std::unique_ptr<grpc::Server> grpc_server;
  std::unique_ptr<OpenAiHttpServer> http;
  std::shared_ptr<const Security> security;
  bool shut_down = false;
};

Server::Server(const ServerOptions& options) : options_(options), impl_(std::make_unique<Impl>()) {}

Server::~Server() { Shutdown(); }

std::string Server::address() const { return absl::StrCat(options_.bind_address, ":", port_); }

namespace {

// The bind address must name a local interface: a name that does not resolve is an error saying
// so, before gRPC or the metrics exposer log their own, vaguer failures (issue 17).
absl::Status CheckBindAddress(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  // gRPC's spelling of IPv6 addresses ("[::1]") is not getaddrinfo's.
  std::string name = host;
  if (name.size() > 2 && name.front() == '[' && name.back() == ']') {
    name = name.substr(1, name.size() - 2);
  }
  const int rc = getaddrinfo(name.c_str(), nullptr, &hints, &found);
  if (found != nullptr) freeaddrinfo(found);
  if (rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bind address '", host, "' does not resolve (", gai_strerror(rc),
                     "); give an IP address or a local host name (default 127.0.0.1)"));
  }
  return absl::OkStatus();
}

// The port's message limit: --max-message-bytes, raised to what a ModelInfer of
// --cnn-max-batch images needs when CNN models are served (the LLM service then checks its own
// requests against --max-message-bytes).
int64_t GrpcReceiveLimit(const ServerOptions& options, const CnnRunner* cnn) {
  if (cnn == nullptr) return options.max_message_bytes;
  std::vector<const CnnModel*> models;
  for (const auto& m : cnn->models()) models.push_back(m.get());
  return std::max(options.max_message_bytes,
                  InferenceServiceImpl::MaxRequestBytes(models, cnn->options().max_batch,
                                                        cnn->options().input_datatype));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  RETURN_IF_ERROR(CheckBindAddress(options.bind_address));
  std::unique_ptr<Server> s(new Server(options));
  Impl& im = *s->impl_;
  // The security files first: a bad one fails before the engine is built or anything listens.
  ASSIGN_OR_RETURN(im.security, Security::Load(options.security));
  if (options.security.any() && options.metrics_port >= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics-port (config \"metrics_port\") ", options.metrics_port,
        ": the separate metrics port has neither TLS nor the token check; with TLS or a token "
        "set it to -1 and scrape /metrics on the HTTP API's port, which has both"));
  }
  im.registry = std::make_shared<prometheus::Registry>();
  // The engine first: a bad model / device / mode fails before anything listens.
  ASSIGN_OR_RETURN(s->runner_, EngineRunner::Create(options.runner, nullptr));
  const std::shared_ptr<const ServedEngine> served = s->runner_->Snapshot().served;
  im.metrics = std::make_unique<ServerMetrics>(im.registry, served->model.name, served->device,
                                               served->parallelism.devices());
  s->runner_->SetMetrics(im.metrics.get());
  if (options.metrics_port >= 0) {
    try {
      im.exposer = std::make_unique<prometheus::Exposer>(
          absl::StrCat(options.bind_address, ":", options.metrics_port));
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", options.bind_address,
                                                 ":", options.metrics_port, ": ", e.what()));
    }
    im.exposer->RegisterCollectable(im.registry);
    const std::vector<int> ports = im.exposer->GetListeningPorts();
    s->metrics_port_ = ports.empty() ? options.metrics_port : ports.front();
  }
  im.service =
      std::make_unique<LlmServiceImpl>(s->runner_.get(), im.metrics.get(), kVersion,
                                       options.max_stream_buffer, options.max_message_bytes);
  if (options.cnn.any()) {
    ASSIGN_OR_RETURN(s->cnn_runner_, CnnRunner::Create(options.cnn, options.runner.pacing,
                                                       options.runner.speed, im.metrics.get()));
    im.cnn_service =
        std::make_unique<InferenceServiceImpl>(s->cnn_runner_.get(), im.metrics.get(), kVersion);
    im.service->SetCnnRunner(s->cnn_runner_.get());
  }
  grpc::EnableDefaultHealthCheckService(true);
  // gRPC serves health from its own upb code: without this file's descriptor in the protobuf
  // pool, reflection lists grpc.health.v1.Health but cannot describe it, and grpcurl cannot call
  // it (proto/grpc/health/v1/health.proto). Naming the descriptor links the file in.
  grpc::health::v1::HealthCheckRequest::descriptor();
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default on Linux, which lets a second server bind a port already
  // in use and silently share its connections; a port in use must be an error instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(absl::StrCat(options.bind_address, ":", options.port),
                           GrpcCredentials(im.security, im.metrics.get()), &s->port_);
  // gRPC advertises no limit by default; a client past this one loses its connection.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(GrpcReceiveLimit(options, s->cnn_runner_.get())));
  builder.RegisterService(im.service.get());
  // Registered before BuildAndStart, so the reflection plugin lists it too.
  if (im.cnn_service != nullptr) builder.RegisterService(im.cnn_service.get());
  // gRPC starts ~10 threads of its own here and more under load, and aborts when one is refused.
  RETURN_IF_ERROR(CheckThreadHeadroom(kGrpcThreadHeadroom, "gRPC"));
  im.grpc_server = builder.BuildAndStart();
  if (im.grpc_server == nullptr || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.bind_address, ":",
                                               options.port, " (in use or not permitted)"));
  }
  grpc::HealthCheckServiceInterface* health = im.grpc_server->GetHealthCheckService();
  health->SetServingStatus("", true);
  health->SetServingStatus("neupims.v1.LlmService", true);
  if (im.cnn_service != nullptr) health->SetServingStatus("inference.GRPCInferenceService", true);
  // A broken invariant stops the engine: health NOT_SERVING (the engine thread calls this; it is
  // joined in Shutdown before the gRPC server goes).
  s->runner_->SetFaultHandler([health](const absl::Status&) { health->SetServingStatus(false); });
  if (options.http_port.has_value()) {
    HttpOptions http;
    http.bind_address = options.bind_address;
    http.port = *options.http_port;
    http.threads = options.http_threads;
    http.max_body_bytes = options.max_message_bytes;
    http.max_stream_buffer = options.max_stream_buffer;
    http.write_timeout = options.http_write_timeout;
    http.request_read_timeout = options.http_request_read_timeout;
    http.max_parked_bytes = options.http_max_parked_bytes;
    http.version = kVersion;
    http.cors = options.cors;
    if (options.security.any()) http.security = im.security;
    ASSIGN_OR_RETURN(
        im.http, OpenAiHttpServer::Start(http, s->runner_.get(), im.metrics.get(), im.registry));
    s->http_port_ = im.http->port();
  }
  return s;
}

bool Server::Drain() {
  Impl& im = *impl_;
  if (im.grpc_server != nullptr) {
    im.grpc_server->GetHealthCheckService()->SetServingStatus(false);
  }
  runner_->BeginDrain();
  if (cnn_runner_ != nullptr) cnn_runner_->BeginDrain();
  if (im.metrics != nullptr) im.metrics->SetDraining(true);
  const auto deadline = std::chrono::steady_clock::now() + options_.drain_timeout;
  bool drained = runner_->WaitDrained(options_.drain_timeout);
  if (cnn_runner_ != nullptr) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    drained = cnn_runner_->WaitDrained(std::max(left, std::chrono::milliseconds(0))) && drained;
  }
  return drained;
}

void Server::Shutdown() {
  Impl& im = *impl_;
  if (im.shut_down) return;
  im.shut_down = true;
  if (im.grpc_server != nullptr) im.grpc_server->GetHealthCheckService()->SetServingStatus(false);
  // Abort what is left so every stream ends with a final message, then stop gRPC.
  if (runner_ != nullptr) runner_->Stop();
  if (cnn_runner_ != nullptr) cnn_runner_->Stop();
  if (im.grpc_server != nullptr) {
    im.grpc_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
  // Every HTTP stream has its completion by now (Stop above), so its thread finishes.
  if (im.http != nullptr) im.http->Stop();
  im.exposer.reset();
}

int RunServerMain(const ServerOptions& options) {
  // Block the signals in every thread; this thread waits for them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  auto server = Server::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(server.status().message()).c_str());
    return server.status().code() == absl::StatusCode::kInvalidArgument ||
                   server.status().code() == absl::StatusCode::kNotFound
               ? 2
               : 1;
  }
  Server& s = **server;
  const std::shared_ptr<const ServedEngine> served = s.runner().Snapshot().served;
  const std::string security = SecuritySummary(options.security);
  std::fprintf(stderr,
               "neupims serve: %s on %s (%s, TP %d x PP %d), %s pacing x%g\n"
               "  gRPC   %s  (neupims.v1.LlmService, grpc.health.v1.Health, reflection%s)\n",
               served->model.name.c_str(), served->device.name.c_str(), served->mode.c_str(),
               served->parallelism.tp, served->parallelism.pp, ToString(options.runner.pacing),
               options.runner.speed, s.address().c_str(), security.c_str());
  if (const CnnRunner* cnn = s.cnn_runner(); cnn != nullptr) {
    std::fprintf(stderr,
                 "  CNN    %s on %s, policy %s (alpha %g)  (inference.GRPCInferenceService)\n",
                 cnn->ModelList().c_str(), options.cnn.cluster.c_str(),
                 engine::cnn::PlanPolicyNames().ToString(options.cnn.policy), options.cnn.alpha);
    for (const auto& m : cnn->models()) {
      std::fprintf(stderr, "         %s: %s\n", m->name.c_str(), m->partition.c_str());
    }
  }
  if (s.http_port().has_value()) {
    std::fprintf(stderr,
                 "  HTTP   %s://%s:%d/v1  (OpenAI-compatible: completions, chat, models%s)\n",
                 options.security.tls() ? "https" : "http", options.bind_address.c_str(),
                 *s.http_port(), security.c_str());
  }
  if (s.metrics_port() >= 0) {
    std::fprintf(stderr, "  metrics http://%s:%d/metrics\n", options.bind_address.c_str(),
                 s.metrics_port());
  }
  const std::string warning = BindWarning(options.bind_address, options.security);
  if (!warning.empty()) std::fprintf(stderr, "%s\n", warning.c_str());
  std::fflush(stderr);
  int sig = 0;
  sigwait(&set, &sig);
  std::fprintf(stderr, "neupims serve: %s received, draining (up to %.1f s)\n",
               sig == SIGTERM ? "SIGTERM" : "SIGINT", options.drain_timeout.count() / 1000.0);
  const bool drained = s.Drain();
  s.Shutdown();
  std::fprintf(stderr, "neupims serve: %s, stopped\n",
               drained ? "all requests finished" : "drain timeout: remaining requests aborted");
  return 0;
}

}  // namespace neupims::server
