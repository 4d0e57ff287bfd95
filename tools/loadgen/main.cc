// neupims-bench: load generator for `neupims serve` (docs/loadgen.md).
//
// Exit codes: 0 the run(s) completed (failed requests are reported, not fatal); 1 setup errors
// (unreachable server, unreadable or malformed files, zero requests, unwritable outputs); 2 bad
// flags. Out of memory (a workload beyond a ulimit): "error: out of memory", exit code 1.
#include <signal.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/file_io.h"
#include "common/out_of_memory.h"
#include "tools/loadgen/cnn_load.h"
#include "tools/loadgen/loadgen.h"
#include "tools/loadgen/report.h"
#include "tools/loadgen/results.h"
#include "tools/loadgen/security_flags.h"
#include "tools/neupims/enum_flag.h"
#include "tools/workload/range_flag.h"
#include "tools/workload/workload_flags.h"

namespace {

using neupims::loadgen::LoadInfo;
using neupims::loadgen::LoadOptions;
using neupims::loadgen::RunResult;

// Writes `text` to `path`, creating its parent directories; errors name the flag and the path.
absl::Status WriteOutput(const std::string& path, const std::string& text, const char* flag) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  const absl::Status written = neupims::WriteFile(path, text);
  if (written.ok()) return written;
  return absl::Status(written.code(), absl::StrCat(flag, " ", written.message()));
}

std::string Now() {
  char text[64] = {0};
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S %Z", &tm);
  return text;
}

