#include "tools/loadgen/openai_client.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tools/loadgen/metrics_scrape.h"

namespace neupims::loadgen {
namespace {

using nlohmann::json;

// What a stream's final chunks said.
struct StreamEnd {
  bool done = false;  // [DONE] arrived
  std::string finish_reason;
  double finish_s = 0;
  std::optional<json> usage, neupims, error;
};

void OnEvent(const std::string& data, const std::function<double()>& now,
             std::atomic<int64_t>* tokens, RequestResult* r, double* last_token_s, StreamEnd* end) {
  if (data == "[DONE]") {
    end->done = true;
    return;
  }
  const double t = now();
  const json j = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return;
  if (j.contains("error")) end->error = j["error"];
  if (j.contains("usage") && j["usage"].is_object()) end->usage = j["usage"];
  if (j.contains("neupims") && j["neupims"].is_object()) end->neupims = j["neupims"];
  if (!j.contains("choices") || !j["choices"].is_array()) return;
  for (const json& c : j["choices"]) {
    const json text = c.value("text", json(nullptr));
    if (text.is_string() && !text.get_ref<const std::string&>().empty()) {
      // One chunk, one token (the gRPC backend's accounting for a one-token message).
      if (r->output_tokens == 0) {
        r->ttft_s = t - r->sent_s;
      } else {
        r->itl_s.push_back(t - *last_token_s);
      }
      r->token_recv_s.push_back(t);
      ++r->output_tokens;
      *last_token_s = t;
      tokens->fetch_add(1, std::memory_order_relaxed);
    }
    if (c.contains("finish_reason") && c["finish_reason"].is_string()) {
      end->finish_reason = c["finish_reason"];
      end->finish_s = t;
    }
  }
}

void Fail(RequestResult* r, std::string code, std::string message, double now) {
  r->ok = false;
  r->error_code = std::move(code);
  r->error_message = std::move(message);
  r->e2el_s = now - r->sent_s;
}

// Fills the outcome of a stream that ended with HTTP 200, as the gRPC backend judges its final
// message.
void Conclude(const StreamEnd& e, double now, RequestResult* r) {
  if (e.error.has_value()) {
    return Fail(r, "STREAM_ERROR", e.error->value("message", e.error->dump()), now);
  }
  if (!e.done || e.finish_reason.empty()) {
    return Fail(r, "INCOMPLETE_STREAM", "the stream ended without a finish reason and [DONE]", now);
  }
  r->finish_reason = e.finish_reason;
  if (e.usage.has_value() && e.usage->value("prompt_tokens", int64_t{0}) > 0) {
    r->prompt_tokens = (*e.usage)["prompt_tokens"];
  }
  if (e.neupims.has_value()) {
    const json& n = *e.neupims;
    r->sim_queue_s = n.value("queue_time_s", 0.0);
    r->sim_ttft_s = n.value("ttft_s", 0.0);
    r->sim_tpot_s = n.value("tpot_s", 0.0);
    r->sim_e2el_s = n.value("e2e_latency_s", 0.0);
    r->pim_channel = n.value("pim_channel", -1);
    r->preemptions = n.value("preemptions", 0);
  }
  r->e2el_s = e.finish_s - r->sent_s;
  if (e.finish_reason == "abort" || e.finish_reason == "rejected") {
    r->ok = false;
    r->error_code = e.finish_reason == "rejected" ? "REJECTED" : "ABORTED";
    r->error_message = e.neupims.has_value() ? e.neupims->value("error", "") : "";
  } else if (r->output_tokens == 0) {
    r->ok = false;
    r->error_code = "NO_TOKENS";
    r->error_message = "the stream finished without any token";
  } else {
    r->ok = true;
    r->tpot_s = r->output_tokens > 1
                    ? (r->e2el_s - r->ttft_s) / static_cast<double>(r->output_tokens - 1)
                    : 0.0;
  }
}

// A `neupims:channel_kv_cache_usage_perc{channel="C",...} V` line sets usage[C] = V.
void ReadChannelUsage(absl::string_view line, std::vector<double>* usage) {
  constexpr absl::string_view kFamily = "neupims:channel_kv_cache_usage_perc{";
  constexpr absl::string_view kLabel = "channel=\"";
  if (!absl::StartsWith(line, kFamily)) return;
  const size_t label = line.find(kLabel);
  const size_t space = line.rfind(' ');
  if (label == absl::string_view::npos || space == absl::string_view::npos) return;
  const size_t start = label + kLabel.size();
  const size_t quote = line.find('"', start);
  int channel = 0;
  double value = 0;
  if (quote == absl::string_view::npos ||
      !absl::SimpleAtoi(line.substr(start, quote - start), &channel) || channel < 0 ||
      channel >= (1 << 16) || !absl::SimpleAtod(line.substr(space + 1), &value)) {
    return;
  }
  if (static_cast<size_t>(channel) >= usage->size()) usage->resize(channel + 1, 0.0);
  (*usage)[channel] = value;
}

void Authorize(const BaseUrl& url, httplib::Client* client) {
  if (!url.auth_token.empty()) client->set_bearer_token_auth(url.auth_token);
}

std::string ErrorMessage(const std::string& body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    return j["error"].value("message", body);
  }
  return body;
}

}  // namespace

