#include "tools/workload/workload_flags.h"

#include <charconv>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/option_ranges.h"
#include "common/status_macros.h"
#include "tools/workload/range_flag.h"

namespace neupims::workload {
namespace {

// "N" or "MIN-MAX".
bool ParseRange(absl::string_view s, int64_t* lo, int64_t* hi) {
  std::vector<absl::string_view> parts = absl::StrSplit(s, '-');
  if (parts.size() == 1) {
    if (!absl::SimpleAtoi(parts[0], lo)) return false;
    *hi = *lo;
    return true;
  }
  return parts.size() == 2 && absl::SimpleAtoi(parts[0], lo) && absl::SimpleAtoi(parts[1], hi);
}

// Refuses arrivals the int64-nanosecond simulated clock cannot hold (they would wrap to 0).
absl::Status CheckArrivals(const std::vector<RequestSpec>& requests, absl::string_view source) {
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!(requests[i].arrival_s <= kMaxArrivalS)) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": request ", i, " arrives at ", requests[i].arrival_s,
                       " s, beyond the simulated clock's limit of ", kMaxArrivalS, " s"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

void AddWorkloadFlags(CLI::App* cmd, WorkloadFlags* f) {
  cmd->add_option("--dataset", f->dataset,
                  "Request lengths: sharegpt, alpaca (../shared/datasets) or a TSV file")
      ->capture_default_str();
  CLI::Option* trace =
      cmd->add_option("--trace", f->trace,
                      "Trace with arrival times (.csv or .jsonl; docs/workloads.md); overrides "
                      "--dataset and the arrival flags")
          ->check(NonEmpty());
  // A trace brings its own lengths: --synthetic with it was ignored in silence.
  cmd->add_option("--synthetic", f->synthetic,
                  "Synthetic lengths instead of a dataset: PROMPT:OUTPUT (fixed) or "
                  "PMIN-PMAX:OMIN-OMAX (uniform)")
      ->check(NonEmpty())
      ->excludes(trace);
  cmd->add_option("-n,--num-requests", f->num_requests, "Requests to send")
      ->check(CLI::Range(int64_t{1}, int64_t{100000000}))
      ->capture_default_str();
  cmd->add_option("--seed", f->seed, "Sampling and arrival seed")
      ->check(Uint64())
      ->capture_default_str();
  cmd->add_option("--request-rate", f->request_rate,
                  "Requests per second (Poisson, or gamma with --burstiness), or inf: all at t=0")
      ->capture_default_str();
  cmd->add_option("--burstiness", f->burstiness,
                  "Gamma shape of inter-arrival times (1 = Poisson, < 1 burstier)")
      ->check(InRange(option_ranges::kBurstiness))
      ->capture_default_str();
  cmd->add_option("--max-concurrency", f->max_concurrency,
                  "Closed loop: keep this many requests in flight (needs --request-rate inf)")
      ->check(NonNegative());
}

absl::StatusOr<Workload> BuildWorkload(const WorkloadFlags& f, int64_t max_seq_len) {
  Workload w;
  LengthFilter filter{max_seq_len};
  if (!f.trace.empty()) {
    ASSIGN_OR_RETURN(w.requests, LoadTrace(f.trace, filter, &w.report));
    if (w.requests.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--trace ", f.trace, ": no usable requests: ", DescribeKept(w.report, max_seq_len)));
    }
    if (static_cast<int64_t>(w.requests.size()) > f.num_requests) {
      w.requests.resize(f.num_requests);
    }
    RETURN_IF_ERROR(CheckArrivals(w.requests, absl::StrCat("--trace ", f.trace)));
    w.description = absl::StrCat("trace ", f.trace);
    return w;
  }
  ASSIGN_OR_RETURN(w.arrivals, ParseArrival(f.request_rate, f.burstiness, f.max_concurrency));
  std::vector<LengthPair> lengths;
  if (!f.synthetic.empty()) {
    std::vector<absl::string_view> parts = absl::StrSplit(f.synthetic, ':');
    SyntheticOptions so;
    if (parts.size() != 2 || !ParseRange(parts[0], &so.prompt_min, &so.prompt_max) ||
        !ParseRange(parts[1], &so.output_min, &so.output_max)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--synthetic '", f.synthetic, "': expected PROMPT:OUTPUT or PMIN-PMAX:OMIN-OMAX"));
    }
    absl::StatusOr<std::vector<LengthPair>> synthetic =
        SyntheticLengths(so, f.num_requests, f.seed, filter);
    if (!synthetic.ok()) {  // the lengths of the spec: name the flag, as for its form
      return absl::Status(
          synthetic.status().code(),
          absl::StrCat("--synthetic '", f.synthetic, "': ", synthetic.status().message()));
    }
    lengths = *std::move(synthetic);
    w.report.source = "synthetic " + f.synthetic;
    w.report.rows = w.report.kept = static_cast<int64_t>(lengths.size());
  } else {
    ASSIGN_OR_RETURN(lengths, LoadNamedDataset(f.dataset, filter, &w.report));
  }
  ASSIGN_OR_RETURN(w.requests, SampleRequests(lengths, f.num_requests, f.seed, w.arrivals));
  RETURN_IF_ERROR(CheckArrivals(w.requests, absl::StrCat("--request-rate ", f.request_rate)));
  std::string arrival;
  switch (w.arrivals.kind) {
    case ArrivalKind::kAllAtOnce:
      arrival = "all at t=0";
      break;
    case ArrivalKind::kPoisson:
      arrival = absl::StrCat("Poisson ", w.arrivals.rate_per_s, "/s");
      break;
    case ArrivalKind::kGamma:
      arrival =
          absl::StrCat("gamma ", w.arrivals.rate_per_s, "/s burstiness ", w.arrivals.burstiness);
      break;
    case ArrivalKind::kClosedLoop:
      arrival = absl::StrCat("closed loop, concurrency ", w.arrivals.concurrency);
      break;
  }
  w.description = absl::StrCat(f.synthetic.empty() ? f.dataset : "synthetic " + f.synthetic,
                               " (seed ", f.seed, "), ", arrival);
  return w;
}

nlohmann::json WorkloadJson(const WorkloadFlags& f, const Workload& w) {
  nlohmann::json j;
  j["source"] = w.report.source;
  j["description"] = w.description;
  j["rows"] = w.report.rows;
  j["kept"] = w.report.kept;
  j["dropped_too_long"] = w.report.dropped_too_long;
  j["dropped_zero_output"] = w.report.dropped_zero_output;
  j["dropped_zero_prompt"] = w.report.dropped_zero_prompt;
  j["num_requests"] = static_cast<int64_t>(w.requests.size());
  j["seed"] = f.seed;
  j["request_rate"] = f.request_rate;
  j["burstiness"] = f.burstiness;
  j["max_concurrency"] = f.max_concurrency;
  return j;
}

}  // namespace neupims::workload