// The whole run; main() turns running out of memory into an error line and exit code 1.
int RunBench(int argc, char** argv) {
  LoadOptions o;
  std::string result_json, result_csv, report_dir, auth_token_file;
  CLI::App app(
      "neupims-bench: replay a workload through a neupims server over gRPC or its "
      "OpenAI-compatible HTTP API and report latency and throughput as the client sees it (wall "
      "clock) and as the simulated hardware does (docs/loadgen.md)");
  neupims::cli::AddEnumFlag(&app, "--backend", neupims::loadgen::BackendNames(), &o.backend,
                            "grpc: neupims.v1 Generate streams to --server; openai: streamed POST "
                            "/v1/completions to --base-url");
  app.add_option("--server", o.server, "gRPC server address host:port (--backend grpc)")
      ->capture_default_str();
  app.add_option(
         "--base-url", o.base_url,
         "OpenAI-compatible server, http://host:port or https://host:port (--backend openai)")
      ->capture_default_str();
  neupims::workload::AddWorkloadFlags(&app, &o.workload);
  app.add_option("--sweep-rates", o.sweep_rates,
                 "Comma-separated request rates, one run each (e.g. 1,2,4,8; inf allowed); "
                 "overrides --request-rate");
  app.add_option("--model", o.model,
                 "Model to request (default: the server's, from GetModelInfo); its context "
                 "length filters the workload");
  // Two flags, not "--ignore-eos,!--no-ignore-eos": CLI11 prints the negated name's value
  // ({false}) beside such a pair, which reads as the default; the default is on.
  CLI::Option* ignore_eos =
      app.add_flag("--ignore-eos", o.ignore_eos,
                   "Generate exactly each request's output tokens (no synthetic end-of-sequence); "
                   "the default");
  app.add_flag_callback(
         "--no-ignore-eos", [&o] { o.ignore_eos = false; },
         "Let the server's synthetic end-of-sequence stop requests early")
      ->excludes(ignore_eos);
  app.add_option("--slo-ttft-ms", o.slo.ttft_ms, "Goodput SLO: time to first token (ms)")
      ->check(neupims::Positive());
  app.add_option("--slo-tpot-ms", o.slo.tpot_ms, "Goodput SLO: time per output token (ms)")
      ->check(neupims::Positive());
  app.add_option("--slo-e2el-ms", o.slo.e2el_ms, "Goodput SLO: end-to-end latency (ms)")
      ->check(neupims::Positive());
  app.add_option("--result-json", result_json, "Write the results JSON here")
      ->check(neupims::NonEmpty());
  app.add_option("--result-csv", result_csv,
                 "Write one CSV line per request here (a sweep writes FILE.rate<R>.csv per run)")
      ->check(neupims::NonEmpty());
  app.add_option("--report", report_dir, "Write an HTML report to DIR/report.html")
      ->check(neupims::NonEmpty());
  app.add_option("--metrics", o.metrics,
                 "The server's Prometheus endpoint HOST:PORT (neupims serve --metrics-port), read "
                 "with every server sample: the report's hardware view (utilisation, power, "
                 "energy per token)");
  app.add_option("--timeout-s", o.timeout_s, "Per-request deadline in seconds (0: none)")
      ->check(neupims::InRange(neupims::option_ranges::kRequestTimeoutS))
      ->capture_default_str();
  app.add_option("--connect-timeout-s", o.connect_timeout_s,
                 "Seconds to wait for the server before giving up")
      ->check(neupims::InRange(neupims::option_ranges::kConnectTimeoutS))
      ->capture_default_str();
  neupims::loadgen::AddClientSecurityFlags(&app, &o.tls, &auth_token_file);
  app.add_flag("-q,--quiet", o.quiet,
               "Nothing on stderr but errors (no workload report, progress)");
  app.add_flag("!--no-progress", o.progress, "No progress bar or periodic progress lines");
  neupims::loadgen::CnnLoadOptions cnn;
  app.add_option("--cnn-model", cnn.model,
                 "CNN mode: drive inference.GRPCInferenceService/ModelInfer (KServe v2) of this "
                 "model at --server instead of the LLM (neupims serve --cnn-model)");
  app.add_option("--cnn-requests", cnn.requests, "CNN mode: requests to send")
      ->check(neupims::InRange(neupims::option_ranges::kCnnRequests))
      ->capture_default_str();
  app.add_option("--cnn-concurrency", cnn.concurrency,
                 "CNN mode, closed loop: requests in flight (each client sends its next when the "
                 "previous is answered)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--cnn-rate", cnn.rate,
                 "CNN mode, open loop: Poisson arrivals at this many requests/s (instead of the "
                 "closed loop)")
      ->check(neupims::InRange(neupims::option_ranges::kCnnRateRps));
  app.add_option("--cnn-batch", cnn.batch, "CNN mode: images per request")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  if (!auth_token_file.empty()) {
    absl::StatusOr<std::string> token = neupims::loadgen::ReadAuthToken(auth_token_file);
    if (!token.ok()) {
      absl::FPrintF(stderr, "error: %s\n", token.status().message());
      return 1;
    }
    o.auth_token = *token;
  }
  if (!cnn.model.empty()) {
    cnn.server = o.server;
    cnn.auth_token = o.auth_token;
    cnn.tls = o.tls;
    cnn.seed = o.workload.seed;
    if (o.timeout_s > 0) cnn.timeout_s = o.timeout_s;
    cnn.connect_timeout_s = o.connect_timeout_s;
    absl::StatusOr<neupims::loadgen::CnnLoadResult> r = neupims::loadgen::RunCnnLoad(cnn);
    if (!r.ok()) {
      absl::FPrintF(stderr, "error: %s\n", r.status().message());
      return 1;
    }
    neupims::loadgen::PrintCnnSummary(cnn, *r, stdout);
    return 0;
  }

  absl::Status valid = neupims::loadgen::ValidateOptions(o);
  if (!valid.ok()) {
    absl::FPrintF(stderr, "error: %s\n", valid.message());
    return 2;
  }

  LoadInfo info;
  absl::StatusOr<std::vector<RunResult>> runs = neupims::loadgen::RunLoad(o, &info);
  if (!runs.ok()) {
    absl::FPrintF(stderr, "error: %s\n", runs.status().message());
    return 1;
  }

  for (size_t i = 0; i < runs->size(); ++i) {
    if (i > 0) std::printf("\n");
    neupims::loadgen::PrintSummary((*runs)[i], o.slo,
                                   i < info.client.size() ? &info.client[i] : nullptr, stdout);
  }
  if (runs->size() > 1) {
    std::printf("\n");
    neupims::loadgen::PrintSweepTable(*runs, stdout);
  }
  std::fflush(stdout);

  int exit_code = 0;
  auto check = [&](const absl::Status& s) {
    if (!s.ok()) {
      absl::FPrintF(stderr, "error: %s\n", s.message());
      exit_code = 1;
    }
  };
  if (!result_json.empty()) {
    check(WriteOutput(result_json, neupims::loadgen::ResultJson(*runs, o, info).dump(2) + "\n",
                      "--result-json"));
  }
  if (!result_csv.empty()) {
    const std::vector<std::string> paths = runs->size() > 1
                                               ? neupims::loadgen::SweepPaths(result_csv, *runs)
                                               : std::vector<std::string>{result_csv};
    for (size_t i = 0; i < runs->size(); ++i) {
      check(WriteOutput(paths[i], neupims::loadgen::RequestsCsv((*runs)[i]), "--result-csv"));
    }
  }
  if (!report_dir.empty()) {
    neupims::loadgen::ReportInfo ri;
    ri.server = o.backend == neupims::loadgen::Backend::kOpenAi ? o.base_url : o.server;
    ri.model = info.server.model;
    ri.device = info.server.device;
    ri.mode = info.server.mode;
    ri.workload = info.workload_description;
    std::vector<std::string> args(argv, argv + argc);
    ri.command = absl::StrJoin(args, " ");
    ri.generated_at = Now();
    absl::Status s = neupims::loadgen::WriteHtmlReport(report_dir, *runs, ri);
    check(s);
    if (s.ok() && !o.quiet) {
      absl::FPrintF(stderr, "report: %s/report.html\n", report_dir);
    }
  }
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  // A server that drops the connection mid-write (an HTTPS server refusing a client without its
  // certificate, a server shutting down) must be a failed request, not death by SIGPIPE: OpenSSL
  // writes to the socket with write(2), which has no MSG_NOSIGNAL.
  signal(SIGPIPE, SIG_IGN);
  // A workload larger than the process may allocate (-n 100000000 under a ulimit): an error
  // saying so, as in `neupims`, not an abort.
  return neupims::ExitOnOutOfMemory([&] { return RunBench(argc, argv); },
                                    "lower -n, or raise the memory limit");
}