std::string HostPortProblem(absl::string_view host_port) {
  // "[v6]" or "[v6]:port": the port's colon is the one after the closing bracket.
  size_t host_end = 0;
  if (absl::StartsWith(host_port, "[")) {
    host_end = host_port.find(']');
    if (host_end == absl::string_view::npos) return "IPv6 address without its closing ']'";
  }
  const size_t colon = host_port.find(':', host_end);
  if (colon == absl::string_view::npos) return "";  // no port: the scheme's default
  int port = 0;
  if (!absl::SimpleAtoi(host_port.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return absl::StrCat("port '", host_port.substr(colon + 1), "' is not in [1, 65535]");
  }
  return "";
}

absl::StatusOr<BaseUrl> ParseBaseUrl(absl::string_view text) {
  absl::string_view rest = text;
  const bool https = absl::ConsumePrefix(&rest, "https://");
  if (!https && !absl::ConsumePrefix(&rest, "http://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--base-url '", text, "': expected http://host:port or https://host:port"));
  }
  const size_t slash = rest.find('/');
  BaseUrl url;
  url.scheme_host_port = absl::StrCat(https ? "https://" : "http://", rest.substr(0, slash));
  if (rest.substr(0, slash).empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--base-url '", text, "': no host"));
  }
  if (const std::string problem = HostPortProblem(rest.substr(0, slash)); !problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--base-url '", text, "': ", problem));
  }
  if (slash != absl::string_view::npos) {
    absl::string_view prefix = absl::StripSuffix(rest.substr(slash), "/");
    prefix = absl::StripSuffix(prefix, "/v1");
    url.prefix = std::string(prefix);
  }
  return url;
}

std::unique_ptr<httplib::Client> MakeClient(const BaseUrl& url) {
  auto client = std::make_unique<httplib::Client>(url.scheme_host_port, url.tls.cert, url.tls.key);
  if (!url.tls.ca.empty()) client->set_ca_cert_path(url.tls.ca);
  Authorize(url, client.get());
  return client;
}

absl::StatusOr<ServerDescription> DescribeOpenAiServer(const BaseUrl& url, double timeout_s) {
  const std::string where = absl::StrCat(url.scheme_host_port, url.prefix, "/v1/models");
  const std::unique_ptr<httplib::Client> client = MakeClient(url);
  httplib::Client& c = *client;
  c.set_connection_timeout(std::chrono::duration<double>(std::max(0.1, timeout_s)));
  c.set_read_timeout(std::chrono::duration<double>(std::max(0.1, timeout_s)));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::string why = "no answer";
  do {
    httplib::Result res = c.Get(url.prefix + "/v1/models");
    if (!res) {
      why = httplib::to_string(res.error());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    const json j = json::parse(res->body, nullptr, /*allow_exceptions=*/false);
    if (res->status != 200 || !j.is_object() || !j.contains("data") || !j["data"].is_array() ||
        j["data"].empty()) {
      return absl::UnavailableError(absl::StrCat("cannot reach an OpenAI-compatible server at ",
                                                 where, ": HTTP ", res->status, " ", res->body));
    }
    const json& m = j["data"][0];
    ServerDescription d;
    d.address = absl::StrCat(url.scheme_host_port, url.prefix);
    d.model = m.value("id", "");
    d.max_seq_len = m.value("max_model_len", int64_t{0});
    const json n = m.value("neupims", json::object());
    d.version = n.value("version", "");
    d.device = n.value("device", "");
    d.mode = n.value("mode", "");
    d.pacing = n.value("pacing", "");
    d.speed = n.value("speed", 1.0);
    d.tokenizer = n.value("tokenizer", "");
    d.tensor_parallel = n.value("tensor_parallel", 1);
    d.pipeline_parallel = n.value("pipeline_parallel", 1);
    return d;
  } while (std::chrono::steady_clock::now() < deadline);
  return absl::UnavailableError(absl::StrCat("cannot reach an OpenAI-compatible server at ", where,
                                             ": ", why,
                                             "; is `neupims serve` running there? "
                                             "(--base-url)",
                                             absl::StartsWith(url.scheme_host_port, "https://")
                                                 ? " (https: did --tls-ca sign the server's "
                                                   "certificate? a server with --tls-client-ca "
                                                   "also needs --tls-cert and --tls-key)"
                                                 : ""));
}

absl::StatusOr<std::string> FetchApiMetrics(const BaseUrl& url, double timeout_s) {
  const std::unique_ptr<httplib::Client> client = MakeClient(url);
  httplib::Client& c = *client;
  const auto timeout = std::chrono::duration<double>(std::max(0.001, timeout_s));
  c.set_connection_timeout(timeout);
  c.set_read_timeout(timeout);
  httplib::Result res = c.Get("/metrics");
  if (!res || res->status != 200) {
    return absl::UnavailableError(absl::StrCat(
        "no metrics from ", url.scheme_host_port,
        "/metrics: ", res ? absl::StrCat("HTTP ", res->status) : httplib::to_string(res.error())));
  }
  return std::move(res->body);
}

std::optional<ServerSample> SampleOpenAiMetrics(const BaseUrl& url, double t_s) {
  const absl::StatusOr<std::string> text = FetchApiMetrics(url, 1);
  if (!text.ok()) return std::nullopt;
  std::optional<ServerSample> s = ParseServerSample(*text, t_s);
  // The same registry as the metrics port: the hardware view comes with every sample.
  if (absl::StatusOr<HardwareReading> hw = ParseHardwareReading(*text); s && hw.ok()) {
    SetHardware(*hw, &*s);
  }
  return s;
}

std::optional<ServerSample> ParseServerSample(const std::string& exposition, double t_s) {
  ServerSample s;
  s.t_s = t_s;
  int found = 0;
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    auto value = [&](absl::string_view name, double* out) {
      if (!absl::StartsWith(line, name) || line.size() <= name.size() ||
          (line[name.size()] != '{' && line[name.size()] != ' ')) {
        return;
      }
      const size_t space = line.rfind(' ');
      if (absl::SimpleAtod(line.substr(space + 1), out)) ++found;
    };
    double running = -1, waiting = -1;
    value("neupims:num_requests_running", &running);
    value("neupims:num_requests_waiting", &waiting);
    value("neupims:kv_cache_usage_perc", &s.kv_cache_usage);
    value("neupims:sim_time_seconds", &s.sim_time_s);
    if (running >= 0) s.running = static_cast<int64_t>(running);
    if (waiting >= 0) s.waiting = static_cast<int64_t>(waiting);
    ReadChannelUsage(line, &s.channel_kv_usage);
  }
  if (found == 0) return std::nullopt;
  return s;
}

