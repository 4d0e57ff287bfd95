// neupims-bench: the load generator (vLLM benchmark_serving style) for `neupims serve`.
//
// Role: builds a workload (tools/workload), sends every request as a neupims.v1 Generate stream
// (gRPC backend) or as a streamed POST /v1/completions (OpenAI backend, openai_client.h) at
// its arrival time (open loop: Poisson / gamma / all at once) or keeps N in flight (closed loop),
// measures each stream on the client's wall clock, keeps the simulated latencies the server
// reports in the final message, samples GetServerInfo while it runs, and summarises the run in
// both views (results.h). Usage and every metric: docs/loadgen.md.
//
// Concurrency: every stream is a gRPC callback-API reactor (ClientReadReactor); their callbacks run
// on gRPC's own small callback thread pool, so hundreds of concurrent streams cost no threads of
// their own. Besides those, a run uses the calling thread (sends requests at their arrival times)
// and one monitor thread (server samples, progress).
#ifndef NEUPIMS_TOOLS_LOADGEN_LOADGEN_H_
#define NEUPIMS_TOOLS_LOADGEN_LOADGEN_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/enum_names.h"
#include "nlohmann/json.hpp"
#include "tools/loadgen/results.h"
#include "tools/workload/workload_flags.h"

namespace grpc {
class ChannelCredentials;
class ClientContext;
}  // namespace grpc

namespace neupims::loadgen {

enum class Backend { kGrpc, kOpenAi };
// "grpc", "openai".
const EnumNames<Backend>& BackendNames();

// TLS towards a server started with --tls-cert (and --tls-client-ca for mutual TLS): PEM file
// paths (--tls-ca, --tls-cert, --tls-key). Any of them set: gRPC over TLS; the OpenAI backend
// takes an https:// --base-url and verifies the server with `ca` (the system CAs without it).
struct TlsClientOptions {
  std::string ca;    // CA certificate(s) that signed the server's certificate
  std::string cert;  // client certificate chain (mutual TLS), with `key`
  std::string key;   // its private key (unencrypted)
  bool any() const { return !ca.empty() || !cert.empty() || !key.empty(); }
};

struct LoadOptions {
  Backend backend = Backend::kGrpc;
  std::string server = "127.0.0.1:50051";          // host:port (gRPC backend)
  std::string base_url = "http://127.0.0.1:8000";  // OpenAI backend
  workload::WorkloadFlags workload;
  // "1,2,4,8": one run per rate (each overrides --request-rate; "inf" allowed). Empty: one run
  // at workload.request_rate.
  std::string sweep_rates;
  std::string model;  // empty: the server's model (GetModelInfo); otherwise must be the served one
  bool ignore_eos = true;
  SloTargets slo;
  double timeout_s = 600;        // per-request deadline; <= 0: none
  double connect_timeout_s = 3;  // reaching the server before the run
  double sample_interval_s = 0.25;
  // host:port of the server's Prometheus endpoint: sampled with GetServerInfo for the report's
  // hardware view (utilisation, power, energy per token). Empty: not read.
  std::string metrics;
  // Sent as `authorization: Bearer <token>` on every call of either backend (a server started
  // with --auth-token-file); empty: none.
  std::string auth_token;
  TlsClientOptions tls;
  bool quiet = false;    // nothing on stderr (workload report, progress)
  bool progress = true;  // progress bar on a terminal / periodic lines otherwise
};

// What the server said about itself before the first run.
struct ServerDescription {
  std::string address;
  std::string version, model, device, mode, pacing, tokenizer;
  double speed = 1;
  int64_t max_seq_len = 0;
  int tensor_parallel = 1, pipeline_parallel = 1;
};

// Client-side facts of one run that are not part of RunResult.
struct ClientStats {
  double cpu_s = 0;  // user + system CPU of the whole process during the run
  double send_lag_p99_s = 0, send_lag_max_s = 0;  // actual - intended send time (open loop)
  double achieved_send_rate = 0;                  // requests/s between the first and the last send
};

struct LoadInfo {
  ServerDescription server;
  std::string workload_description;  // of the first run
  nlohmann::json workload;           // workload::WorkloadJson of the first run
  std::vector<ClientStats> client;   // one per run
};

// The request rates of a sweep ("1,2,4,8"; "inf" allowed). Errors name --sweep-rates.
absl::StatusOr<std::vector<std::string>> ParseSweepRates(absl::string_view text);

// Checks the flags without touching the network or files (InvalidArgument naming the flag).
absl::Status ValidateOptions(const LoadOptions& options);

// --timeout-s and --connect-timeout-s within their flags' ranges (option_ranges.h), for library
// callers as well as the flags (both modes): a deadline past 1e6 s overflows the int64
// nanoseconds it becomes. INVALID_ARGUMENT naming the flag.
absl::Status CheckTimeouts(double timeout_s, double connect_timeout_s);

// The bearer token in `path` as the server reads its --auth-token-file: the first line without
// surrounding white space, visible ASCII only. INVALID_ARGUMENT naming the flag and the file.
absl::StatusOr<std::string> ReadAuthToken(const std::string& path);

// gRPC channel credentials for `tls`: plaintext when it is empty, else TLS (mutual with a client
// certificate). INVALID_ARGUMENT naming the flag for an unreadable file or a cert without a key.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const TlsClientOptions& tls);

// What to add to a "cannot connect" message about TLS: the flag a TLS server needs, or what to
// check when TLS was asked for.
std::string TlsHint(const TlsClientOptions& tls);

// Adds the server's bearer token (when not empty) to a call as gRPC metadata. Plaintext
// channels too: gRPC's own token call credentials refuse to send it without TLS.
void Authorize(const std::string& token, grpc::ClientContext* ctx);

// Connects (Unavailable "cannot reach neupims server at <addr>: ..." within connect_timeout_s),
// builds the workload (errors name the file / flag; zero requests is an error) and runs it once
// per rate. Runs with failed requests are results, not errors. Each RunResult is summarised with
// options.slo. `info` (optional) receives the server description and client stats.
absl::StatusOr<std::vector<RunResult>> RunLoad(const LoadOptions& options,
                                               LoadInfo* info = nullptr);

// The vLLM-style text summary of one run (both views), and the sweep table.
void PrintSummary(const RunResult& run, const SloTargets& slo, const ClientStats* client,
                  FILE* out);
void PrintSweepTable(const std::vector<RunResult>& runs, FILE* out);

// The --result-json document: one run -> RunJson plus "date", "backend", "model_id",
// "tokenizer_id", "settings"; several -> {"settings", "runs": [RunJson...]}.
nlohmann::json ResultJson(const std::vector<RunResult>& runs, const LoadOptions& options,
                          const LoadInfo& info);

// "out.csv" + run at 4 req/s -> "out.rate4.csv" (used for sweeps).
std::string SuffixedPath(const std::string& path, const RunResult& run);
// The per-run files of a sweep: SuffixedPath for each run, and where runs share a tag (with
// --max-concurrency every rate is `inf`, so all runs do), `.run<k>` after it (k from 1, in run
// order), so no run overwrites another's file.
std::vector<std::string> SweepPaths(const std::string& path, const std::vector<RunResult>& runs);

}  // namespace neupims::loadgen

#endif  // NEUPIMS_TOOLS_LOADGEN_LOADGEN_H_