void RunOpenAiRequest(httplib::Client& client, const BaseUrl& url, const OpenAiRequest& q,
                      const std::function<double()>& now, std::atomic<int64_t>* tokens,
                      RequestResult* r) {
  json body = {{"prompt", std::vector<int64_t>(static_cast<size_t>(q.prompt_tokens), 1)},
               {"max_tokens", q.max_tokens},
               {"ignore_eos", q.ignore_eos},
               {"seed", q.seed},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (!q.model.empty()) body["model"] = q.model;
  if (q.timeout_s > 0) client.set_read_timeout(std::chrono::duration<double>(q.timeout_s));
  httplib::Request req;
  req.method = "POST";
  req.path = url.prefix + "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  int status = 0;
  std::string error_body;
  SseParser sse;
  StreamEnd end;
  double last_token_s = 0;
  req.response_handler = [&status](const httplib::Response& res) {
    status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (status != 200) {
      error_body.append(data, n);
    } else {
      sse.Feed(data, n, [&](const std::string& event) {
        OnEvent(event, now, tokens, r, &last_token_s, &end);
      });
    }
    return true;
  };
  const httplib::Result res = client.send(req);
  const double t = now();
  if (!res) return Fail(r, "UNAVAILABLE", httplib::to_string(res.error()), t);
  if (status != 200) return Fail(r, absl::StrCat("HTTP_", status), ErrorMessage(error_body), t);
  Conclude(end, t, r);
}

OpenAiClientPool::~OpenAiClientPool() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void OpenAiClientPool::Run(std::function<void(httplib::Client&)> job) {
  std::lock_guard<std::mutex> l(mu_);
  jobs_.push_back(std::move(job));
  if (jobs_.size() > idle_) {
    threads_.emplace_back([this] { Worker(); });
  } else {
    cv_.notify_one();
  }
}

void OpenAiClientPool::Worker() {
  const std::unique_ptr<httplib::Client> owned = MakeClient(url_);
  httplib::Client& client = *owned;
  client.set_keep_alive(true);
  // httplib writes a request's headers and body separately: with Nagle's algorithm the body
  // would wait for the server's delayed ACK of the headers (~40 ms).
  client.set_tcp_nodelay(true);
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    ++idle_;
    cv_.wait(l, [this] { return stop_ || !jobs_.empty(); });
    --idle_;
    if (jobs_.empty()) return;  // stopping, nothing left
    std::function<void(httplib::Client&)> job = std::move(jobs_.front());
    jobs_.pop_front();
    l.unlock();
    job(client);
    l.lock();
  }
}

}  // namespace neupims::loadgen
